"""Context parallelism in the planner (commlist cp items, kernels and activations with cp,
parallel/cp.ring_exposure, the search rule) against hand-worked volumes: every rank holds s/cp
tokens of each sequence; per block and micro-batch K and V (2 b (s/cp) kv_width / tp) go around
the cp ring in cp - 1 steps forward, K, V and dK, dV in backward (ring attention, Liu et al. 2023;
Megatron-core cp_comm_type p2p); gradients are reduced over dp x cp ranks. The executor does not
run cp, so these items are the planner's only (the plan notes say so)."""

from __future__ import annotations

import pytest

from modelplan.comm.exact import bytes_per_rank
from modelplan.comm.ops import Axis, Collective
from modelplan.plan.commlist import communication_list
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.parallel.cp import ring_exposure as cp_ring_exposure
from modelplan.plan.search import SearchSpace, search_plans
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

INTRA_BPS, INTER_BPS = 100e9, 10e9
LLAMA_GQA = TransformerSpec(layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=11008, vocab=32000)  # head_dim 128


def gpt(layers: int = 4, hidden: int = 1024, heads: int = 16) -> TransformerSpec:
    """Korthikanti's GPT layer: LayerNorm, MHA, 4h GeLU MLP, biases, dropout."""
    return TransformerSpec(layers=layers, hidden=hidden, heads=heads, ffn_hidden=4 * hidden, vocab=51200,
                           max_positions=65536, position="learned", norm="layernorm", norm_bias=True,
                           qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
                           activation="gelu", tied_embeddings=True, dropout=True)


def ideal_cluster() -> Cluster:
    """No latencies, efficiency 1: 100 GB/s inside a node of 8, one 10 GB/s NIC per GPU."""
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    return Cluster(name="ideal", accelerator=acc, gpus_per_node=8, call_latency_us=0.0,
                   intra=Link(name="nvl", bandwidth_gbps=INTRA_BPS / 1e9, latency_us=0.0),
                   inter=Link(name="ib", bandwidth_gbps=INTER_BPS / 1e9, latency_us=0.0))


def _sent(items, label: str, pp_rank: int = 0) -> int:
    return sum(i.nbytes * i.count for i in items if i.label == label and i.role == "send" and pp_rank in i.pp_ranks)


def test_kv_ring_volume_per_layer_is_an_all_gather_of_k_and_v():
    """b 1, s 32768, cp 4, tp 2, GQA kv width 8 x 128 (512 per tp rank), bf16: per block and
    micro-batch the forward sends (cp-1) blocks of 2 x 8192 x 512 x 2 B = 50,331,648 B, which is
    (cp-1)/cp of an AllGather of the whole K and V (2 x 32768 x 512 x 2 B); backward sends K, V
    and dK, dV: twice that."""
    training = TrainingSpec(global_batch=1, seq_len=32768)
    items = communication_list(LLAMA_GQA, training, Plan(tp=2, cp=4))
    layers = LLAMA_GQA.layers
    fwd = 3 * 2 * 8192 * 512 * 2
    assert fwd == 3 * (2 * 32768 * 512 * 2) // 4 == 50_331_648
    assert _sent(items, "cp/attention/kv") == 2 * fwd * layers  # forward + backward pass of K, V
    assert _sent(items, "cp/attention/dkv") == fwd * layers
    assert {i.axis for i in items if i.label.startswith("cp/")} == {Axis.CP}


def test_full_recompute_runs_the_kv_ring_again():
    """The recomputed forward exchanges K and V once more: 3 K, V passes per block instead of 2."""
    training = TrainingSpec(global_batch=1, seq_len=32768)
    plain = communication_list(LLAMA_GQA, training, Plan(cp=4, recompute="none"))
    full = communication_list(LLAMA_GQA, training, Plan(cp=4, recompute="full"))
    assert 2 * _sent(full, "cp/attention/kv") == 3 * _sent(plain, "cp/attention/kv")


def test_tensor_parallel_messages_carry_the_local_sequence():
    """Every TP AllReduce is b (s/cp) h: 8 b (s/cp) h (t-1)/t elements per block and micro-batch
    (Narayanan et al. 2021 with s/cp tokens): b 1, s 32768, cp 4, h 4096, t 2, bf16 -> 8 x 8192 x 4096
    x 1/2 x 2 B = 268,435,456 B per block."""
    items = communication_list(LLAMA_GQA, TrainingSpec(global_batch=1, seq_len=32768), Plan(tp=2, cp=4))
    blocks = sum(bytes_per_rank(i.op, "ring", i.nbytes, i.group_size)[0] * i.count for i in items
                 if i.label.startswith(("tp/attention", "tp/mlp")))
    assert blocks == 8 * 8192 * 4096 // 2 * 2 * LLAMA_GQA.layers == 268_435_456 * LLAMA_GQA.layers


def test_gradients_reduce_over_dp_times_cp():
    """dp 2, cp 4: the gradient AllReduce group has 8 ranks and moves 2 (8-1)/8 of the fp32
    gradients (Megatron's data-parallel group with cp)."""
    training = TrainingSpec(global_batch=2, seq_len=32768)
    items = communication_list(LLAMA_GQA, training, Plan(dp=2, cp=4))
    grads = [i for i in items if i.label == "dp/grads"]
    assert {i.group_size for i in grads} == {8} and {i.op for i in grads} == {Collective.ALL_REDUCE}
    one_dp = communication_list(LLAMA_GQA, training.model_copy(update={"global_batch": 8}), Plan(dp=8))
    assert {i.nbytes for i in grads} == {i.nbytes for i in one_dp if i.label == "dp/grads"}


def test_activations_are_split_over_cp():
    """SP + selective recompute keeps 34 (s/cp) b h / t bytes per block (Korthikanti et al. 2022
    Table 2 with s/cp tokens): s 8192, cp 2, b 1, h 1024, t 2 -> 34 x 4096 x 1024 / 2 = 71,303,168."""
    ev = Evaluator(gpt(), TrainingSpec(global_batch=8, seq_len=8192, attention="eager"), ideal_cluster())
    assert ev.block_terms(2, True, 1, "selective", cp=2).activation_bytes == 34 * 4096 * 1024 // 2 == 71_303_168


def test_scores_of_local_queries_against_all_keys():
    """Without recompute the 5 a s^2 b score term becomes 5 a (s/cp) s b (s/cp queries, all s
    keys): s 8192, cp 2, a 16, b 1, h 1024, t 2, SP -> (34 x 4096 x 1024 + 5 x 16 x 4096 x 8192) / 2."""
    ev = Evaluator(gpt(), TrainingSpec(global_batch=8, seq_len=8192, attention="eager"), ideal_cluster())
    want = (34 * 4096 * 1024 + 5 * 16 * 4096 * 8192) // 2
    assert ev.block_terms(2, True, 1, "none", cp=2).activation_bytes == want == 1_413_480_448


def test_ring_exposure_by_hand():
    """cp 4: 3 steps; a 1 s K, V send against 2/4 s of attention per step exposes 0.5 s each in
    forward; backward sends 2 s (K, V + dK, dV) against 4/4 s: 1 s each. 9 s sent, 4.5 s hidden."""
    assert cp_ring_exposure(4, 1.0, 2.0, 4.0) == pytest.approx((1.5, 3.0, 4.5))
    assert cp_ring_exposure(4, 1.0, 40.0, 80.0) == pytest.approx((0.0, 0.0, 9.0))  # fully hidden


def test_kv_send_crosses_nodes_when_the_cp_group_does():
    """tp 1, cp 4: the ring is in one node (NVLink); tp 4, cp 4: it spans 16 ranks, 2 nodes, and a
    send goes through one NIC. K, V block: 2 x (4096/4) x 16 heads/t x 64 x 2 B."""
    ev = Evaluator(gpt(), TrainingSpec(global_batch=8, seq_len=4096), ideal_cluster())
    inside = 2 * 1024 * 16 * 64 * 2
    assert ev.cp_seconds(1, 1, 4).kv_send_s == pytest.approx(inside / INTRA_BPS)
    assert ev.cp_seconds(4, 1, 4).kv_send_s == pytest.approx(inside / 4 / INTER_BPS)


def test_cp_plan_terms_add_up_and_its_note_points_to_verify():
    """A cp plan is priced (terms sum to the step, a CP ring term exists) and its notes say verify
    executes each cp_comm_type."""
    spec, training = gpt(), TrainingSpec(global_batch=8, seq_len=8192)
    est = estimate_plan(spec, training, Plan(dp=2, tp=2, cp=2, sequence_parallel=True), ideal_cluster())
    assert est.step.cp_comm_s + est.step.cp_hidden_s > 0
    assert sum(est.step.terms().values()) == pytest.approx(est.step.step_time_s)
    assert any("verify --cp-comm-type` executes each type" in note for note in est.notes)


def test_search_adds_cp_only_for_long_sequences_or_when_asked():
    """seq 4096: every ranked plan has cp 1; --cp 2 makes every plan cp 2; from seq 32768 on
    (LONG_SEQUENCE) cp > 1 is searched by default and wins here: without recompute a 32k sequence's
    s x s scores need more than 80 GB on one GPU, and selective recompute is slower."""
    space = SearchSpace(tp=[1], pp=[1], micro_batch=[1], recompute=["selective", "none"], zero=[1],
                        sequence_parallel=[False])
    spec = gpt(layers=2, hidden=512, heads=8)
    short = search_plans(spec, TrainingSpec(global_batch=8, seq_len=4096), ideal_cluster(), 8, space, top_k=20)
    assert {e.plan.cp for e in short.best} == {1}
    asked = search_plans(spec, TrainingSpec(global_batch=8, seq_len=4096), ideal_cluster(), 8,
                         space.model_copy(update={"cp": [2]}), top_k=20)
    assert {e.plan.cp for e in asked.best} == {2}
    long = search_plans(spec, TrainingSpec(global_batch=8, seq_len=32768), ideal_cluster(), 8, space, top_k=20)
    assert max(e.plan.cp for e in long.best) > 1


def test_pytorch_ring_sdpa_merges_priced_per_ring_step():
    """PyTorch's context-parallel SDPA (torchtitan) merges every ring step's partial output into an
    fp32 running output and adds each backward step's gradients into fp32 accumulators
    (torch/distributed/tensor/experimental/_attention.py). Worked by hand for the 32-head, 8-kv-head
    GQA block, micro-batch 1, seq 262144 over cp 8 (32768 local queries): the output has
    32 x 32768 x 128 = 134,217,728 values; 7 ring steps x 38 B = 266 B per value forward
    (cast 2+4, sub 12, mul 8, sub 12) and 7 x (14 + 36 x 8/32) = 161 B backward (dQ add 10,
    dO.O pre-pass 4; dK, dV adds and their cat 36 per kv value, a quarter of the query values);
    6 and 4 kernels per step. Megatron (TE p2p) and cp 1 carry no such pass."""
    from modelplan.plan.kernels import layer_kernels

    kw = dict(cp=8, attention="flash")
    merges = [e for e in layer_kernels(LLAMA_GQA, 1, 1, 262144, 2, **kw, cp_fp32_merge=True).attention_core_elementwise
              if e.name.endswith("cp_merge")]
    assert len(merges) == 1
    (m,) = merges
    assert m.elements == 134_217_728
    assert m.fwd_bytes == 134_217_728 * 266
    assert m.bwd_bytes == 134_217_728 * 161
    assert m.kernels == (42, 28)
    assert not [e for e in layer_kernels(LLAMA_GQA, 1, 1, 262144, 2, **kw).elementwise if e.name.endswith("cp_merge")]
    assert not [e for e in layer_kernels(LLAMA_GQA, 1, 1, 32768, 2, attention="flash", cp_fp32_merge=True).elementwise
                if e.name.endswith("cp_merge")]


def test_torchtitan_profile_prices_the_fp32_merges():
    """The torchtitan engine profile turns the merges on; Megatron's does not."""
    from modelplan.specs.load import load_engine

    from modelplan.plan.engine import engine_assumptions, engine_settings

    assert load_engine("torchtitan").cp_fp32_merge
    assert not load_engine("megatron").cp_fp32_merge
    training = TrainingSpec(global_batch=8, seq_len=4096)
    titan = engine_settings(training, load_engine("torchtitan"))
    assert "CP ring merges in fp32" in engine_assumptions(titan, None, 0.05, 10**9)
    assert "CP ring merges" not in engine_assumptions(engine_settings(training, load_engine("megatron")), None, 0.05,
                                                      10**9)
