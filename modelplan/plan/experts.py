"""Mixture-of-experts quantities shared by the communication list, the kernels and the memory
model: how many token slots each expert's dispatch buffer has, and which blocks of a stage are
MoE blocks.

Dispatch (GShard, Lepikhin et al. 2020, sec. 2.2; Megatron-core's all-to-all token dispatcher):
every expert-parallel rank fills, for each of the E experts, a buffer of `capacity` token slots
of h values and all-to-alls it over the ep ranks of its group; a rank then runs its E/ep local
experts on the ep * capacity slots it received from the group, and a second all-to-all returns
the results (combine). Per rank and direction that is E * capacity * h values, of which
(ep - 1)/ep leave the rank.

- The executor (`modelplan.execute.expert_parallel`) uses GShard's dense dispatch tensor with one
  slot per local token (capacity = tokens): the buffer size depends on the shapes only, never on
  the routing, so `verify` can compare it byte for byte.
- The planner prices what a dropless engine moves: every token is sent to its top_k experts, so
  with balanced routing (the load-balancing loss's target, Fedus et al. 2021, eq. 4) each expert
  receives tokens * top_k / E slots from each rank: capacity = ceil(cf * tokens * top_k / E)
  with cf the model's `moe.capacity_factor` (Megatron pads buffers to it), 1.0 when dropless.
  Per token and direction: top_k * h values, (ep - 1)/ep of them over the network.
"""

from __future__ import annotations

from modelplan.specs.transformer import MoESpec


def planned_capacity_factor(moe: MoESpec) -> float:
    """The model's capacity factor, or 1.0: dropless routing priced at its balanced average."""
    return moe.capacity_factor if moe.capacity_factor is not None else 1.0


def expert_capacity(tokens: int, moe: MoESpec, capacity_factor: float | None) -> int:
    """Token slots per expert in one rank's dispatch buffer.

    None: the executor's dense dispatch (one slot per local token); a float cf: GShard's
    capacity ceil(cf * tokens * top_k / num_experts) (Lepikhin et al. 2020, sec. 2.2)."""
    if capacity_factor is None:
        return tokens
    need = capacity_factor * tokens * moe.top_k
    return max(1, -int(-need // moe.num_experts))
