"""The planner prices the calls of the communication list verify checks: each parallelism module
(`plan/parallel/`) prices the calls it adds for one block, unit or boundary, and those times
equal the sums over the full list of the real plan."""

from __future__ import annotations

import pytest

from modelplan.comm.ops import Axis, Collective
from modelplan.plan.commlist import communication_list
from modelplan.plan.dims import EXPERT_DP, pair_shape
from modelplan.plan.evaluator import Evaluator
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.load import load_model
from modelplan.comm.clusters import load_cluster

SPEC = load_model("gpt2")  # 12 blocks
TRAIN = TrainingSpec(global_batch=32, seq_len=1024)
CLUSTER = load_cluster("dgx-a100")


def item_time_s(item, pricer, shapes) -> float:
    """One call of a list item on its group's links: neighbours for PP and CP, the expert-data-
    parallel group for a DP item smaller than the DP group (the test's own pricing of the list)."""
    if item.axis in (Axis.PP, Axis.CP):
        return pricer.time_s(item.op, item.nbytes, pair_shape(shapes[item.axis].crosses_nodes))
    shape = shapes[item.axis]
    if item.axis is Axis.DP and item.group_size != shape.size:
        shape = shapes[EXPERT_DP]
    return pricer.time_s(item.op, item.nbytes, shape)


def _sum(items, ev, shapes, rank, keep) -> float:
    return sum(i.count * item_time_s(i, ev.pricer, shapes) for i in items
               if not i.startup and rank in i.pp_ranks and keep(i))


@pytest.mark.parametrize("sp,recompute", [(False, "none"), (True, "full"), (False, "selective")])
def test_block_tp_time_matches_the_full_list(sp, recompute):
    """Per block per micro-batch, the TP items of the real plan's list = the evaluator's block term."""
    plan = Plan(dp=2, tp=4, pp=2, micro_batch=2, sequence_parallel=sp, recompute=recompute)
    ev = Evaluator(SPEC, TRAIN, CLUSTER)
    items = communication_list(SPEC, TRAIN, plan)
    shapes = ev.shapes(4, 2, 2)
    m, blocks = plan.num_microbatches(TRAIN.global_batch), SPEC.layers // 2
    listed = _sum(items, ev, shapes, 0, lambda i: i.label.startswith(("tp/attention", "tp/mlp")))
    t = ev.block_terms(4, sp, 2, recompute)
    assert listed / (m * blocks) == pytest.approx(t.tp_s)


def test_edge_tp_and_boundary_match_the_full_list():
    """Embedding (first stage) and head + loss (last stage) TP items, and the stage-boundary send."""
    plan = Plan(dp=2, tp=4, pp=2, micro_batch=2)
    ev = Evaluator(SPEC, TRAIN, CLUSTER)
    items = communication_list(SPEC, TRAIN, plan)
    shapes, m = ev.shapes(4, 2, 2), plan.num_microbatches(TRAIN.global_batch)
    t = ev.block_terms(4, False, 2, "none")
    emb = _sum(items, ev, shapes, 0, lambda i: i.label == "tp/embedding")
    head = _sum(items, ev, shapes, 1, lambda i: i.label.startswith(("tp/lm-head", "tp/cross-entropy")))
    assert (emb / m, head / m) == pytest.approx((t.tp.embedding_s, t.tp.head_s))
    send = next(i for i in items if i.label == "pp/forward" and i.role == "send")
    assert send.nbytes == t.boundary_bytes


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_dp_sums_match_the_full_list(zero):
    """The DP items of the real plan (m = 4 micro-batches) per micro-batch-independent pass equal
    the evaluator's priced list of one micro-batch per step."""
    plan = Plan(dp=2, tp=2, pp=2, micro_batch=4, zero=zero)
    ev = Evaluator(SPEC, TRAIN, CLUSTER)
    items = communication_list(SPEC, TRAIN, plan)
    shapes, m = ev.shapes(2, 2, 2), plan.num_microbatches(TRAIN.global_batch)
    times = ev.dp_entry(2, 2, 2, zero, False, 0).times
    grads = _sum(items, ev, shapes, 0, lambda i: i.label == "dp/grads")
    params = _sum(items, ev, shapes, 0, lambda i: i.label == "dp/params")
    if zero == 0:
        assert grads == pytest.approx(times.all_reduce)
        return
    per_step_rs = m if zero >= 2 else 1  # ZeRO-2/3 reduce-scatter after every micro-batch
    per_step_ag = 2 * m if zero == 3 else 1  # ZeRO-3 gathers for every forward and backward
    assert grads == pytest.approx(per_step_rs * times.reduce_scatter)
    assert params == pytest.approx(per_step_ag * times.all_gather)
    assert all(i.op in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER) for i in items
               if i.axis is Axis.DP and not i.startup)


@pytest.mark.parametrize("zero,rank", [(0, 0), (0, 3), (1, 0), (1, 3)])
def test_first_and_last_stage_dp_prices_match_the_full_list_on_pp4(zero, rank):
    """pp 4: the DP sums, the largest bucket, the tied-embedding AllReduce and the TP AllReduce of
    partial gradients of the first and the last stage equal those of the real plan's full list
    (one micro-batch per step)."""
    plan = Plan(dp=2, tp=2, pp=4, micro_batch=16, sequence_parallel=True, zero=zero)
    ev = Evaluator(SPEC, TRAIN, CLUSTER)
    items = communication_list(SPEC, TRAIN, plan)
    shapes = ev.shapes(2, 2, 4)
    got = ev.dp_entry(2, 4, 2, zero, True, rank)
    grads = _sum(items, ev, shapes, rank, lambda i: i.label == "dp/grads")
    params = _sum(items, ev, shapes, rank, lambda i: i.label == "dp/params")
    largest = max(item_time_s(i, ev.pricer, shapes) for i in items
                  if not i.startup and rank in i.pp_ranks and i.label == "dp/grads")
    tied = _sum(items, ev, shapes, rank, lambda i: i.label == "pp/tied-embedding-grads")
    partial = _sum(items, ev, shapes, rank, lambda i: i.label == "tp/partial-grads")
    assert tied > 0 and partial > 0  # GPT-2 ties its embeddings; LayerNorm grads are partial under SP
    assert (got.replica_s, got.partial_grads_s) == pytest.approx((tied, partial))
    if zero == 0:
        assert (got.times.all_reduce, got.times.all_reduce_bucket) == pytest.approx((grads, largest))
    else:
        assert (got.times.reduce_scatter, got.times.all_gather) == pytest.approx((grads, params))
        assert got.times.reduce_scatter_bucket == pytest.approx(largest)
