"""The latency floor's ports' bits still to come (`pmapgen.latency_floor`), off, port by port,
and over sets of ports, and closed ports compared as they are, on the root parts of one
Einsum's search within its latency floor, gpt3 / tpuv4i at batch 1.

    python benchmarks/latency_floor.py [--einsum V] [--parts 6 7] [--time-limit 60] [--port-sets 3]

Each part (a root: the shared tensors' backing levels, `pmapgen.prefixes.search_part`) is
searched in this process within a latency budget of the Einsum's latency floor
(`ffm.latency_bound`, met at batch 1: docs/mapper.md, "Step 35"), objective latency, with
the ports' floors (`pmapgen.prefixes.PORT_FLOORS`) and closed ports compared as at least the
least latency (`pmapgen.prefixes.CLOSED_PORTS`, `_Search._closed_ports`), without the ports'
floors ("off"), without the closed ports' rule ("open"), and with floors of sets of up to
--port-sets ports summed as well (`pmapgen.prefixes.PORT_SETS`). It prints, for each,
prefixes processed, partial rows built, seconds and pmappings kept, and whether the
tables are the same rows (compatibility key, latency, reservations). Ratios are what to
compare: this machine is noisy. At batch 1, V's parts 6 and 7 complete every way in a few
seconds; parts 0 to 5 do not complete in minutes.
"""
from __future__ import annotations

import argparse
import time

import arch as arch_specs
import pmapgen.prefixes as prefixes
import workloads
from ffm.latency_bound import einsum_latency_floor
from pmapgen import Constraints
from pmapgen.prefixes import generate_by_prefixes


def rows(table) -> list:
    """A table's rows as (key, latency, reservations), sorted: its rows in any order."""
    res = sorted(c for c in table.columns if c.startswith("res:"))
    return sorted((repr(k), round(float(x), 15), *(round(float(v), 6) for v in r))
                  for k, x, *r in zip(table["compat"], table["latency"], *(table[c].fillna(-1) for c in res)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--einsum", default="V")
    parser.add_argument("--parts", nargs="*", type=int, default=[6, 7])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per part and way (default 60)")
    parser.add_argument("--port-sets", type=int, default=3, help="the most ports one floor sums (1: that way skipped)")
    args = parser.parse_args()
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    floor = einsum_latency_floor(args.einsum, w, a)
    c = Constraints(latency_budget=floor * (1 + 1e-9))
    print(f"{args.einsum} within its latency floor {floor * 1e3:.6g} ms; time limit {args.time_limit:g} s per part")
    print(f"{'part':>4} {'ports':>6} {'prefixes':>9} {'rows built':>11} {'seconds':>8} {'kept':>6}  complete")
    for part in args.parts:
        got = {}
        ways = [("1", True, 1, True), ("off", False, 1, True), ("open", True, 1, False)] + (
            [(f"{args.port_sets}", True, args.port_sets, True)] if args.port_sets > 1 else [])
        for name, on, sets, closed in ways:
            prefixes.PORT_FLOORS, prefixes.PORT_SETS, prefixes.CLOSED_PORTS = on, sets, closed
            start = time.perf_counter()
            table, _, st = generate_by_prefixes(args.einsum, w, a, c, ("latency",), args.time_limit, part=part)
            took = time.perf_counter() - start
            got[name] = rows(table) if st.complete else None
            print(f"{part:>4} {name:>6} {st.templates:>9} {st.tile_shapes:>11} {took:>8.1f} "
                  f"{len(table):>6}  {st.complete}", flush=True)
        done = [v for v in got.values() if v is not None]
        same = all(v == done[0] for v in done)
        print(f"     the same rows: {same} ({len(done)} of {len(got)} complete)")
    prefixes.PORT_FLOORS, prefixes.PORT_SETS, prefixes.CLOSED_PORTS = True, 1, True


if __name__ == "__main__":
    main()
