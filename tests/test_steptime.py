"""Step-time model (evaluator.py, stage_time.py, parallel/*.py) against hand-worked Megatron formulas."""

from __future__ import annotations

import pytest

from modelplan.comm.ops import Axis
from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.pipeline import pipeline_schedule
from modelplan.plan.pipeline.profile import bubble_microbatches, simulate
from modelplan.plan.parallel.dp_zero import DpTimes, dp_exposure, optimizer_bytes_per_param
from modelplan.plan.parallel.pp import pipeline_time_s
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

INTRA_BPS, INTER_BPS = 100e9, 10e9


def ideal_cluster(gpus_per_node: int = 8) -> Cluster:
    """No latencies, efficiency 1: a collective's time is its ring volume over the bandwidth."""
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0, "fp16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    return Cluster(
        name="ideal", accelerator=acc, gpus_per_node=gpus_per_node, call_latency_us=0.0,
        intra=Link(name="nvl", bandwidth_gbps=INTRA_BPS / 1e9, latency_us=0.0),
        inter=Link(name="ib", bandwidth_gbps=INTER_BPS / 1e9, latency_us=0.0),
    )


def gpt(layers: int = 4, hidden: int = 1024, heads: int = 16, vocab: int = 51200) -> TransformerSpec:
    """Megatron GPT: LayerNorm, MHA, 4h GeLU MLP, biases, learned positions, tied embeddings."""
    return TransformerSpec(layers=layers, hidden=hidden, heads=heads, ffn_hidden=4 * hidden, vocab=vocab,
                           max_positions=2048, position="learned", norm="layernorm", norm_bias=True,
                           qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
                           activation="gelu", tied_embeddings=True, dropout=True)


@pytest.mark.parametrize(
    "schedule,pp,m,vpp",
    [("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1), ("1f1b", 8, 3, 1), ("interleaved", 4, 8, 2), ("interleaved", 4, 12, 3)],
)
def test_pipeline_closed_form_matches_the_schedule_simulation(schedule, pp, m, vpp):
    """m t + (p-1)/v t (Narayanan et al. 2021, sec. 2.2) equals the makespan of the schedule run on
    simulate()'s idealised clock (a chunk's forward 1/v, its backward 2/v of a micro-batch's t)."""
    tf, tb = 1.0, 2.0
    timeline = simulate(pipeline_schedule(schedule, pp, m, vpp), tf / vpp, tb / vpp / 2, tb / vpp / 2)
    bubble = float(bubble_microbatches(schedule, pp, m, vpp))
    assert bubble == pytest.approx((pp - 1) / vpp)
    assert pipeline_time_s(m, bubble, tf + tb, tf + tb) == pytest.approx(timeline.makespan)


def test_bubble_fraction_p_minus_1_over_v_m():
    """pp 8, m 32, v 2: bubble / ideal = 7 / 64 (Narayanan et al. 2021, sec. 2.2.2)."""
    t = 3.0
    bubble = float(bubble_microbatches("interleaved", 8, 32, 2))
    assert pipeline_time_s(32, bubble, t, t) - 32 * t == pytest.approx(7 / 64 * 32 * t)


def test_tp_volume_per_layer_is_8bsh_t_minus_1_over_t():
    """4 ring AllReduces of b*s*h per layer per micro-batch: 8 b s h (t-1)/t elements
    (Narayanan et al. 2021, sec. 3.2), at 2 bytes over 100 GB/s."""
    b, s, h, t = 2, 1024, 1024, 4
    ev = Evaluator(gpt(hidden=h), TrainingSpec(global_batch=8, seq_len=s, precision="bf16"), ideal_cluster())
    terms = ev.block_terms(t, False, b, "none")
    elements = (terms.tp.fwd_s + terms.tp.bwd_s) * INTRA_BPS / 2
    assert elements == pytest.approx(8 * b * s * h * (t - 1) / t)


def test_sequence_parallel_moves_the_same_tp_volume():
    """SP turns each AllReduce into ReduceScatter + AllGather of the same total volume (Korthikanti)."""
    ev = Evaluator(gpt(), TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster(), CostModel(overlap_interference=0))
    assert ev.block_terms(4, True, 1, "none").tp.fwd_s == pytest.approx(ev.block_terms(4, False, 1, "none").tp.fwd_s)


def test_full_recompute_repeats_the_forward_tp_collectives():
    """Recomputing a block's forward re-runs its 2 AllReduces (comm_hw.md sec. 5.3)."""
    ev = Evaluator(gpt(), TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster())
    terms = ev.block_terms(4, False, 1, "full")
    assert terms.tp.recompute_s == pytest.approx(terms.tp.fwd_s) and terms.tp.recompute_s > 0


def test_dp_volume_is_2_d_minus_1_over_d_times_params():
    """Ring AllReduce of the fp32 gradients of all P parameters on 8 ranks of one node (tp = pp = 1):
    2 (d-1)/d P elements per rank (Narayanan et al. 2021, sec. 3.2), P from count_params."""
    spec = gpt()
    training = TrainingSpec(global_batch=8, seq_len=1024)
    ev = Evaluator(spec, training, ideal_cluster())
    times = ev.dp_entry(1, 1, 8, 0, False, 0).times
    elements = times.all_reduce * INTRA_BPS / training.grad_bytes
    assert elements == pytest.approx(2 * 7 / 8 * count_params(spec).total)


def test_dp_across_nodes_uses_one_nic_per_rank():
    """tp 8 fills a node, so each DP rank is alone on its node and its ring runs over its NIC."""
    ev = Evaluator(gpt(), TrainingSpec(global_batch=8, seq_len=1024), ideal_cluster())
    _, first, _, _ = ev.held.params(8, 1)
    got = ev.dp_entry(8, 1, 4, 0, False, 0).times.all_reduce
    assert got == pytest.approx(2 * 3 / 4 * first * 4 / INTER_BPS)


def test_dp_reduction_hidden_behind_backward_except_a_bucket():
    """max(bucket, t - 0.9 t_bwd): 10 s of AllReduce behind a 5 s backward leaves 5.5 s."""
    times = DpTimes(10.0, 1.0, 0, 0, 0, 0, 0)
    exposed = dp_exposure(0, times, 4, t_fwd=2.0, t_bwd=5.0, overlap=True, overlap_fraction=0.9)
    assert exposed.after_pipeline_s == pytest.approx(5.5)
    short = dp_exposure(0, times._replace(all_reduce=3.0), 4, 2.0, 5.0, True, 0.9)
    assert short.after_pipeline_s == pytest.approx(1.0)  # the last bucket is never hidden


def test_dp_without_overlap_is_fully_exposed():
    """No overlap: the whole AllReduce follows the pipeline flush."""
    times = DpTimes(10.0, 1.0, 0, 0, 0, 0, 0)
    assert dp_exposure(0, times, 4, 2.0, 5.0, overlap=False, overlap_fraction=0.9).after_pipeline_s == 10.0


def test_zero3_traffic_per_micro_batch():
    """ZeRO-3 gathers weights for fwd and bwd and reduce-scatters grads every micro-batch: 3 Psi
    per micro-batch (Rajbhandari et al. 2020); exposed = what fwd / bwd cannot hide + one block."""
    times = DpTimes(0, 0, reduce_scatter=2.0, reduce_scatter_bucket=0, all_gather=1.0,
                    all_gather_bucket=0, all_gather_block=0.1)
    got = dp_exposure(3, times, 5, t_fwd=0.5, t_bwd=2.0, overlap=True, overlap_fraction=1.0)
    assert got.total_s == pytest.approx(5 * (2 * 1.0 + 2.0))
    assert got.per_microbatch_s == pytest.approx((1.0 - 0.5) + (1.0 + 2.0 - 2.0) + 0.1)


def test_interference_charges_a_share_of_hidden_traffic():
    """10 s AllReduce, 5.5 s exposed: the 4.5 hidden seconds cost 10 % more."""
    times = DpTimes(10.0, 1.0, 0, 0, 0, 0, 0)
    got = dp_exposure(0, times, 4, 2.0, 5.0, True, 0.9, interference=0.1)
    assert got.after_pipeline_s == pytest.approx(5.5 + 0.45)


def test_optimizer_bytes_megatron_adam():
    """fp16 Adam with fp32 master/grads: 3 grad reads (12) + master/m/v read+write (24) + weight write (2)."""
    assert optimizer_bytes_per_param(grad_bytes=4, state_bytes=12, dtype_bytes=2, master_weights=True) == 38


def test_step_terms_sum_to_the_step_time():
    """compute + recompute + TP + PP + bubble + DP + embedding sync + optimizer = step."""
    spec = gpt(layers=8)
    training = TrainingSpec(global_batch=64, seq_len=1024)
    est = estimate_plan(spec, training, Plan(dp=2, tp=2, pp=4, vpp=2, schedule="interleaved", micro_batch=2,
                                             recompute="full", zero=1), ideal_cluster(), world_size=16)
    assert sum(est.step.terms().values()) == pytest.approx(est.step.step_time_s)


def test_hardware_and_model_flops_are_the_papers_formulas():
    """Full recompute: hardware FLOPs 96 B s l h^2 (1 + s/6h + V/16lh), model FLOPs
    72 B s l h^2 (1 + s/6h + V/12lh) (Narayanan et al. 2021, sec. 5.1)."""
    B, s, l, h, V = 32, 1024, 4, 1024, 51200
    est = estimate_plan(gpt(layers=l, hidden=h, vocab=V), TrainingSpec(global_batch=B, seq_len=s),
                        Plan(dp=8, recompute="full"), ideal_cluster())
    assert est.hardware_flops == pytest.approx(96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)))
    assert est.model_flops == pytest.approx(72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)))


def test_mfu_is_model_flops_over_peak_time():
    """MFU = model FLOPs / (step time x GPUs x peak) (PaLM, Chowdhery et al. 2022, app. B)."""
    est = estimate_plan(gpt(), TrainingSpec(global_batch=16, seq_len=1024), Plan(dp=8), ideal_cluster())
    assert est.mfu == pytest.approx(est.model_flops / (est.step.step_time_s * 8 * 100e12))


def test_invalid_plan_is_a_one_line_error():
    """estimate_plan validates first: tp 3 does not divide 16 heads."""
    with pytest.raises(SpecError, match=r"tp \(3\) must divide heads \(16\)"):
        estimate_plan(gpt(), TrainingSpec(global_batch=6), Plan(dp=2, tp=3), ideal_cluster())


def test_pipeline_send_is_the_lists_activation():
    """The communication list sends b*s*h between stages over one NIC when tp x dp fills a node;
    with Megatron's scatter/gather (default, tp 4, no SP) each TP rank sends b*s*h/4 and the
    receiver all-gathers b*s*h over NVLink, (t-1)/t of it per rank (Narayanan et al. 2021 sec.
    4.1); with SP the tensor is already b*s*h/t and nothing is gathered."""
    b, s, h, t = 1, 1024, 1024, 4
    ev = Evaluator(gpt(hidden=h), TrainingSpec(global_batch=8, seq_len=s), ideal_cluster())
    tensor = b * s * h * 2  # bytes, bf16
    assert ev.shapes(t, 2, 2)[Axis.PP].crosses_nodes
    assert ev.p2p_s(t, False, b, 2, 2, scatter_gather=False) == pytest.approx(tensor / INTER_BPS)
    assert ev.p2p_s(t, False, b, 2, 2) == pytest.approx(tensor / t / INTER_BPS + (t - 1) / t * tensor / INTRA_BPS)
    assert ev.p2p_s(t, True, b, 2, 2) == pytest.approx(tensor / t / INTER_BPS)
