"""`ffm.map`: the product's entry point. pmapgen for every Einsum, the join/search for the
objective, then the chosen pmappings rebuilt into one LoopTree mapping and evaluated by
`looptree.evaluate` (the same model the export is re-checked with)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

import arch as arch_specs
import workloads
from arch.model import Arch
from ffm.budgets import Proof, prove_energy
from ffm.capacity import NoValidMapping, NothingFoundInTime, needed_capacities
from ffm.descent import Descent, descend
from ffm.edp_proof import EdpProof, edp_of, prove_edp
from ffm.join import join
from ffm.latency_bound import latency_lower_bound
from ffm.latency_proof import LATENCY_SET_TIME, FloorsProof, LatencyProof, prove_at_floors, prove_latency
from ffm.pareto_proof import WALL_BOXES, ParetoProof, prove_pareto
from ffm.search import BOUND_RTOL, OBJECTIVES, criteria, full_mapping, search
from looptree.evaluation import Evaluation, evaluate
from looptree.mapping_io import export
from looptree.nodes import Mapping
from pmapgen import Constraints, Stats, generate_all
from pmapgen.all_einsums import union
from specio import SpecError
from workloads.model import Workload

# DESIGN §9; only the full mapspace is implemented so far
MAPSPACES = ("ffm", "unfused", "flat", "fusemax", "transfusion", "mas_attention", "fusecu")
AVAILABLE_MAPSPACES = ("ffm",)


@dataclass(frozen=True)
class MapStats:
    """What the mapper did: pmapgen per Einsum (Einsums identical up to names are generated
    once and report the same Stats; empty when the energy proof completed without it),
    partial mappings kept after each join step (of the search pass that produced the
    result: the clean pass when ε-pruning ran first), and wall seconds per phase
    ('pmapgen', 'join', 'proof', 'descent', 'evaluation')."""
    pmapgen: dict[str, Stats]
    join_steps: tuple[tuple[str, int], ...]
    seconds: dict[str, float]
    proof: Proof | None = None  # the energy proof, run first with a time limit (ffm.budgets)
    descent: tuple[Descent, ...] = ()  # coordinate descent after the join, or the proof if it ran (ffm.descent)
    objective: str = "energy"  # what the result is optimal for: a proof completes only the energy objective
    # latency, edp and pareto: seconds every mapping takes at least (`ffm.latency_bound`), and
    # whether the result meets its objective's lower bound, so that none is better: latency
    # that one; EDP the energy proof's bound times it; pareto, the frontier's least latency it
    latency_lower: float | None = None
    bound_reached: bool = False
    latency_proof: LatencyProof | None = None  # latency with a time limit: the set at the bound, run first
    # latency, EDP and pareto with a time limit: the energy proof with every Einsum held to
    # its latency floor, run before all else (`ffm.latency_proof.prove_at_floors`)
    floors: FloorsProof | None = None
    edp_proof: EdpProof | None = None  # EDP with a time limit, after the energy proof (`ffm.edp_proof`)
    pareto_proof: ParetoProof | None = None  # pareto with a time limit, after the energy proof (`ffm.pareto_proof`)

    @property
    def exhaustive(self) -> bool:
        """Whether pmapgen ran, and to the end for every Einsum (no time limit hit); it does
        not run when the energy proof, which runs first, completes (`ffm.map`)."""
        return bool(self.pmapgen) and all(s.complete for s in self.pmapgen.values())

    @property
    def complete(self) -> bool:
        """Whether the result is provably optimal: pmapgen was exhaustive, or it was cut short
        and the energy proof completed (its tables gave the result); for latency and EDP, also
        when the result meets its lower bound (`bound_reached`), and for EDP when the EDP
        proof closed (`ffm.edp_proof`). A pareto frontier needs pmapgen exhaustive or the
        pareto proof closed (`ffm.pareto_proof`): the energy proof alone makes only its
        lowest-energy point exact (`energy_end`), the latency bound at most its least-latency
        point."""
        if self.objective == "edp" and self.edp_proof is not None and self.edp_proof.proven:
            return True
        if self.objective == "pareto" and self.pareto_proof is not None and self.pareto_proof.proven:
            return True
        if self.objective in ("latency", "edp"):
            return self.exhaustive or self.bound_reached
        if self.objective != "energy":
            return self.exhaustive
        return self.exhaustive or (self.proof is not None and self.proof.proven)

    @property
    def latency_end(self) -> bool:
        """pareto: whether the frontier's least-latency point is exact: the latency optimum
        and the least energy at it (pmapgen exhaustive, or the energy proof at the latency
        floors completed with a mapping at the bound)."""
        return self.exhaustive or (self.floors is not None and self.floors.least)

    @property
    def energy_end(self) -> bool:
        """pareto: whether the frontier's lowest-energy point is the proven energy optimum
        (pmapgen exhaustive, or the energy proof, which ran first, completed)."""
        return self.exhaustive or (self.proof is not None and self.proof.proven)


@dataclass(frozen=True, eq=False)
class MapResult:
    """The optimal mapping(s) for the objective, evaluated, with the mapper's statistics.

    `evaluations` holds one Evaluation for energy/latency/edp, or the whole energy-latency
    frontier (by increasing energy) for pareto; `joined` holds the search's rows in the same
    order (their energy and latency are what the join computed). `workload_ref`/`arch_ref`
    are how the export names the specs (a shipped name or a path, when known)."""
    workload: Workload
    arch: Arch
    objective: str
    mapspace: str
    evaluations: tuple[Evaluation, ...]
    joined: pd.DataFrame
    stats: MapStats
    workload_ref: str
    arch_ref: str

    @property
    def best_index(self) -> int:
        """The chosen point: the only one, or the lowest-EDP point of a pareto frontier."""
        return int(np.argmin([ev.edp for ev in self.evaluations]))

    @property
    def evaluation(self) -> Evaluation:
        return self.evaluations[self.best_index]

    @property
    def mapping(self) -> Mapping:
        return self.evaluation.mapping

    @property
    def mappings(self) -> tuple[Mapping, ...]:
        return tuple(ev.mapping for ev in self.evaluations)

    def export(self) -> dict:
        """The DESIGN §8 document of the chosen mapping, plus what is proven of it under
        "optimality" (`optimality`); for pareto, plus the frontier's totals under "pareto"."""
        doc = export(self.evaluation, self.workload_ref, self.arch_ref, dict(self.workload.variables),
                     self.objective)
        doc["optimality"] = self.optimality()
        if self.objective == "pareto":
            doc["pareto"] = [{"energy_pJ": ev.energy_pJ, "latency_s": ev.latency_s, "edp": ev.edp}
                             for ev in self.evaluations]
        return doc

    def optimality(self) -> dict:
        """Whether the result is proven optimal for its objective (`MapStats.complete`), the
        lower bounds the mapper has on the optimum's energy (the energy proof's), latency
        (`ffm.latency_bound`) and EDP (their product; None where it has none), and the
        result's value over its objective's bound ("within", 1.0 when proven). For pareto,
        instead of "within", whether each end of the frontier is proven."""
        s, ev = self.stats, self.evaluation
        energy = s.proof.lower if s.proof is not None and s.proof.lower > 0 else None
        latency = s.latency_lower
        edp = energy * latency if energy is not None and latency is not None else None
        out = {"proven": s.complete, "lower_bounds": {"energy_pJ": energy, "latency_s": latency, "edp": edp}}
        if self.objective == "pareto":
            return {**out, "energy_end_proven": s.energy_end, "latency_end_proven": s.exhaustive or s.bound_reached,
                    "latency_end_least_energy": s.latency_end}
        value, low = {"energy": (ev.energy_pJ, energy), "latency": (ev.latency_s, latency),
                      "edp": (ev.edp, edp)}[self.objective]
        return {**out, "within": 1.0 if s.complete else value / low if low else None}


def _check_choice(value: str, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:
        raise SpecError(what, str(value), f"expected one of {', '.join(choices)}")


def _load(workload, arch, variables: dict | None) -> tuple[Workload, Arch, str, str]:
    if isinstance(workload, Workload):
        if variables:
            raise SpecError("variables", None, "can only be set when the workload is given as a name, path or dict")
        w = workload
    else:
        w = workloads.load(workload, **(variables or {}))
    a = arch if isinstance(arch, Arch) else arch_specs.load(arch)
    return w, a, _ref(workload, w), _ref(arch, a)


def _ref(given, loaded) -> str:
    """How an export names a spec: as given if a name or path, else its file, else its name."""
    if isinstance(given, (str, Path)):
        return str(given)
    return loaded.source if Path(loaded.source).is_file() else loaded.name


def map(workload, arch, objective: str = "energy", mapspace: str = "ffm", variables: dict | None = None,
        progress: bool = True, constraints: dict[str, Constraints] | None = None,
        workers: int | None = None, time_limit: float | None = None, prove: bool = True,
        proof_time_limit: float | None = None, descent: bool = True,
        latency_set_time: float | None = LATENCY_SET_TIME, floors_proof: bool = True,
        pareto_proof: bool = True) -> MapResult:
    """The optimal fused mapping(s) of `workload` on `arch` for `objective` (energy, latency,
    edp, or pareto: the energy-latency frontier).

    `workload`/`arch` may be shipped names, paths, dicts or loaded objects; `variables`
    override the workload's variables. `time_limit` (seconds per Einsum) cuts pmapgen short
    where it would take longer; the result is then the best found, not provably optimal, and
    `result.stats.complete` is False (None: exhaustive). For the energy objective with a
    time limit, the energy proof runs first (`prove`, `ffm.budgets`: searches of
    `proof_time_limit` seconds per Einsum and step, default `time_limit`); when it completes,
    its result is the exact optimum and pmapgen's time-limited tables are never built
    (`result.stats.pmapgen` is empty). Otherwise they are, their join joins the proof's
    tables too, and the best mapping is improved by coordinate descent within each Einsum's
    compatibility group (`descent`, `ffm.descent`: searches of `time_limit` seconds);
    `result.stats.proof` / `result.stats.descent` say how far they got. For pareto with a
    time limit the proof runs first too and pmapgen's tables join its tables: a completed
    proof makes the frontier's lowest-energy point the energy optimum (`stats.energy_end`);
    latency and EDP run the same flow, then their own join of every table found (the proof
    proves neither optimal: `ffm.latency_bound` may). Before all that, with `prove` and
    `floors_proof`, latency, EDP and pareto run the energy proof with every Einsum held to
    its latency floor (`ffm.latency_proof.prove_at_floors`, `result.stats.floors`): a
    mapping it finds is at the latency bound, so latency-optimal, and the least energy at it
    when the proof completes. For latency it is then the result and nothing else runs; for
    EDP and pareto its tables join their join. Latency may run the latency set at that bound
    instead (`ffm.latency_proof.prove_latency`, within `latency_set_time` seconds of wall;
    None or 0: not run; only without the floors proof): when its tables, complete or as far
    as its roots got, join to a mapping at the bound, that is the result, proven, and
    nothing else runs. Pareto, with `pareto_proof`, when the floors proof and the energy
    proof both completed, then sweeps the frontier from its least-latency end with complete
    tables over the boxes no known mapping dominates (`ffm.pareto_proof`,
    `result.stats.pareto_proof`); when it closes, the frontier is exact and pmapgen does
    not run. Raises SpecError for bad input and NoValidMapping (naming the
    capacity each finite level would need) when nothing fits, NothingFoundInTime when the
    time limit cut pmapgen short before any valid mapping.
    """
    _check_choice(objective, OBJECTIVES, "objective")
    _check_choice(mapspace, MAPSPACES, "mapspace")
    if mapspace not in AVAILABLE_MAPSPACES:
        raise SpecError("mapspace", mapspace, f"not yet available (available: {', '.join(AVAILABLE_MAPSPACES)}; "
                                              f"planned: {', '.join(MAPSPACES[1:])})")
    w, a, wref, aref = _load(workload, arch, variables)
    seconds: dict[str, float] = {}
    order = tuple(w.einsum_names)
    # latency, pareto and EDP with a time limit run the energy objective's flow (the proof,
    # pmapgen, the descent and its fusion moves), then one join for the objective of every
    # table it found (pmapgen's pruned on the objective's criteria): the fused tables the
    # energy flow finds are what time-limited latency tables lack at batch 64
    # (docs/mapper.md, "Time limit" and "Step 36")
    flow = "energy" if objective in ("latency", "pareto", "edp") and time_limit is not None else objective
    join_tables = lambda tabs, name, known: _search(tabs, w, a, flow, progress, name, known)  # noqa: E731
    generated: dict = {}  # pmapgen's tables (time-limited or exhaustive), once run
    results: dict = {}  # what the chosen rows index: pmapgen's tables, the proof's, or both
    found = None  # the best mapping of `results` (a SearchResult)

    def run_pmapgen(join_them: bool = True) -> None:
        nonlocal generated, results, found
        start = time.perf_counter()
        generated = generate_all(w, a, constraints, objectives=criteria(objective), workers=workers,
                                 progress=progress, time_limit=time_limit)
        seconds["pmapgen"] = time.perf_counter() - start
        start = time.perf_counter()
        # the proof's tables first: their labels stay, so the proof's best still indexes them
        results = union(results, generated) if results else generated
        if not join_them:
            return
        known = None if found is None or found.best.empty else float(found.best["energy"].iloc[0])
        joined = join_tables({e: t for e, (t, _, _) in results.items()}, "join", known)
        if known is None or (not joined.best.empty and float(joined.best["energy"].iloc[0]) < known):
            found = joined
        seconds["join"] = time.perf_counter() - start

    # the energy proof runs first, from no mapping: its minima's rising searches find each
    # Einsum's least energy faster than a time-limited pmapgen finds a good mapping, and when
    # it completes, that pmapgen is not needed at all (docs/mapper.md, "Step 25"). Only when
    # it does not are pmapgen's tables built, for the join and coordinate descent. For pareto
    # and EDP they are always built, for the points of lower latency
    # latency, EDP and pareto: first the energy proof with every Einsum held to its latency
    # floor (docs/mapper.md, "Step 56"). A mapping it finds is at the latency bound, so
    # latency-optimal, and the least energy at it once the proof completes: for latency that
    # is the result, and nothing else runs
    floors = None
    if objective != "energy" and time_limit is not None and prove and floors_proof:
        floors = prove_at_floors(w, a, constraints, time_limit if proof_time_limit is None else proof_time_limit,
                                 workers, progress, join_tables)
        seconds["floors proof"] = floors.seconds
        if objective == "latency" and floors.met:
            results, found = floors.tables, floors.found
    # latency without the floors proof: the set at the bound; when its join meets the bound
    # the result is proven and the energy flow is not needed (docs/mapper.md, "Step 54").
    # Not after the floors proof: where that finds no mapping at the bound (gpt3 batch 64, in
    # 150 s since Step 61) the set, whose searches are heavier, finds none either (Step 56)
    latency_proof = None
    if objective == "latency" and time_limit is not None and latency_set_time and floors is None:
        latency_proof = prove_latency(w, a, constraints, latency_set_time,
                                      # (no bar: it joins after each root once every Einsum has rows)
                                      lambda tabs: _search(tabs, w, a, objective, False, "join (latency set)"),
                                      workers, progress)
        seconds["latency set"] = latency_proof.seconds
        if latency_proof.met:
            results, found = latency_proof.tables, latency_proof.found
    done = (latency_proof is not None and latency_proof.met) or (objective == "latency" and floors is not None
                                                                   and floors.met)
    proof = None
    if prove and flow == "energy" and time_limit is not None and not done:
        def seed() -> tuple[dict, float]:  # the proof's minima join held no mapping: pmapgen's, if any
            run_pmapgen()
            return generated, math.inf if found.best.empty else float(found.best["energy"].iloc[0])

        start = time.perf_counter()
        proven, better, proof = prove_energy(w, a, math.inf, {}, constraints,
                                             time_limit if proof_time_limit is None else proof_time_limit,
                                             workers, progress, join_tables, seed)
        seconds["proof"] = time.perf_counter() - start - seconds.get("pmapgen", 0.0) - seconds.get("join", 0.0)
        if better is not None:  # the optimum, or the best mapping the proof's tables hold
            results, found = proven, better
            if flow != objective and generated:  # the seed's pmapgen ran in the proof: keep its rows
                results = union(results, generated)  # (perhaps again: a repeated row changes no optimum)
    # the proof's minima showed some Einsum has no pmapping at all (`prove_energy`)
    impossible = proof is not None and math.isinf(proof.lower)
    # EDP: the floors proof's mapping (or the energy proof's, if its EDP is lower) proven
    # optimal by energy proofs over intervals of latency (`ffm.edp_proof`, docs/mapper.md
    # "Step 56"); when they close, that is the result, and pmapgen is not needed
    edp_proof = None
    if objective == "edp" and floors is not None and floors.met and proof is not None \
            and 0 < proof.lower < math.inf:
        candidate = min((floors.tables, floors.found), (results, found), key=lambda c: edp_of(c[1]))
        edp_proof = prove_edp(w, a, constraints, candidate, proof.lower,
                              time_limit if proof_time_limit is None else proof_time_limit, workers, progress,
                              join_tables)
        seconds["edp proof"] = edp_proof.seconds
        if edp_proof.proven:
            results, found, done = edp_proof.tables, edp_proof.found, True
        elif edp_proof.tables is not floors.tables and edp_proof.tables is not results:  # a better one: joined too
            results = union(results, edp_proof.tables) if results else edp_proof.tables
    # pareto: the frontier of the floors proof's and the energy proof's tables, both complete,
    # proven exact box by box (`ffm.pareto_proof`, docs/mapper.md "Step 57"); when it closes
    # its join is the result, and pmapgen is not needed
    frontier_proof = None
    if objective == "pareto" and pareto_proof and floors is not None and floors.met and proof is not None \
            and proof.proven and results:
        each = time_limit if proof_time_limit is None else proof_time_limit
        frontier_proof = prove_pareto(w, a, constraints, union(results, floors.tables), proof.lower,
                                      each, workers, progress,
                                      lambda tabs: _search(tabs, w, a, objective, progress, "join (pareto proof)"),
                                      seconds=WALL_BOXES * each * len(order))
        seconds["pareto proof"] = frontier_proof.seconds
        results = frontier_proof.tables
        found, done = frontier_proof.found, frontier_proof.proven
    if (flow != objective or not (proof is not None and proof.proven)) and not generated and not impossible \
            and not done:
        # latency, pareto and EDP after a completed proof: the energy join of these tables would only
        # feed the descent, which does not run; the objective's own join below takes them
        run_pmapgen(join_them=not (flow != objective and proof is not None and proof.proven))
    # pareto, EDP: its tables join theirs (a pareto proof that ran holds them already)
    if floors is not None and floors.met and flow != objective and not done and frontier_proof is None:
        if found is None or found.best.empty:  # (the first tables of a union keep their labels)
            results, found = (union(floors.tables, results) if results else floors.tables), floors.found
        else:
            results = union(results, floors.tables)
    exhaustive = bool(generated) and all(s.complete for _, _, s in generated.values())
    nothing = found is None or found.best.empty

    descents: list[Descent] = []
    searched: set = set()  # (Einsum, key) pairs the descents searched
    if descent and flow == "energy" and not exhaustive and not nothing and not done \
            and not (proof is not None and proof.proven):
        start = time.perf_counter()
        results, found, d = descend(w, a, results, found, join_tables, constraints, time_limit, workers, progress,
                                    searched=searched)
        descents.append(d)
        seconds["descent"] = time.perf_counter() - start
        if proof is not None:  # the best known mapping bounds the optimum from above
            proof = replace(proof, bound=min(proof.bound, float(found.best["energy"].iloc[0])))

    if flow != objective and not nothing and not done:  # latency, pareto or EDP over every table found
        start = time.perf_counter()
        found = _search({e: t for e, (t, _, _) in results.items()}, w, a, objective, progress, f"join ({objective})")
        seconds["join"] = seconds.get("join", 0.0) + time.perf_counter() - start
        if proof is not None:  # a mapping's energy bounds the energy optimum from above
            proof = replace(proof, bound=min(proof.bound, float(found.best["energy"].min())))

    if nothing and not exhaustive and not impossible:
        raise NothingFoundInTime(w.name, a, time_limit)
    if nothing:
        def full_mappings(loose: Arch) -> pd.DataFrame:
            res = generate_all(w, loose, constraints, objectives=criteria(objective), workers=workers, progress=False,
                               time_limit=time_limit)
            return join({e: t for e, (t, _, _) in res.items()}, w, loose, criteria(objective), keep_peak=True)
        raise NoValidMapping(w.name, a, needed_capacities(a, full_mappings, progress))

    start = time.perf_counter()
    evaluations = tuple(evaluate(full_mapping(row, results, order), w, a) for _, row in found.best.iterrows())
    seconds["evaluation"] = time.perf_counter() - start

    pmapgen_stats = {e: st for e, (_, _, st) in generated.items()}
    lower = None if objective == "energy" else latency_lower_bound(w, a)
    if objective == "edp":  # (the energy proof ran first: its bound on the energy, times the latency's)
        reached = proof is not None and evaluations[0].edp <= proof.lower * lower * (1 + BOUND_RTOL)
    else:
        reached = lower is not None and min(ev.latency_s for ev in evaluations) <= lower * (1 + BOUND_RTOL)
    stats = MapStats(pmapgen_stats, tuple(found.steps), seconds, proof, tuple(descents), objective, lower, reached,
                     latency_proof, floors, edp_proof, frontier_proof)
    return MapResult(w, a, objective, mapspace, evaluations, found.best, stats, wref, aref)


def _search(tables: dict[str, pd.DataFrame], w: Workload, a: Arch, objective: str, progress: bool, desc: str,
            known: float | None = None):
    """`ffm.search.search` with a progress bar over join steps (reset for every pass)."""
    order = tuple(w.einsum_names)
    bar = tqdm(total=len(order), desc=desc, unit="einsum", disable=not progress)
    passes = [0]

    def step(einsum: str, kept: int) -> None:
        if einsum == order[0]:  # the search may run several passes (ε-pruned, then clean)
            passes[0] += 1
            if passes[0] > 1:
                bar.reset()
                bar.set_description(f"{desc} pass {passes[0]}")
        bar.set_postfix_str(f"{einsum}: {kept} kept")
        bar.update()

    found = search(tables, w, a, objective, on_step=step, known=known)
    bar.close()
    return found

