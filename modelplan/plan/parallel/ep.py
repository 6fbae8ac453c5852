"""Expert parallelism (GShard, Lepikhin et al. 2020; Megatron-core's all-to-all token dispatcher).

What it adds: per MoE block and micro-batch an AllToAll dispatch and an AllToAll combine in
forward (again in the recompute forward) and in backward, each of num_experts * capacity * h
values (`plan/experts.py` sizes the capacity), over the ep data-parallel ranks of a group.

States it shards: the routed experts over ep (and over tp like a dense MLP), `plan/shard.py`;
their gradients and ZeRO shards over the dp x cp / ep ranks holding the same experts
(`dp_zero.py`, Megatron-core's expert data-parallel group).

Overlap: none by default; the dispatch and combine sit on the critical path (comm_hw.md section
5.6: EP all-to-all 100 % exposed unless overlap is enabled). With Megatron-core's
`--overlap-moe-expert-parallel-comm` (Megatron-Bridge `comm_overlap.overlap_moe_expert_parallel_comm`,
its `moe_a2a_overlap` performance recipes; `TrainingSpec.ep_comm_overlap`) the forward of one
micro-batch and the backward of another run merged (combined 1F1B, DeepSeek-V3 paper sec. 3.2.1's
DualPipe overlap): the AllToAlls of each run on a communication stream under the other's attention
and expert compute, so a block exposes only what its AllToAlls exceed of one block's forward plus
backward compute (`overlapped`; the bound of perfect interleaving: Megatron-core overlaps "in
1f1b phase", model_parallel_config.py, so warm-up and cool-down micro-batches, which are not set
apart here, and the comm kernels' SMs make it a lower bound; its extra activation memory,
`ep_overlap_early_attn_memory_release`, is not counted).
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.comm.regions import Region
from modelplan.comm.ops import Axis, Collective
from modelplan.plan.commcost import CommPricer
from modelplan.plan.parallel.calls import RankCalls

A2A = Collective.ALL_TO_ALL


def dispatch_bytes(num_experts: int, capacity: int, hidden: int, act_bytes: int) -> int:
    """One (E, capacity, h) dispatch buffer."""
    return num_experts * capacity * hidden * act_bytes


def moe_calls(calls: RankCalls, ep: int, nbytes: int, fwd_runs: int, bwd_runs: int, moe_blocks: int) -> None:
    """Dispatch and combine of `moe_blocks` MoE blocks: `fwd_runs` forwards, `bwd_runs` backwards."""
    for label in (Region.EP_DISPATCH, Region.EP_COMBINE):
        calls.add(A2A, Axis.EP, ep, nbytes, (fwd_runs + bwd_runs) * moe_blocks, label)


class EpExposure(NamedTuple):
    """AllToAll seconds of one MoE block and micro-batch, all exposed."""

    fwd_s: float
    bwd_s: float
    recompute_s: float


def ep_exposure(pricer: CommPricer, shape, ep: int, nbytes: int, full_recompute: bool) -> EpExposure:
    """Price `moe_calls` of one block: half forward, half backward, the recompute forward's extra."""
    def priced(fwd_runs: int) -> float:
        calls = RankCalls()
        moe_calls(calls, ep, nbytes, fwd_runs, 1, 1)
        return calls.price(pricer, lambda axis, size: shape)

    plain = priced(1)
    again = priced(2) if full_recompute else plain
    return EpExposure(plain / 2, plain / 2, again - plain)


def overlapped(x: EpExposure, compute_s: float) -> EpExposure:
    """`x` under the merged forward-backward overlap (module docstring): the AllToAll seconds of one
    block beyond `compute_s` (its forward and backward kernels) stay exposed, split as before."""
    total = x.fwd_s + x.bwd_s + x.recompute_s
    if total <= 0.0:
        return x
    keep = max(0.0, total - compute_s) / total
    return EpExposure(x.fwd_s * keep, x.bwd_s * keep, x.recompute_s * keep)
