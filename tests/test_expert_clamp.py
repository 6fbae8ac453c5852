"""The eager clamp before Megatron-core's fused clamped SwiGLU of the routed experts
(plan/expert_clamp.py), by hand from Megatron-core fusions/fused_bias_geglu.py
`weighted_bias_quick_geglu_impl`: two clamps and a cat over the fc1 output (4d per fc1 value
forward, 3 kernels), their gradients and the chunk's joined gradient (3d + 2d backward, 3 kernels);
two fc1 values per activation output value: 8d and 10d per output value."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.plan.compute import Roofline, kernel_times
from modelplan.plan.engine import engine_settings
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.expert_clamp import clamps_eagerly
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

# gpt-oss-120b at ep 8, 4096 tokens per rank: 16 local experts x 1024 rows x 2880 activation outputs
VALUES = 16 * 1024 * 2880


def specs():
    clamped = load_model("gpt-oss-120b")
    return clamped, clamped.model_copy(update={"activation": "silu"})


def test_block_pays_the_clamp_at_hbm_speed():
    """bf16: 16 B forward and 20 B backward per activation output value, 3 more kernels each way."""
    cost = CostModel()
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    r = Roofline.of(acc, "bf16", cost)
    sw = engine_settings(TrainingSpec(global_batch=1, seq_len=4096, framework="megatron"), load_engine("megatron"))
    t_clamp, t_plain = (kernel_times(s, 1, False, 1, 4096, 2, s.vocab, r, moe_layer=True, ep=8, capacity=128,
                                     attention="flash", software=sw) for s in specs())
    hbm = 2e12 * cost.hbm_efficiency * cost.sustained_fraction
    overhead = cost.kernel_overhead_us * 1e-6
    assert t_clamp.fwd_elementwise_s - t_plain.fwd_elementwise_s == pytest.approx(16 * VALUES / hbm + 3 * overhead)
    assert t_clamp.bwd_elementwise_s - t_plain.bwd_elementwise_s == pytest.approx(20 * VALUES / hbm + 3 * overhead)


def test_moe_act_recompute_reruns_the_clamp():
    """Selective recompute of moe_act re-runs the clamp with the activation: the recomputed forward
    grows by the clamp's forward, 16 B per value on an H100 (dgx-h100) plus 3 overheads."""
    training = TrainingSpec(global_batch=8, seq_len=4096, framework="megatron", recompute="selective",
                            recompute_modules=("moe_act",))
    cluster = load_cluster("dgx-h100")
    terms = [Evaluator(s, training, cluster).block_terms(1, False, 1, "selective", 1, 8) for s in specs()]
    ev = Evaluator(specs()[0], training, cluster)
    expected = 16 * VALUES / ev.roofline.hbm_bytes_per_s + 3 * ev.roofline.overhead_s
    assert terms[0].recompute_s - terms[1].recompute_s == pytest.approx(expected)


@pytest.mark.parametrize("model, framework, expected", [
    ("gpt-oss-120b", "megatron", True),
    ("gpt-oss-120b", "torchtitan", False),
    ("mixtral-8x7b", "megatron", False),  # plain SwiGLU experts
])
def test_only_megatrons_clamped_experts(model, framework, expected):
    assert clamps_eagerly(load_model(model), framework) is expected
