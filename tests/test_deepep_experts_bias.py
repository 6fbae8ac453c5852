"""NeMo AutoModel's eager expert biases under DeepEP (plan/deepep_experts_bias.py), against bytes and
kernels worked by hand from AutoModel 89e3a9fdd `GroupedExpertsDeepEP._apply_bias` (fc1: t + b per
expert and a cat; fc2: t + b * p with DeepEP's fp32 probs, a cat and the cast back) and
GPT-OSS-20B's shapes (HF config.json: hidden 2880, intermediate 2880, 32 experts, top-4)."""

from __future__ import annotations

import pytest

from modelplan.plan.compute import KernelTimes, Roofline
from modelplan.plan.deepep_experts_bias import (adds_biases_eagerly, fc1_bias_kernel, fc2_bias_kernel,
                                                with_deepep_experts_bias)
from modelplan.specs.load import load_model

GPT_OSS_20B = load_model("gpt-oss-20b")
# ep 8: 4 local experts; micro-batch 2 x 4096 tokens x top-4 over 32 experts, balanced: 1,024 rows
# per expert from each of the 8 source ranks (capacity), 8,192 rows per local expert
EP, CAPACITY = 8, 1024


def test_fc1_bias_bytes_and_kernels():
    """4 x 8,192 x 5,760 = 188,743,680 fc1 values: forward 4 d = 8 B each (add + cat), backward
    3 d = 6 B (b's row sum, the split's joined gradient); 4 + 1 kernels each way."""
    op = fc1_bias_kernel(4, 8192, 5760, 2)
    assert op.elements == 188_743_680
    assert op.fwd_bytes == 1_509_949_440
    assert op.bwd_bytes == 1_132_462_080
    assert op.kernels == (5, 5)


def test_fc2_bias_bytes_in_fp32_probs():
    """4 x 8,192 x 2,880 = 94,371,840 fc2 values: forward 6 x 4 + 2 x 2 = 28 B (b * p, the sum, the
    cat in fp32, the cast back), backward 5 x 4 + 4 x 2 = 28 B without p's gradient (constant
    FakeBalancedGate weights), 40 B with it; kernels 2 x 4 + 2 forward, 3 x 4 + 2 (+ 2 x 4) backward."""
    fixed = fc2_bias_kernel(4, 8192, 2880, 2, probs_grad=False)
    learned = fc2_bias_kernel(4, 8192, 2880, 2, probs_grad=True)
    assert fixed.elements == 94_371_840
    assert fixed.fwd_bytes == fixed.bwd_bytes == 2_642_411_520
    assert learned.bwd_bytes == 3_774_873_600
    assert fixed.kernels == (10, 14) and learned.kernels == (10, 22)


@pytest.mark.parametrize("framework, dispatcher, expected", [
    ("automodel", "deepep", True),
    ("automodel", None, False),  # GroupedExperts: biases inside the compiled per-expert activation
    ("megatron", "deepep", False),  # Megatron's own rule (plan/expert_bias.py)
    ("torchtitan", "deepep", False),
])
def test_only_automodel_deepep_adds_them(framework, dispatcher, expected):
    assert adds_biases_eagerly(GPT_OSS_20B, framework, dispatcher) is expected


def test_unbiased_experts_add_nothing():
    """Qwen3-235B-A22B's experts have no bias (config.json: no bias fields)."""
    assert not adds_biases_eagerly(load_model("qwen3-235b-a22b"), "automodel", "deepep")


def test_block_seconds_grow_by_bytes_over_hbm_plus_kernels():
    """Round rates (1e12 B/s, 4 us a kernel): forward + (1,509,949,440 + 2,642,411,520) / 1e12 s +
    15 kernels x 4 us; backward + (1,132,462,080 + 2,642,411,520) / 1e12 s + 19 x 4 us."""
    roof = Roofline(matmul_flops_per_s=1e15, hbm_bytes_per_s=1e12, overhead_s=4e-6, peak_flops_per_s=1e15)
    zero = KernelTimes(*([0.0] * 10))
    out = with_deepep_experts_bias(zero, roof, GPT_OSS_20B, "automodel", "deepep", True, EP, CAPACITY, 1, 2)
    assert out.fwd_elementwise_s == pytest.approx(4.15236096e-3 + 15 * 4e-6)
    assert out.bwd_elementwise_s == pytest.approx(3.7748736e-3 + 19 * 4e-6)
    assert with_deepep_experts_bias(zero, roof, GPT_OSS_20B, "automodel", None, True, EP, CAPACITY, 1, 2) == zero
