"""DeepEP's deduplicated token exchange: one copy per destination, not one per routed expert.

DeepEP (deepseek-ai/DeepEP README, "normal kernels"; DeepSeek-V3 technical report sec. 3.2.2)
sends each token once to every GPU holding any of its top-k experts (intranode, NVLink) and once
over RDMA to every NODE holding any of them, forwarding inside the node over NVLink (internode).
The AllToAll dispatcher instead sends one copy per routed expert (top-k copies; `parallel/ep.py`).
So DeepEP moves (distinct destinations per token) / top_k of the AllToAll's bytes, the
destinations being the EP ranks inside one node, or the nodes when the EP group spans nodes.

How many destinations a token has depends on the router:
- a learned router read as uniform over the experts: k distinct experts of E in G equal groups of
  E/G (experts are laid out contiguously over the EP ranks, `expert e -> rank e // (E / ep)`):
  G * (1 - C(E - E/G, k) / C(E, k)) distinct groups (the hypergeometric chance a group gets none);
- NeMo AutoModel's `FakeBalancedGate` (components/moe/layers.py): token t goes to experts
  (t k + j) mod E, j < k, i.e. k consecutive experts, counted exactly over one cycle of t.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb, gcd

from modelplan.specs.blocks import MoESpec
from modelplan.specs.training import TrainingSpec


def uniform_distinct_groups(num_experts: int, top_k: int, groups: int) -> Fraction:
    """Expected distinct groups among k experts drawn without replacement from E in `groups`
    equal contiguous groups."""
    per = num_experts // groups
    return groups * (1 - Fraction(comb(num_experts - per, top_k), comb(num_experts, top_k)))


def balanced_gate_distinct_groups(num_experts: int, top_k: int, groups: int) -> Fraction:
    """Mean distinct groups of AutoModel's FakeBalancedGate tokens: experts (t k + j) mod E, over
    one period E / gcd(E, k) of t."""
    per, period = num_experts // groups, num_experts // gcd(num_experts, top_k)
    total = sum(len({((t * top_k + j) % num_experts) // per for j in range(top_k)}) for t in range(period))
    return Fraction(total, period)


def deepep_copy_fraction(num_experts: int, top_k: int, ep: int, gpus_per_node: int,
                         balanced_gate: bool = False) -> float:
    """Fraction of the AllToAll dispatcher's bytes DeepEP sends (module docstring): distinct
    destination ranks (EP inside a node) or nodes (EP across nodes) per token, over top_k."""
    if ep <= 1 or top_k <= 1:
        return 1.0
    groups = ep if ep <= gpus_per_node or ep % gpus_per_node else ep // gpus_per_node
    count = balanced_gate_distinct_groups if balanced_gate else uniform_distinct_groups
    return float(count(num_experts, top_k, groups) / top_k)


def exchange_bytes(alltoall_bytes: int, moe: MoESpec, training: TrainingSpec, ep: int,
                   gpus_per_node: int | None) -> int:
    """Bytes of one dispatch (or combine) under the plan's dispatcher: the AllToAll dispatcher's
    top-k copies `alltoall_bytes`, or DeepEP's deduplicated share of them (`deepep_copy_fraction`).
    The one rule the planner prices and the communication list lists (`plan/commlist.py`)."""
    if training.moe_flex_dispatcher != "deepep":
        return alltoall_bytes
    if gpus_per_node is None:
        raise ValueError("gpus_per_node is needed to count DeepEP's destinations (ranks inside a node, "
                         "nodes across them)")
    return round(alltoall_bytes * deepep_copy_fraction(moe.num_experts, moe.top_k, ep, gpus_per_node,
                                                       training.fake_balanced_gate))
