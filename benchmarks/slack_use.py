"""Where U's slack goes in the energy set, and what consumers' bounds could take from it
(gpt3 on tpuv4i, batch 1, 2048 tokens; docs/pmapgen.md, "Where the energy set's time goes").

    python benchmarks/slack_use.py [--slack-of 125.64] [--lower 0.2273 0.5]

1. Every Einsum's minimum (rising budgets), then the energy set at U (`ffm.slack.slack_tables`,
   as `benchmarks/pmapgen_speed.py --prefixes --objectives energy` runs it: each keyed
   Einsum's rows held to their output's readers' penalty, `ffm.consumers`).
2. The set's tables joined: the optimum, and each Einsum's energy in it over its minimum.
   Every keyed budget counts the Einsums after it at their minima.
3. For each Einsum of the set and each consumer of its output (an Einsum reading it): of
   the producer's rows, how many have a consumer row of the set at their output's c_T, and
   the consumer's least there over its minimum. Then, from the minima's tables (each
   complete within its rising budget, so a consumer costs at least that budget wherever its
   table has no row), the penalty a producer's row could be charged at its output's c_T:
   the consumer's least there over its minimum, or its budget's gap. For Einsums whose
   searches answer their siblings' (`ffm.slack.siblings`: V, K and Q), the least of their
   consumers' penalties, each sibling's output read at the same rank positions (the
   Einsums are identical up to names).
4. The second pass of the first Einsum with siblings (V), within the budgets the set held
   it to (`SlackTables.betas`), searched again without its readers' penalty, with it (as
   the set searched it), and without it but every key's budget lower by each `--lower`
   (mJ): what the penalty saves, against a uniform one of that size.
"""
from __future__ import annotations

import argparse
import math
import resource
import time

import numpy as np

import arch as arch_specs
import workloads
from ffm.budgets import PROOF_ROWS
from ffm.consumers import complete_within, consumer_penalty, least_by_ct
from ffm.join import join
from ffm.refine import search_keys
from ffm.slack import SUB_PARTS, siblings, slack_tables
from pmapgen import generate_all


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slack-of", type=float, default=125.64, help="U in mJ (default 125.64)")
    parser.add_argument("--lower", type=float, nargs="*", default=[0.2273, 0.5],
                        help="mJ each key's budget is lowered by in step 4 (none: skip it)")
    parser.add_argument("--time-limit", type=float, default=300.0)
    args = parser.parse_args()
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    names = w.einsum_names
    start = time.perf_counter()
    minima = generate_all(w, a, None, objectives=("energy",), budgets={e: math.inf for e in names},
                          rising=True, progress=False, time_limit=args.time_limit)
    lows = {e: float(r[0]["energy"].min()) for e, r in minima.items()}
    bound = args.slack_of * 1e9
    complete = complete_within(minima)
    st = slack_tables(w, a, bound, lows, None, time_limit=args.time_limit, max_rows=PROOF_ROWS, minima_tables=complete)
    tables = {e: r[0] for e, r in st.results.items()}
    print(f"minima and the energy set at U = {args.slack_of} mJ: {time.perf_counter() - start:.1f} s; "
          f"incomplete: {st.incomplete or 'none'}")

    full = join(tables, w, a, ("energy",))
    best = full.sort_values("energy").iloc[0]
    print(f"\noptimum {best['energy'] / 1e9:.4f} mJ, the minima {sum(lows.values()) / 1e9:.4f} mJ; per Einsum, mJ:")
    print(f"  {'Einsum':11s} {'in it':>9s} {'minimum':>9s} {'over':>7s}")
    for e in names:
        x = float(tables[e].loc[best[f"row:{e}"], "energy"])
        print(f"  {e:11s} {x / 1e9:9.4f} {lows[e] / 1e9:9.4f} {(x - lows[e]) / 1e9:7.4f}")

    print("\nproducer -> consumer (reading its output): the producer's rows in the set, those with a consumer row "
          "of the set at their output's c_T, the consumer's least there over its minimum (mJ: min, median, max)")
    consumers = {e: [c for c in names if w.einsum(e).output.tensor in {u.tensor for u in w.einsum(c).inputs}]
                 for e in names}
    for e in names:
        out = w.einsum(e).output.tensor
        for c in consumers[e]:
            there = least_by_ct(tables[c], out)
            over = np.array([there.get(dict(k[0]).get(out), math.inf) for k in tables[e]["compat"]]) - lows[c]
            met = over[np.isfinite(over)] / 1e9
            spread = f"{met.min():.4f}, {np.median(met):.4f}, {met.max():.4f}" if len(met) else "-"
            print(f"  {e:11s} -> {c:11s} {len(over):6d} rows, {len(met):6d} met ({spread})")

    print("\npenalties from the minima's tables at the set's rows (mJ: quantiles 0, 10, 50, 90, 100%); "
          "where the consumer's table has no row, its rising budget's gap")
    keyed = tuple(e for e in names if e not in st.uniform)  # (free when the set reached them: siblings are among them)
    done = set()
    for e in names:
        group = (e,) + (siblings(w, keyed, e, None) if e in keyed else ())
        if e in done or not consumers[e]:
            continue
        done.update(group)
        rows = [dict(k[0]).get(w.einsum(e).output.tensor) for k in tables[e]["compat"]]
        per = []
        for s in group:
            out = w.einsum(s).output.tensor
            for c in consumers[s]:
                got = consumer_penalty(w, s, (c,), lows, complete)
                pen = np.array([got.at(ct) for ct in rows]) / 1e9
                per.append(pen)
                print(f"  {e:11s} as {s:11s} -> {c:11s} {len(got.named):5d} c_T in its table, gap "
                      f"{got.default / 1e9:.4f}: {np.quantile(pen, [0, .1, .5, .9, 1]).round(4)}")
        if len(group) > 1:
            least = np.minimum.reduce(per)
            print(f"  {e:11s} least over {', '.join(group)}: {np.quantile(least, [0, .1, .5, .9, 1]).round(4)}")

    held = next(((e, st.betas[e]) for e in keyed if e in st.betas and siblings(w, keyed, e, None)), None)
    if held is None or not args.lower:
        return
    e, betas = held
    penalty = st.penalties.get(e)
    print(f"\n{e}'s second pass ({len(betas)} keys, as the set held them), its readers' penalty "
          f"{'none' if penalty is None else f'{len(penalty.named)} c_T named, else {penalty.default / 1e9:.4f} mJ'}:")
    runs = [("no penalty", 0.0, None), ("the penalty", 0.0, penalty)]
    runs += [(f"no penalty, {delta:.4f} mJ lower", delta, None) for delta in args.lower]
    for label, delta, pen in runs:
        cpu, begin = children_cpu(), time.perf_counter()
        ks = search_keys(e, {k: b - delta * 1e9 for k, b in betas.items()}, 0.0, w, a, None, {}, args.time_limit,
                         max_rows=PROOF_ROWS, by_backing=0, own_budgets=True, sub_parts=SUB_PARTS, penalty=pen)
        print(f"  {label:28s}: {time.perf_counter() - begin:6.1f} s wall, {children_cpu() - cpu:6.1f} s of "
              f"workers' CPU, {ks.explored:,} prefixes, {ks.rows:,} rows kept", flush=True)


if __name__ == "__main__":
    main()
