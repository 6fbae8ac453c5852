"""The wider search (plan/search_ext.py, plan/mechanisms.py): TP overlap, DP overlap, offload,
HSDP / ZeRO++ and rank order as searched, fixable dimensions, priced consistently and pruned
soundly.

Expected values come from the rules stated in the modules (hand-checked here), from plain
arithmetic on the evaluator's own terms where a test checks that two prices agree, or from an
exhaustive search without the bound."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.errors import PlanInfeasible
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.search import SearchSpace, search_plans, search_transformer_plans
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

A100 = load_cluster("dgx-a100")
B200 = load_cluster("dgx-b200")  # its preset states no host: no offload there
LLAMA7 = load_model("llama-2-7b")
TRAIN = TrainingSpec(global_batch=64, seq_len=2048)

CLASSIC = dict(tp_overlap=["none"], dp_overlap=[True], offload_optimizer=["none"], offload_activations=[False],
               fsdp_shard_size=[], zeropp=[False], rank_order=["tp-cp-dp-pp"])
"""The wider dimensions pinned to the classic search's single values."""


def test_wide_space_is_ten_times_the_classic_one():
    """Llama-2-7B on 64 A100: the widened space has >= 10x the candidates of the classic one."""
    wide = search_plans(LLAMA7, TRAIN, A100, 64)
    classic = search_plans(LLAMA7, TRAIN, A100, 64, SearchSpace(**CLASSIC))
    assert wide.candidates >= 10 * classic.candidates


def test_bound_never_drops_a_top_plan():
    """The best five with the bound equal the best five of pricing every plan that fits."""
    space = SearchSpace(tp=[1, 2, 4], pp=[1, 2], micro_batch=[1, 2])
    bounded = search_plans(LLAMA7, TRAIN, A100, 16, space)
    exhaustive = search_transformer_plans(LLAMA7, TRAIN, A100, 16, space, use_bound=False)
    assert [e.step.step_time_s for e in bounded.best] == pytest.approx([e.step.step_time_s for e in exhaustive.best])
    assert bounded.candidates == exhaustive.candidates
    assert exhaustive.bounded == 0


def test_offload_variants_price_like_evaluate():
    """The search's derived offload times equal `evaluate` of each offloaded plan."""
    ev = Evaluator(LLAMA7, TRAIN, A100)
    base = PlanPoint(2, 2, 4, 1, 2, "1f1b", True, "selective", 1, 1, 1, True, "default", None, "ring", True)
    times = ev.variant_times_s(ev.context(base), base, [False, True], ["none", "cpu"])
    want = [ev.evaluate(base._replace(offload_activations=a, offload_optimizer=o)).step.step_time_s
            for a in (False, True) for o in ("none", "cpu")]
    assert times == pytest.approx(want)


def test_fixed_dimensions_are_honoured():
    """Every wider dimension fixed: every ranked plan carries the asked values."""
    space = SearchSpace(tp_overlap=["userbuffers"], sequence_parallel=[True], dp_overlap=[False],
                        rank_order=["tp-cp-pp-dp"], offload_optimizer=["none"], offload_activations=[False])
    result = search_plans(LLAMA7, TRAIN, A100, 64, space)
    for e in result.best:
        p = e.plan
        assert (p.tp_overlap, p.dp_overlap, p.rank_order) == ("userbuffers", False, "tp-cp-pp-dp")


def test_optimizer_offload_is_what_makes_a_big_model_fit():
    """Llama-2-7B on one A100 with ZeRO-0: its 16 bytes/param of states (112 GB) only fit when the
    optimizer lives on the host; on a cluster stating no host, nothing fits."""
    space = SearchSpace(zero=[0], recompute=["full"], micro_batch=[1])
    one = TrainingSpec(global_batch=1, seq_len=2048)
    best = search_plans(LLAMA7, one, A100, 1, space).best[0]
    assert best.plan.offload_optimizer == "cpu"
    assert best.step.offload_s > 0 and best.step.optimizer_s == 0.0
    with pytest.raises(PlanInfeasible):
        search_plans(LLAMA7, one, B200.model_copy(update={"accelerator": A100.accelerator}), 1, space)


def test_tp_overlap_needs_sequence_parallelism():
    """A plan asking for TP overlap without SP is refused with the reason."""
    with pytest.raises(ValueError, match="needs sequence_parallel"):
        Plan(tp=8, tp_overlap="ring")


def test_ring_overlap_hides_tp_traffic():
    """tp 8 with SP: ring overlap exposes less TP time than none, and the step is shorter."""
    plan = Plan(tp=8, dp=8, sequence_parallel=True, micro_batch=2, recompute="selective")
    none = estimate_plan(LLAMA7, TRAIN, plan.model_copy(update={"tp_overlap": "none"}), A100)
    ring = estimate_plan(LLAMA7, TRAIN, plan.model_copy(update={"tp_overlap": "ring"}), A100)
    assert ring.step.tp_comm_s < none.step.tp_comm_s
    assert ring.step.step_time_s < none.step.step_time_s


def test_rank_order_moves_pipeline_traffic_into_the_node():
    """tp 2, pp 4, dp 8: Megatron's tp-pp-dp mapping keeps stage neighbours in one node, so the
    pipeline's messages cost less than under the default order (which puts them on the NIC)."""
    plan = Plan(tp=2, pp=4, dp=8, micro_batch=1, sequence_parallel=True)
    default = estimate_plan(LLAMA7, TRAIN, plan, A100)
    mapped = estimate_plan(LLAMA7, TRAIN, plan.model_copy(update={"rank_order": "tp-cp-pp-dp"}), A100)
    assert mapped.step.pp_comm_s < default.step.pp_comm_s


@pytest.mark.parametrize("framework, tried", [("deepspeed", True), ("megatron", False), ("torchtitan", False),
                                              ("fsdp", False)])
def test_zeropp_is_searched_only_under_deepspeed(framework, tried):
    """ZeRO++ (qwZ / hpZ / qgZ) exists only in DeepSpeed (its zero_optimization keys
    zero_quantized_weights, zero_hpz_partition_size, zero_quantized_gradients; FSDP2, FSDP1 and
    Megatron's distributed optimizer have none): Llama-2-7B ZeRO-3 on 128 A100 tries it under
    DeepSpeed and never ranks it for the other engines."""
    training = TrainingSpec(global_batch=256, seq_len=4096, framework=framework)
    result = search_plans(LLAMA7, training, A100, 128, SearchSpace(tp=[1], pp=[1], zero=[3], micro_batch=[2]),
                          top_k=50)
    assert any(e.plan.zeropp for e in result.best) is tried


def test_zeropp_needs_zero3():
    """ZeRO++ is a ZeRO-3 refinement."""
    with pytest.raises(ValueError, match="zeropp needs zero 3"):
        Plan(dp=8, zero=2, zeropp=True)


def test_ramp_up_batches_constrain_the_split():
    """A ramp-up (start 16, increment 8) keeps only plans whose dp x micro_batch divides 16, 8 and
    the global batch 64, i.e. divides 8 (Megatron's ramp-up calculator asserts each ramp batch
    splits into dp x micro_batch); without it the search ranks larger products too."""
    free = search_plans(LLAMA7, TRAIN, A100, 64, SearchSpace(**CLASSIC), top_k=50)
    assert any(8 % (e.plan.dp * e.plan.micro_batch) for e in free.best)
    ramp = search_plans(LLAMA7, TRAIN, A100, 64, SearchSpace(**CLASSIC, batch_splits=[16, 8]), top_k=50)
    assert ramp.best and all(8 % (e.plan.dp * e.plan.micro_batch) == 0 for e in ramp.best)


def test_ramp_up_that_no_split_admits_names_the_ramp_batch():
    """dp 64 (tp 1, pp 1) cannot split a ramp-up batch of 8: the reason names that batch."""
    with pytest.raises(PlanInfeasible, match=r"ramp-up batch \(8\)"):
        search_plans(LLAMA7, TRAIN, A100, 64, SearchSpace(**CLASSIC, tp=[1], pp=[1], batch_splits=[8]))


@pytest.mark.parametrize("framework, tried", [("megatron", True), ("torchtitan", False), ("deepspeed", False),
                                              ("fsdp", False)])
def test_activation_offload_is_searched_only_under_megatron(framework, tried):
    """Offloading the saved activations of blocks that are not recomputed is Megatron-core's
    (TransformerConfig cpu_offloading, fine_grained_activation_offloading); DeepSpeed offloads
    checkpoints only (activation_checkpointing.cpu_checkpointing, under recompute) and torchtitan has
    none (pytorch/torchtitan#2379, 2026): on a cluster with a host the search tries it under
    Megatron alone."""
    training = TrainingSpec(global_batch=64, seq_len=2048, framework=framework)
    result = search_plans(LLAMA7, training, A100, 8, SearchSpace(tp=[1], pp=[1], zero=[1], micro_batch=[1],
                                                                 recompute=["none"]), top_k=50)
    assert any(e.plan.offload_activations for e in result.best) is tried
