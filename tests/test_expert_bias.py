"""The routed experts' fc2 bias as Megatron-core adds it (plan/expert_bias.py), by hand from
Megatron-core transformer/moe/experts.py TEGroupedMLP: linear_fc2 built with skip_bias_add=True,
`_apply_bias` = torch.cat([t + b * p for each local expert]); per output value of d bytes forward
b * p (d) + the sum (3d) + cat (2d) = 6d in 2 kernels per expert + 1, backward the two
gradient products and sums (3d + 3d) + the split's gradients joined (2d) = 8d in 4 kernels per
expert + 1."""

from __future__ import annotations

import pytest

from modelplan.plan.compute import Roofline, kernel_times
from modelplan.plan.engine import engine_settings
from modelplan.plan.expert_bias import adds_expert_bias, bias_kernel
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

# gpt-oss-120b (HF config.json: 128 experts, top-4, hidden 2880) at ep 8, 4096 tokens per rank:
# capacity 4096 x 4 / 128 = 128 slots per expert and source rank, 8 x 128 = 1024 rows per local
# expert, 128 / 8 = 16 local experts: 16 x 1024 x 2880 = 47,185,920 output values
VALUES = 16 * 1024 * 2880


def test_gpt_oss_bias_pass_by_hand():
    """bf16: 12 B per value forward, 16 B backward; 2 x 16 + 1 and 4 x 16 + 1 kernels."""
    op = bias_kernel(16, 1024, 2880, 2)
    assert op.elements == 47_185_920 == VALUES
    assert (op.fwd_bytes_per_element, op.bwd_bytes_per_element) == (12, 16)
    assert op.kernels == (33, 65)


def test_block_pays_the_bias_at_hbm_speed():
    """The MoE block of gpt-oss-120b under Megatron minus the same model with unbiased experts:
    12 B and 16 B per value at 2 TB/s x hbm_efficiency x sustained_fraction, plus 33 and 65 overheads."""
    cost = CostModel()
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    r = Roofline.of(acc, "bf16", cost)
    sw = engine_settings(TrainingSpec(global_batch=1, seq_len=4096, framework="megatron"), load_engine("megatron"))
    biased = load_model("gpt-oss-120b")
    plain = biased.model_copy(update={"moe": biased.moe.model_copy(update={"expert_bias": False})})
    t_biased, t_plain = (kernel_times(s, 1, False, 1, 4096, 2, s.vocab, r, moe_layer=True, ep=8, capacity=128,
                                      attention="flash", software=sw) for s in (biased, plain))
    hbm = 2e12 * cost.hbm_efficiency * cost.sustained_fraction
    overhead = cost.kernel_overhead_us * 1e-6
    assert t_biased.fwd_elementwise_s - t_plain.fwd_elementwise_s == pytest.approx(12 * VALUES / hbm + 33 * overhead)
    assert t_biased.bwd_elementwise_s - t_plain.bwd_elementwise_s == pytest.approx(16 * VALUES / hbm + 65 * overhead)


@pytest.mark.parametrize("model, framework, expected", [
    ("gpt-oss-120b", "megatron", True),
    ("gpt-oss-120b", "torchtitan", False),  # another engine's experts
    ("mixtral-8x7b", "megatron", False),  # experts without biases
    ("llama-3-8b", "megatron", False),  # no experts
])
def test_only_megatrons_biased_experts(model, framework, expected):
    assert adds_expert_bias(load_model(model), framework) is expected
