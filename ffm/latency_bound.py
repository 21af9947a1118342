"""A lower bound on the latency of every mapping, and so on its EDP (docs/mapper.md,
"Latency and EDP bounds").

A mapping's latency is the sum of its Einsums' (docs/semantics.md §6), and an Einsum's is
at least each of the terms its max is taken over, so any floor of one pmapping's terms
bounds every pmapping of that Einsum:

- **compute**: ops / (used instances x throughput) / clock, with the used instances at
  most the product of every fanout dim on the unit's path (each dim's spatial loops
  multiply to at most its size) and at most ops (spatial bounds multiply to at most the
  rank sizes' product);
- **DRAM**: the workload's inputs and outputs are backed at the top level (DESIGN §4), so
  every pmapping of an Einsum reads each value of its input tensors from there at least
  once, and writes each value of its output at least once: at least the tensor's backing
  tile (`looptree.model.tile_size` at the root) of bits through the top level's ports
  (`looptree.model.port_times`), spread over at most the instances of the fanouts at or
  above it.

The least over the compute units that run the Einsum. These terms ignore every trade-off
(reuse, capacity, fusion), so the bound is loose where those decide the latency; at gpt3
batch 1 on tpuv4i the MAC arrays' full rate decides it, and the bound is tight (Step 35).
"""
from __future__ import annotations

import math

from arch.model import Arch
from looptree.model import port_times, start, tile_size
from workloads.model import Workload


def einsum_latency_floor(einsum: str, workload: Workload, arch: Arch) -> float:
    """Seconds every pmapping of `einsum` takes at least (module docstring)."""
    e = workload.einsum(einsum)
    ops = math.prod(workload.rank_sizes[r] for r in e.rank_variables)
    root = start(e, workload)
    top = arch.memories[0]
    reads = sum(tile_size(root, e, t) * workload.tensors[t].bits for t in e.tensors
                if not e.is_output(t) and workload.tensors[t].role != "intermediate")
    writes = sum(tile_size(root, e, t) * workload.tensors[t].bits for t in e.tensors
                 if e.is_output(t) and workload.tensors[t].role != "intermediate")
    best = math.inf
    for unit in arch.computes_for(e):
        path = arch.path(unit.name)
        instances = min(ops, math.prod(d.size for m in path for d in m.fanout))
        compute = ops / (instances * arch.compute(unit.name).throughput) / arch.clock_hz
        at_top = math.prod(d.size for d in top.fanout)
        dram = max(port_times(top, reads, writes, at_top), default=0.0)
        best = min(best, max(compute, dram))
    return best


def latency_lower_bound(workload: Workload, arch: Arch) -> float:
    """Seconds every mapping of `workload` takes at least: its Einsums' floors, summed."""
    return sum(einsum_latency_floor(e, workload, arch) for e in workload.einsum_names)
