"""MoE planning (plan/experts.py, kernels.moe_mlp_kernels, the evaluator's expert terms, the
search over ep) against hand-worked numbers: expert weights per GPU = experts/ep x one expert's
parameters; all-to-all bytes per token = top_k x h x bytes x (ep-1)/ep per direction per MoE
layer (GShard dispatch, Lepikhin et al. 2020 sec. 2.2, with dropless balanced routing);
expert GEMMs run top_k experts per token (active parameters)."""

from __future__ import annotations

import pytest

from modelplan.comm.exact import bytes_per_rank
from modelplan.comm.ops import Collective
from modelplan.plan.commlist import communication_list
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.experts import expert_capacity
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.dims import EXPERT_DP
from modelplan.plan.search import SearchSpace, search_plans
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec

INTRA_BPS, INTER_BPS = 100e9, 10e9
H, F, E, K = 1024, 2048, 8, 2
EXPERT_PARAMS = 3 * H * F  # gated expert: gate and up (h x f each) + down (f x h), no biases


def mixtral_like(layers: int = 2, first_dense: int = 0) -> TransformerSpec:
    """A small Mixtral-shaped model: SwiGLU experts, top-2 of 8, no biases."""
    return TransformerSpec(layers=layers, hidden=H, heads=8, kv_heads=8, ffn_hidden=4 * H, vocab=1024,
                           moe=MoESpec(num_experts=E, top_k=K, expert_ffn_hidden=F, first_dense_layers=first_dense))


def ideal_cluster() -> Cluster:
    """No latencies, efficiency 1: 100 GB/s inside a node of 8, one 10 GB/s NIC per GPU."""
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    return Cluster(name="ideal", accelerator=acc, gpus_per_node=8, call_latency_us=0.0,
                   intra=Link(name="nvl", bandwidth_gbps=INTRA_BPS / 1e9, latency_us=0.0),
                   inter=Link(name="ib", bandwidth_gbps=INTER_BPS / 1e9, latency_us=0.0))


def test_expert_weights_per_gpu_are_experts_over_ep_times_one_expert():
    """tp 2, ep 4, 2 MoE layers: each GPU holds 8/4 experts per layer of 3 h f / tp parameters:
    2 layers x 2 experts x 3 x 1024 x 2048 / 2 = 12,582,912."""
    ev = Evaluator(mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster())
    per_rank, _, _ = ev.held.rank_params(tp=2, pp=1, ep=4)
    assert per_rank[0][1] == 2 * (E // 4) * EXPERT_PARAMS // 2 == 12_582_912


def test_expert_parallel_saves_the_weights_of_the_experts_it_moves_away():
    """ep 1 -> 4 on dp 8: each GPU drops 6 of 8 experts per layer: 6 x 2 layers x 3 h f x 2 B (bf16)
    = 150,994,944 bytes of weights (75,497,472 parameters)."""
    ev = Evaluator(mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster())
    (w1, _, _), _ = ev.held.states(1, 1, 8, 0, ep=1)
    (w4, _, _), _ = ev.held.states(1, 1, 8, 0, ep=4)
    assert w1 - w4 == 6 * 2 * EXPERT_PARAMS * 2 == 150_994_944


def test_zero1_shards_expert_optimizer_states_over_dp_over_ep():
    """ZeRO-1 shards expert states over the dp/ep ranks holding the same experts, so per GPU they
    are E/ep x P_e x 12 / (dp/ep) = E x P_e x 12 / dp for every ep (Rajbhandari et al. 2020)."""
    ev = Evaluator(mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster())
    opt = {ep: ev.held.states(1, 1, 8, 1, ep)[0][2] for ep in (1, 2, 4, 8)}
    assert opt[1] == pytest.approx(opt[2]) == pytest.approx(opt[4]) == pytest.approx(opt[8])


def test_dropless_capacity_is_tokens_times_top_k_over_experts():
    """Balanced routing: each expert gets 2048 tokens x top-2 / 8 experts = 512 slots; the executor
    keeps one slot per token (2048); capacity factor 1.25 gives ceil(640) = 640."""
    moe = mixtral_like().moe
    assert expert_capacity(2048, moe, 1.0) == 512
    assert expert_capacity(2048, moe, None) == 2048
    assert expert_capacity(2048, moe, 1.25) == 640


def test_all_to_all_bytes_per_token_are_top_k_h_bytes_ep_minus_1_over_ep():
    """b 2, s 1024, ep 4, bf16, capacity factor 1: per token, per MoE layer and per direction
    (dispatch or combine) a rank sends top_k x h x 2 B x (ep-1)/ep = 2 x 1024 x 2 x 3/4 = 3,072 B;
    4 AllToAlls per layer per micro-batch (dispatch + combine, forward + backward)."""
    spec, training = mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024)
    items = communication_list(spec, training, Plan(dp=4, ep=4, micro_batch=2), capacity_factor=1.0)
    a2a = [i for i in items if i.op is Collective.ALL_TO_ALL]
    sent = sum(bytes_per_rank(i.op, "pairwise", i.nbytes, i.group_size)[0] * i.count for i in a2a)
    tokens, m = 2 * 1024, 1
    assert sum(i.count for i in a2a) == 4 * spec.layers * m
    assert sent / (tokens * 4 * spec.layers * m) == K * H * 2 * 3 / 4 == 3072


def test_all_to_all_inside_a_node_runs_over_nvlink():
    """ep 8 with tp 1 is one node: one AllToAll of n = T k h 2 B moves 7/8 n over 100 GB/s;
    4 per MoE block and micro-batch (alpha 0)."""
    ev = Evaluator(mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster())
    n = 1024 * K * H * 2  # one sequence's dispatch buffer
    assert ev.block_terms(1, False, 1, "none", 1, 8).ep_s == pytest.approx(4 * 7 / 8 * n / INTRA_BPS)


def test_all_to_all_across_nodes_is_limited_by_the_nic():
    """ep 16 with tp 1 spans 2 nodes: half of each buffer leaves through the GPU's one NIC,
    (16-8)/16 n / 10 GB/s, slower than the 7/16 n over NVLink (comm_hw.md table (a), multi-node
    all-to-all)."""
    spec = mixtral_like().model_copy(update={"moe": MoESpec(num_experts=16, top_k=K, expert_ffn_hidden=F)})
    ev = Evaluator(spec, TrainingSpec(global_batch=16, seq_len=1024), ideal_cluster())
    n = 1024 * K * H * 2
    assert ev.block_terms(1, False, 1, "none", 1, 16).ep_s == pytest.approx(4 * 8 / 16 * n / INTER_BPS)


def test_full_recompute_repeats_the_forward_all_to_alls():
    """The recomputed forward dispatches and combines again: 6 AllToAlls instead of 4."""
    ev = Evaluator(mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster())
    assert ev.block_terms(1, False, 1, "full", 1, 8).ep_s == pytest.approx(1.5 * ev.block_terms(1, False, 1, "none", 1, 8).ep_s)


def test_expert_gemms_run_top_k_experts_per_token_and_the_router_every_expert():
    """Forward FLOPs of one MoE block's MLP on one tp rank (tp 2, ep 4, T = 2048, capacity 512):
    experts 2 T k (3 h f) / tp = 2 x 2048 x 2 x 3 x 1024 x 2048 / 2 = 25,769,803,776 (active
    parameters, not all 8 experts); router 2 T h E = 33,554,432 (replicated over tp)."""
    k = layer_kernels(mixtral_like(), 2, 2, 1024, 2, moe_layer=True, ep=4, capacity=512)
    flops = {g.name: g.flops for g in k.gemms}
    assert flops["mlp/experts/in"] + flops["mlp/experts/out"] == 2 * 2048 * K * EXPERT_PARAMS // 2 == 25_769_803_776
    assert flops["mlp/router"] == 2 * 2048 * H * E == 33_554_432
    assert "mlp/in" not in flops


def test_expert_gradients_reduce_over_the_expert_data_parallel_group():
    """dp 16, ep 8, tp 1 on nodes of 8: the ranks holding the same experts are 8 apart (2 ranks,
    one per node), so a ring AllReduce of the fp32 expert gradients P moves 2 (2-1)/2 P 4 B over
    the NIC (Narayanan et al. 2021 sec. 3.2 ring volume)."""
    spec, training = mixtral_like(), TrainingSpec(global_batch=16, seq_len=1024)
    ev = Evaluator(spec, training, ideal_cluster())
    items = communication_list(spec, training, Plan(dp=16, ep=8, micro_batch=1))
    unit = next(i for i in items if i.label == "dp/grads" and i.group_size == 2)
    expert_bytes = (E // 8) * EXPERT_PARAMS * 4
    assert unit.nbytes == expert_bytes
    shape = ev.shapes(1, 16, 1, 8)[EXPERT_DP]  # the dp ranks with the same experts, placed exactly
    assert ev.pricer.time_s(unit.op, unit.nbytes, shape) == pytest.approx(2 * 1 / 2 * expert_bytes / INTER_BPS)


def test_stage_blocks_split_into_dense_and_moe():
    """4 layers, the first 2 dense (DeepSeek first_k_dense_replace), pp 2: stage 0 holds 2 dense
    blocks, stage 1 two MoE blocks; the MoE stage is the critical one."""
    spec = mixtral_like(layers=4, first_dense=2).model_copy(update={"vocab": 128})  # embedding lighter than experts
    ev = Evaluator(spec, TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster())
    assert [(b.dense, b.moe) for b in ev.rank_blocks("1f1b", 2, 1)[1]] == [(2, 0), (0, 2)]
    assert ev.stage_entry(1, False, 1, "none", 2, 2).terms.critical_rank == 1


def test_moe_plan_has_an_exposed_all_to_all_term_and_the_terms_add_up():
    """dp 8, ep 8: the step's ep_comm_s is m x layers x the per-block AllToAll time; the terms
    still sum to the step."""
    spec, training = mixtral_like(), TrainingSpec(global_batch=16, seq_len=1024)
    ev = Evaluator(spec, training, ideal_cluster())
    est = estimate_plan(spec, training, Plan(dp=8, ep=8, micro_batch=1), ideal_cluster())
    m = 16 // 8
    assert est.step.ep_comm_s == pytest.approx(m * spec.layers * ev.block_terms(1, False, 1, "none", 1, 8).ep_s)
    assert sum(est.step.terms().values()) == pytest.approx(est.step.step_time_s)
    assert estimate_plan(spec, training, Plan(dp=8, micro_batch=1), ideal_cluster()).step.ep_comm_s == 0


def test_search_tries_every_ep_dividing_dp_and_the_experts():
    """tp 1, pp 1 on 16 GPUs: dp 16, so ep in {1, 2, 4, 8} (divisors of 16 dividing 8 experts)."""
    space = SearchSpace(tp=[1], pp=[1], micro_batch=[1], recompute=["none"], zero=[1], sequence_parallel=[False],
                        dp_overlap=[True])
    result = search_plans(mixtral_like(), TrainingSpec(global_batch=16, seq_len=1024), ideal_cluster(), 16, space,
                          top_k=10)
    assert sorted(e.plan.ep for e in result.best) == [1, 2, 4, 8]


def test_ep_that_does_not_divide_the_experts_is_rejected_with_its_numbers():
    """--ep 3 on 8 experts: every plan rejected with 'ep (3) must divide moe.num_experts (8)'."""
    from modelplan.errors import PlanInfeasible

    with pytest.raises(PlanInfeasible, match=r"ep \(3\) must divide moe.num_experts \(8\)"):
        search_plans(mixtral_like(), TrainingSpec(global_batch=12, seq_len=1024), ideal_cluster(), 12,
                     SearchSpace(ep=[3]))


def test_dense_models_search_ep_1_only():
    """No experts, no expert parallelism: every ranked plan has ep 1."""
    dense = mixtral_like().model_copy(update={"moe": None})
    result = search_plans(dense, TrainingSpec(global_batch=16, seq_len=1024), ideal_cluster(), 8, top_k=5)
    assert {e.plan.ep for e in result.best} == {1}


# -- expert tensor parallelism (Megatron-core --expert-tensor-parallel-size, Plan.etp) ------------


def test_etp_one_keeps_whole_experts_and_folds_ep_over_tp_x_dp():
    """tp 2, dp 2, ep 4, etp 1 (Megatron-core's expert grid: etp x ep x expert-dp over the 4 ranks
    of a stage): each GPU holds 8/4 whole experts per layer (3 h f each, not split by tp) and
    reduces them over tp x dp / (ep x etp) = 1 rank; dense units keep dp = 2."""
    from modelplan.plan.shard import unit_shards

    shards = unit_shards(mixtral_like(), Plan(tp=2, dp=2, ep=4, etp=1))
    experts = shards["layers/0/experts"]
    assert (experts.numel, experts.group_size) == ((E // 4) * EXPERT_PARAMS, 1)
    assert shards["layers/0"].group_size == 2


def test_etp_one_plan_is_priced_with_ep_wider_than_dp():
    """ep 4 > dp 2 is valid with etp 1 (ep x etp = 4 divides tp x dp = 4) and priced: the MoE
    blocks' expert GEMMs run whole experts (n = 2 f for the gated input projection) on the
    tokens of each rank's sequence shard (b s / tp), and the all-to-all group is 4 consecutive
    ranks on one node."""
    spec, training = mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024)
    plan = Plan(tp=2, dp=2, ep=4, etp=1, sequence_parallel=True, micro_batch=1)
    est = estimate_plan(spec, training, plan, ideal_cluster(), world_size=4)
    assert est.step.ep_comm_s > 0
    k = layer_kernels(spec, 2, 1, 1024, 2, True, moe_layer=True, ep=4, capacity=1024 * K // E, etp=1)
    gemm = {g.name: g for g in k.gemms}
    assert gemm["mlp/experts/in"].n == 2 * F and gemm["mlp/experts/out"].k == F
    assert gemm["mlp/router"].m == 1024 // 2


def test_etp_plan_with_a_pipeline_is_priced():
    """The same ep 4 > dp 2 layout over 2 pipeline stages (8 GPUs): the rank-order note lays out
    the dense grid (EP folds over tp x dp, so there is no ep-inside-dp group to place); before,
    the note's grid refused ep 4 on dp 2 and the whole estimate failed."""
    spec, training = mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024)
    plan = Plan(tp=2, dp=2, pp=2, ep=4, etp=1, sequence_parallel=True, micro_batch=1)
    est = estimate_plan(spec, training, plan, ideal_cluster(), world_size=8)
    assert est.step.ep_comm_s > 0
    assert any(note.startswith("rank order") for note in est.notes)


def test_etp_must_fold_into_the_stage():
    """ep x etp must divide tp x dp x cp (the stage's ranks): ep 8, etp 1 on tp 2 x dp 2 does not."""
    from modelplan.plan.validate import plan_problems

    problems = plan_problems(mixtral_like(), TrainingSpec(global_batch=8, seq_len=1024),
                             Plan.model_construct(tp=2, dp=2, pp=1, vpp=1, cp=1, ep=8, etp=1, micro_batch=1,
                                                  schedule="1f1b", sequence_parallel=True, zero=0))
    assert any("ep * etp (8 * 1) must divide tp * dp * cp (2 * 2 * 1)" in p.message for p in problems)


def test_ep_comm_overlap_exposes_only_what_the_all_to_alls_exceed_of_the_block_compute():
    """Megatron-core --overlap-moe-expert-parallel-comm (merged forward/backward of two
    micro-batches): a block exposes max(0, AllToAll - its forward + backward compute), here
    hand-worked for the ep 16 block of `test_all_to_all_across_nodes_is_limited_by_the_nic`
    (4 x 8/16 x n / NIC bandwidth of AllToAll against the same block's kernel seconds): at 10 GB/s
    all hidden, at 0.1 GB/s (100 x the AllToAll) the excess stays."""
    spec = mixtral_like().model_copy(update={"moe": MoESpec(num_experts=16, top_k=K, expert_ffn_hidden=F)})
    plain = Evaluator(spec, TrainingSpec(global_batch=16, seq_len=1024), ideal_cluster())
    merged = Evaluator(spec, TrainingSpec(global_batch=16, seq_len=1024, ep_comm_overlap=True), ideal_cluster())
    a2a = 4 * 8 / 16 * (1024 * K * H * 2) / INTER_BPS
    base = plain.block_terms(1, False, 1, "none", 1, 16)
    assert base.ep_s == pytest.approx(a2a)
    over = merged.block_terms(1, False, 1, "none", 1, 16)
    assert over.compute_s == pytest.approx(base.compute_s)  # the kernels are unchanged
    assert over.ep_s == pytest.approx(max(0.0, a2a - base.compute_s)) == 0.0  # hidden at 10 GB/s
    slow = ideal_cluster()
    slow = slow.model_copy(update={"inter": slow.inter.model_copy(update={"bandwidth_gbps": 0.1})})  # a 0.1 GB/s NIC
    plain = Evaluator(spec, TrainingSpec(global_batch=16, seq_len=1024), slow).block_terms(1, False, 1, "none", 1, 16)
    over = Evaluator(spec, TrainingSpec(global_batch=16, seq_len=1024, ep_comm_overlap=True), slow).block_terms(
        1, False, 1, "none", 1, 16)
    assert plain.ep_s == pytest.approx(100 * a2a)
    assert over.ep_s == pytest.approx(100 * a2a - plain.compute_s)  # the excess over the block's compute


def test_overlapped_keeps_the_excess_split_as_before():
    """2 s forward + 2 s backward of AllToAll against 3 s of compute: 1 s stays, 0.5 s each way,
    3 s merged away; against 5 s nothing stays (all 4 s merged away)."""
    from modelplan.plan.parallel.ep import EpExposure, overlapped

    assert overlapped(EpExposure(2.0, 2.0, 0.0), 3.0) == pytest.approx(EpExposure(0.5, 0.5, 0.0, 3.0))
    assert overlapped(EpExposure(2.0, 2.0, 0.0), 5.0) == EpExposure(0.0, 0.0, 0.0, 4.0)
