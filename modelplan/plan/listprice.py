"""Price the communication list (`modelplan.plan.commlist`): the planner's communication terms come
from the same list `verify` checks against the executor's ledger, so the two cannot drift.

Each item is priced as count x one collective on the links its group crosses (`CommPricer`).
The planner builds lists for canonical plans and caches the sums it needs:
- tensor parallel, per micro-batch: a 2-block copy of the model on pp 2 and one micro-batch of
  one sequence gives the block items of one block (rank 0 holds one block), the embedding's
  (first stage) and the head's and loss's (last stage), and the stage-boundary message with
  its scatter/gather AllGather; their
  sizes are linear in the micro-batch, so they are scaled to b sequences before pricing;
- data parallel, per (tp, pp, dp, zero, sp) with one micro-batch per step: the gradient and
  parameter collectives of each stage's units, the TP AllReduce of partial gradients and the
  tied-embedding AllReduce. Items whose count grows with the micro-batches (ZeRO-2/3) are
  divided back to one micro-batch's worth. For a dense model with pp > 2 the first and the last
  stage come from a 2-stage copy with 2 * layers/pp blocks (its blocks are all alike).
Start-up items (Broadcast of the initial weights, Barrier) are not part of a step.
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.comm.ops import Axis, Collective
from modelplan.comm.topology import GroupShape
from modelplan.plan.commcost import CommPricer
from modelplan.plan.dims import EXPERT_DP, pair_shape
from modelplan.plan.commlist import CommItem
from modelplan.plan.steptime import DpTimes


def item_time_s(item: CommItem, pricer: CommPricer, shapes: dict, scale: int = 1) -> float:
    """One call of `item` (its message `scale` times larger) on its group's links; pipeline
    pairs and the tied-embedding pair sit on different nodes whenever the pipeline axis does;
    a DP item smaller than the DP group is the routed experts' expert-data-parallel reduction."""
    if item.axis in (Axis.PP, Axis.CP):  # neighbours on a pipeline or on the cp ring
        return pricer.time_s(item.op, item.nbytes * scale, pair_shape(shapes[item.axis].crosses_nodes))
    shape = shapes[item.axis]
    if item.axis is Axis.DP and item.group_size != shape.size:
        shape = shapes[EXPERT_DP]
    return pricer.time_s(item.op, item.nbytes * scale, shape)


class TpPrices(NamedTuple):
    """Tensor-parallel seconds of one micro-batch, and the stage-boundary message."""

    block_s: float
    """One block's TP collectives (forward, backward, and the recompute forward if any)."""
    embedding_s: float
    head_s: float
    """Output head and vocab-parallel cross-entropy."""
    boundary_bytes: int
    """Bytes of one pipeline send (activation forward, gradient backward)."""
    cp_kv_bytes: int = 0
    """Bytes of one K, V block sent to the next rank of the cp ring (context parallelism)."""
    boundary_gather_s: float = 0.0
    """The receiving stage's TP AllGather of one boundary message (Megatron's pipeline
    scatter/gather; 0 without it)."""


def tp_prices(
    items: list[CommItem], pricer: CommPricer, shapes: dict[Axis, GroupShape], micro_batch: int = 1
) -> TpPrices:
    """Sums over a canonical list (2 blocks, pp 2, one micro-batch of one sequence: rank 0 holds
    one block). Every TP and pipeline message of the list is linear in the micro-batch
    (b*s*h activations, b*s loss values), so a micro-batch of b sequences scales them by b."""
    block = embedding = head = gather = 0.0
    boundary = kv = 0
    for item in items:
        if item.startup:
            continue
        if item.axis is Axis.PP and item.op is Collective.SEND_RECV and item.label == "pp/forward":
            boundary = item.nbytes * micro_batch
        if item.label == "cp/attention/kv":
            kv = item.nbytes * micro_batch
        if item.label == "pp/forward/gather":  # one per boundary message (count m = 1 here)
            gather = item_time_s(item, pricer, shapes, micro_batch)
        if item.axis is not Axis.TP or item.label == "tp/partial-grads" or item.label.startswith("pp/"):
            continue
        t = item.count * item_time_s(item, pricer, shapes, micro_batch)
        if item.label.startswith(("tp/attention", "tp/mlp")):
            if 0 in item.pp_ranks:
                block += t
        elif item.label == "tp/embedding":
            embedding += t
        else:
            head += t
    return TpPrices(block, embedding, head, boundary, kv, gather)


class DpPrices(NamedTuple):
    """One stage's data-parallel collectives (one micro-batch per step) and the after-step extras."""

    times: DpTimes
    partial_grads_s: float
    """TP AllReduce of gradients that are partial sums over tp (sequence parallelism)."""
    tied_embedding_s: float


def dp_prices(
    items: list[CommItem], pricer: CommPricer, shapes: dict[Axis, GroupShape], pp_rank: int, zero: int
) -> DpPrices:
    """Sums over the DP items of `pp_rank` in a list built with one micro-batch per step."""
    sums = {Collective.ALL_REDUCE: 0.0, Collective.REDUCE_SCATTER: 0.0, Collective.ALL_GATHER: 0.0}
    largest = {Collective.ALL_REDUCE: 0.0, Collective.REDUCE_SCATTER: 0.0, Collective.ALL_GATHER: 0.0}
    partial = tied = 0.0
    for item in items:
        if item.startup or pp_rank not in item.pp_ranks:
            continue
        one = item_time_s(item, pricer, shapes)
        if item.label == "tp/partial-grads":
            partial += item.count * one
        elif item.label == "pp/tied-embedding-grads":
            tied += item.count * one
        elif item.axis is Axis.DP and item.label in ("dp/grads", "dp/params"):
            passes = 2 if zero == 3 and item.op is Collective.ALL_GATHER else 1  # fwd + bwd gathers
            sums[item.op] += item.count * one / passes
            largest[item.op] = max(largest[item.op], one)
    times = DpTimes(
        all_reduce=sums[Collective.ALL_REDUCE],
        all_reduce_bucket=largest[Collective.ALL_REDUCE],
        reduce_scatter=sums[Collective.REDUCE_SCATTER],
        reduce_scatter_bucket=largest[Collective.REDUCE_SCATTER],
        all_gather=sums[Collective.ALL_GATHER],
        all_gather_bucket=largest[Collective.ALL_GATHER],
        all_gather_block=largest[Collective.ALL_GATHER],
    )
    return DpPrices(times, partial, tied)


def ep_prices(items: list[CommItem], pricer: CommPricer, shapes: dict) -> float:
    """AllToAll seconds of one MoE block and one micro-batch: the expert-parallel items of
    pipeline rank 0 in a canonical list (one MoE block per stage, one micro-batch per step)."""
    return sum(item.count * item_time_s(item, pricer, shapes) for item in items
               if item.axis is Axis.EP and not item.startup and 0 in item.pp_ranks)
