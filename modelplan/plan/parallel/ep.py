"""Expert parallelism (GShard, Lepikhin et al. 2020; Megatron-core's all-to-all token dispatcher).

What it adds: per MoE block and micro-batch an AllToAll dispatch and an AllToAll combine in
forward (again in the recompute forward) and in backward, each of num_experts * capacity * h
values (`plan/experts.py` sizes the capacity), over the ep data-parallel ranks of a group.

Under sequence parallelism with the experts split over tp (no expert tensor parallel size, which
Megatron-core then sets to tp) each TP rank dispatches only its own s/tp tokens
(`sequence_parallel_dispatch`): Megatron-core's all-to-all dispatcher takes the MoE layer's input
as it is, sequence-parallel (`MoEAlltoAllTokenDispatcher.dispatch_preprocess` permutes the rank's
tokens, `token_dispatch` all-to-alls them over ep, `dispatch_postprocess` all-gathers what arrived
over the tp group, `gather_from_sequence_parallel_region(global_input_tokens, group=tp_group)`;
`combine_preprocess` reduce-scatters the experts' partial outputs back,
`reduce_scatter_to_sequence_parallel_region`). So the AllToAlls move s/tp tokens of h per rank
and the TP group moves the expert buffer (tp times one dispatch buffer) with an AllGather before
the experts and a ReduceScatter after them, forward and backward (`TP_EXPERTS_IN/OUT`); the MoE
MLP has no f / g of its own (a shared expert keeps its own, a dense MLP's). Megatron-core before
0.10 (`token_permutation`: `all_to_all_sp2hp`, [S*B/TP, H] -> [S*B, H/TP], then the EP AllToAll
of h/tp per token and an all-gather of the hidden dim) moves the same bytes over ep.

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
backward compute (`overlapped`; the bound of perfect interleaving; the comm kernels' SMs make it
a lower bound; its extra activation memory, `ep_overlap_early_attn_memory_release`, is not
counted). Megatron-core merges only in the 1F1B steady state ("in 1f1b phase",
model_parallel_config.py): the warm-up forwards and as many cool-down backwards run alone with
their AllToAlls exposed (`unmerged_chunks`, `unmerged_s`).
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


def sequence_parallel_dispatch(tp: int, sequence_parallel: bool, ep: int, etp: int | None) -> bool:
    """Each TP rank dispatches its own sequence shard and the TP group gathers the expert buffer
    (module docstring): sequence parallel, tp > 1, ep > 1, experts split over tp (etp None)."""
    return sequence_parallel and tp > 1 and ep > 1 and etp is None


def moe_calls(calls: RankCalls, ep: int, nbytes: int, fwd_runs: int, bwd_runs: int, moe_blocks: int,
              tp: int = 1) -> None:
    """Dispatch and combine of `moe_blocks` MoE blocks: `fwd_runs` forwards, `bwd_runs` backwards;
    with `tp` > 1 (`sequence_parallel_dispatch`) the TP group's AllGather of the received expert
    buffer (tp x `nbytes`) before the experts and ReduceScatter after them, each way (backward:
    ReduceScatter of the experts' input gradient, AllGather of their output gradient)."""
    for label in (Region.EP_DISPATCH, Region.EP_COMBINE):
        calls.add(A2A, Axis.EP, ep, nbytes, (fwd_runs + bwd_runs) * moe_blocks, label)
    if tp > 1:
        for region, fwd_op, bwd_op in ((Region.TP_EXPERTS_IN, Collective.ALL_GATHER, Collective.REDUCE_SCATTER),
                                       (Region.TP_EXPERTS_OUT, Collective.REDUCE_SCATTER, Collective.ALL_GATHER)):
            calls.add(fwd_op, Axis.TP, tp, tp * nbytes, fwd_runs * moe_blocks, region)
            calls.add(bwd_op, Axis.TP, tp, tp * nbytes, bwd_runs * moe_blocks, region)


class EpExposure(NamedTuple):
    """AllToAll seconds of one MoE block and micro-batch, all exposed."""

    fwd_s: float
    bwd_s: float
    recompute_s: float
    merged_s: float = 0.0
    """Seconds of the block's AllToAlls the merged forward-backward hides (`overlapped`); they are
    exposed again in the chunks that run unmerged (`unmerged_s`)."""


def ep_exposure(pricer: CommPricer, shape, ep: int, nbytes: int, full_recompute: bool, tp: int = 1,
                tp_shape=None) -> EpExposure:
    """Price `moe_calls` of one block: half forward, half backward, the recompute forward's extra
    (the TP group's expert-buffer calls, `tp` > 1, on `tp_shape`)."""
    def priced(fwd_runs: int) -> float:
        calls = RankCalls()
        moe_calls(calls, ep, nbytes, fwd_runs, 1, 1, tp)
        return calls.price(pricer, lambda axis, size: tp_shape if axis is Axis.TP else shape)

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
    return EpExposure(x.fwd_s * keep, x.bwd_s * keep, x.recompute_s * keep, total * (1.0 - keep))


def unmerged_chunks(pp: int, vpp: int, rank: int, m: int) -> int:
    """Forward model chunks pipeline rank `rank` runs before the merged 1F1B steady state (and as
    many backward chunks after it), of its m * vpp, under Megatron-core's combined 1F1B.
    Interleaved (schedules.py `get_pp_rank_microbatches`): 2 (pp - rank - 1) + (vpp - 1) * pp
    warm-up chunks (microbatch_group_size_per_vp_stage defaults to pp) plus the one extra forward
    `overlap_moe_expert_parallel_comm` schedules; no pipelining (combined_1f1b.py
    `combined_1f1b_schedule_for_no_pipelining`): the first forward alone, the last backward alone.
    Megatron-core allows the overlap under pp > 1 only with vpp (transformer_config.py); a 1f1b
    plan gets the same count with vpp 1."""
    total = m * vpp
    if pp == 1:
        return min(total, 1)
    return min(total, 2 * (pp - rank - 1) + (vpp - 1) * pp + 1)


def unmerged_s(x: EpExposure, pp: int, vpp: int, rank: int, m: int, moe_run: float) -> float:
    """Seconds per step the unmerged chunks of `rank` add back (`unmerged_chunks`): each runs
    moe_run / vpp MoE blocks (a micro-batch's `moe_run` over its vpp chunks) whose merged-away
    AllToAll seconds (`EpExposure.merged_s`, forward and backward halves) are exposed, the forward
    half in each warm-up chunk and the backward half in each cool-down chunk."""
    return unmerged_chunks(pp, vpp, rank, m) * moe_run / vpp * x.merged_s
