"""An Einsum's mirror symmetry, which halves its prefix search (docs/pmapgen.md, "Mirror
symmetry").

QK[b,m,p,h] = Q[b,m,h,e] * K[b,p,h,e] is unchanged by swapping Q with K and m with p when
Q and K are alike (bits, role, sharing, the levels that may keep them) and m and p have
one size: every pmapping's mirror image is a pmapping with the same counts, so the same
energy, latency and reservations. Its compatibility key is the mirror image of the
original's. So the search need only visit one of each pair of mirrored fused structures
(`Key.fused`) and add the mirror image of that one's survivors for the other; structures
that are their own mirror image are searched as before.

A search with fixed c_T (`Constraints.tensor_keys`: the energy proof's keyed searches)
uses the mirror within itself only when those c_T are their own mirror image
(`self_mirror`, thirty-ninth session). Otherwise the search at the mirror image of its
c_T keeps exactly the mirror images of its rows: `key_mirror` finds the symmetry,
`Mirror.tensor_keys` maps the c_T and `mirror_result` builds that search's result from
this one's (thirty-second session: a mirror-image pair of QK's keys costs one search).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from arch.model import Arch
from pmapgen.constraints import Constraints
from pmapgen.fixed_key import narrowed
from pmapgen.generate import result, template_rows
from pmapgen.templates import Template, relabeled, space
from workloads.model import Einsum, Workload


@dataclass(frozen=True)
class Mirror:
    """Two inputs swapped (`tensors`), and the rank variable only one of them has with the
    other's (`ranks`, empty when they have the same ones)."""
    tensors: dict
    ranks: dict
    shared: tuple  # the search's shared tensors: the head of a fused structure, in order

    def tensor(self, t: str) -> str:
        return self.tensors.get(t, t)

    def rank(self, r: str) -> str:
        return self.ranks.get(r, r)

    def nodes(self, nodes) -> tuple:
        """A pmapping's nodes, mirrored."""
        return relabeled(nodes, self.tensors, self.ranks)

    def c_t(self, einsum: Einsum, tensor: str, c_t: tuple) -> tuple:
        """The c_T a pmapping's mirror image gives the mirror of `tensor`, where the
        pmapping gives `tensor` `c_t` ((level, ((dim index, tile, spatial dim), ...)),
        dims by position in the tensor; loops None: any, as a backing group leaves them,
        `ffm.refine.backing_group`)."""
        level, loops = c_t
        if loops is None:
            return level, None
        ranks, image = einsum.use(tensor).ranks, einsum.use(self.tensor(tensor)).ranks
        return level, tuple((image.index(self.rank(ranks[i])), tile, sp) for i, tile, sp in loops)

    def tensor_keys(self, einsum: Einsum, keys: dict) -> dict:
        """`Constraints.tensor_keys` mirrored: the c_T the mirror images give."""
        return dict(sorted((self.tensor(t), self.c_t(einsum, t, c)) for t, c in keys.items()))

    def fused(self, fused: tuple) -> tuple:
        """The mirror image of a fused structure, as the search builds it: shared tensors'
        backing levels (in `shared` order), then the loops and backings placed while fused,
        each run of backings in (level, tensor) order, as one storage run places them."""
        n = len(self.shared)
        level = dict(fused[:n])
        head = tuple((t, level[self.tensor(t)]) for t in self.shared)
        events = [("loop", self.rank(x), s) if kind == "loop" else (kind, self.tensor(x), s)
                  for kind, x, s in fused[n:]]
        return head + _in_run_order(events)

    def drops(self, fused: tuple, final: bool) -> bool:
        """Whether a fused structure is the mirror image of one the search visits instead:
        decided on its part no later move reorders (all of it once `final`, else up to its
        last loop: backings placed next may join a run at its end), so a structure and
        every one extending it are decided alike."""
        n = len(self.shared)
        if not final:
            loops = [i for i, ev in enumerate(fused) if i >= n and ev[0] == "loop"]
            fused = fused[:loops[-1] + 1] if loops else fused[:n]
        own = self._normal(fused)
        return repr(self.fused(own)) < repr(own)

    def asymmetric(self, fused: tuple) -> bool:
        """Whether a (final) fused structure differs from its mirror image."""
        return self.fused(fused) != self._normal(fused)

    def _normal(self, fused: tuple) -> tuple:
        """A fused structure with each run of backings in (level, tensor) order."""
        n = len(self.shared)
        return fused[:n] + _in_run_order(list(fused[n:]))


def _in_run_order(events: list) -> tuple:
    out, run = [], []
    for ev in events + [None]:
        if ev is not None and ev[0] == "backing":
            run.append(ev)
            continue
        out += sorted(run, key=lambda e: (e[2], e[1]))
        run = []
        if ev is not None:
            out.append(ev)
    return tuple(out)


def find_mirror(einsum: Einsum, workload: Workload, sp, constraints: Constraints | None,
                shared: tuple) -> Mirror | None:
    """A mirror symmetry of `einsum` that the search space `sp` (`templates.Space`) keeps,
    or None. Only searches whose constraints the mirror maps onto themselves use one: none,
    a latency budget (a pmapping and its image take as long), and sets of c_T each the
    other's image (`keeps_key_sets`: QK held to Q's and K's producers' c_T, alike up to
    the swap); any other constraint may tell Q from K."""
    c = constraints or Constraints()
    if replace(c, latency_budget=None, tensor_key_sets={}) != Constraints():
        return None
    inputs = [u for u in einsum.inputs if len(set(u.ranks)) == len(u.ranks)]
    for i, a in enumerate(inputs):
        for b in inputs[i + 1:]:
            mirror = _mirror(einsum, workload, sp, a, b, shared)
            if mirror is not None and keeps_key_sets(mirror, einsum, c.tensor_key_sets):
                return mirror
    return None


def keeps_key_sets(mirror: Mirror, einsum: Einsum, sets: dict) -> bool:
    """Whether `Constraints.tensor_key_sets` are their own mirror image: each tensor's
    c_T, mirrored, the set of its image (so a pmapping gives them exactly when its mirror
    image does)."""
    image = {mirror.tensor(t): sorted((mirror.c_t(einsum, t, ct) for ct in cts), key=repr) for t, cts in sets.items()}
    return image == {t: sorted(cts, key=repr) for t, cts in sets.items()}


def self_mirror(einsum: Einsum, workload: Workload, sp, constraints: Constraints, shared: tuple) -> Mirror | None:
    """The mirror symmetry a keyed search (`Constraints.tensor_keys` its only constraint)
    may use within itself, or None: only when its c_T are their own mirror image (at batch
    1, QK keyed with Q and K both unfused, or both fused alike: the longest of QK's keyed
    searches, 5.5 s of 15 s). Then a pmapping gives those c_T exactly when its mirror
    image does, so the keyed search, like a search without constraints, need visit only
    one of each pair of mirrored fused structures."""
    if constraints.key is not None or not constraints.tensor_keys:
        return None
    mirror = find_mirror(einsum, workload, sp, replace(constraints, tensor_keys={}), shared)
    if mirror is None or mirror.tensor_keys(einsum, constraints.tensor_keys) != constraints.tensor_keys:
        return None
    return mirror


def _mirror(einsum: Einsum, workload: Workload, sp, a, b, shared: tuple) -> Mirror | None:
    ta, tb = workload.tensors[a.tensor], workload.tensors[b.tensor]
    if a.tensor == b.tensor or (ta.bits, ta.role, ta.weight, workload.is_shared(a.tensor)) \
            != (tb.bits, tb.role, tb.weight, workload.is_shared(b.tensor)):
        return None
    if any(getattr(sp, f)[a.tensor] != getattr(sp, f)[b.tensor] for f in ("allowed", "must", "backings")):
        return None
    only_a, only_b = sorted(set(a.ranks) - set(b.ranks)), sorted(set(b.ranks) - set(a.ranks))
    if len(only_a) != len(only_b) or len(only_a) > 1:
        return None
    ranks = {only_a[0]: only_b[0], only_b[0]: only_a[0]} if only_a else {}
    mirror = Mirror({a.tensor: b.tensor, b.tensor: a.tensor}, ranks, shared)
    r = mirror.rank
    if any(workload.rank_sizes[x] != workload.rank_sizes[r(x)] for x in ranks):
        return None
    if any({r(x) for x in u.ranks} != set(u.ranks) for u in einsum.tensor_uses if u not in (a, b)):
        return None
    if {r(x) for x in einsum.reduced} != set(einsum.reduced):
        return None
    if any(sp.max_loops.get(x) != sp.max_loops.get(r(x)) for x in ranks):
        return None
    for groups in sp.groups.values():
        own = {frozenset(g) for g in groups}
        if {frozenset((d, r(x)) for d, x in g) for g in groups} != own:
            return None
    return mirror


def key_mirror(einsum: str, workload: Workload, arch: Arch, constraints: Constraints | None) -> Mirror | None:
    """A mirror symmetry of `einsum` on every compute unit it may run on, for searches
    whose only constraints are fixed c_T (`Constraints.tensor_keys`), or None: the search
    at the mirror image of such a c_T keeps the mirror images of the search at it."""
    c = constraints or Constraints()
    if replace(c, tensor_keys={}) != Constraints():
        return None
    e = workload.einsum(einsum)
    shared = tuple(t for t in e.tensors if workload.is_shared(t))
    mirrors = [find_mirror(e, workload, space(e, workload, u.name, arch, narrowed(Constraints())), None, shared)
               for u in arch.computes_for(e)]
    if not mirrors or any(m is None for m in mirrors) or len({(repr(m.tensors), repr(m.ranks)) for m in mirrors}) > 1:
        return None
    return mirrors[0]


def mirror_result(res: tuple, mirror: Mirror, einsum: str, workload: Workload, arch: Arch, objectives,
                  constraints: Constraints) -> tuple:
    """The result (table, templates, Stats) of the search at the mirror image of
    `constraints`' c_T (`Mirror.tensor_keys`) within the same budget, from `res`, that of
    the search at them: each row's pmapping mirrored (`Mirror.nodes`) and evaluated by the
    model. Counts and energies are unchanged by the mirror, so its rows are that search's
    frontier; a search cut short gives one cut short, with the same lower bound."""
    begin = time.perf_counter()
    table, templates, stats = res
    kept = []
    for tid, rows in table.groupby("template").indices.items() if len(table) else ():
        t = templates[int(tid)]
        image = Template(t.einsum, t.unit, mirror.nodes(t.nodes), t.n_slots)
        tiles = np.array(table["tiles"].iloc[rows].tolist(), dtype=np.int64).reshape(len(rows), t.n_slots)
        kept.append(template_rows(image, tiles, workload, arch))
    keys = replace(constraints, tensor_keys=mirror.tensor_keys(workload.einsum(einsum), constraints.tensor_keys))
    out = result(einsum, kept, workload, arch, objectives, stats.templates, stats.tile_shapes, stats.stopped_by, begin,
                 stats.lower_bound, stats.budget, keys)
    return out[0], out[1], replace(out[2], complete=stats.complete)
