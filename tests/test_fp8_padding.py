"""fp8 expert padding copies (plan/fp8_padding.py), by hand from Megatron-core core_v0.15.0
experts.py TEGroupedMLP.forward (Fp8Padding of the received hidden states and probs, Fp8Unpadding
of the output under fp8) and TransformerEngine Fp8Padding.forward (a no-op only when every
expert's rows are a multiple of 16: "if m_splits == padded_m_splits: return inp")."""

from __future__ import annotations

import pytest

from modelplan.plan.compute import KernelTimes, Roofline
from modelplan.plan.fp8_padding import padding_kernel, pads, with_fp8_padding
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator

# Qwen3-30B-A3B (128 experts, hidden 2048) at ep 8, 4096 tokens x top-8: 256 slots per source rank
E, EP, CAPACITY, H = 128, 8, 256, 2048


def test_pad_and_unpad_move_each_received_value_twice_each_way():
    """128 x 256 x 2048 = 67,108,864 values; pad (read 2 B + write 2 B) and unpad (the same) =
    8 B per value each way, 536,870,912 bytes; 3 kernels each way (hidden, probs, output)."""
    op = padding_kernel(E, CAPACITY, H, 2)
    assert op.elements == 67_108_864
    assert op.elements * op.fwd_bytes_per_element == op.elements * op.bwd_bytes_per_element == 536_870_912
    assert op.kernels == (3, 3)


@pytest.mark.parametrize("recipe, framework, flex, dropless, rows, expected", [
    ("current", "megatron", None, True, 2048, True),        # dropless: random counts, copies
    ("current", "megatron", "deepep", True, 2048, True),    # DeepEP does not pad (no router padding)
    ("current", "megatron", "hybridep", True, 2048, False),  # HybridEP pads in its dispatch
    (None, "megatron", None, True, 2048, False),            # bf16: no Fp8Padding
    ("current", "torchtitan", None, True, 2048, False),     # not Megatron-core's TEGroupedMLP
    ("current", "megatron", None, False, 8 * 256, False),   # drop-and-pad, 2048 rows: aligned, no-op
    ("current", "megatron", None, False, 8 * 101, True),    # 808 rows: 808 % 16 = 8, copies
])
def test_when_the_copies_run(recipe, framework, flex, dropless, rows, expected):
    assert pads(recipe, framework, flex, dropless, rows) is expected


def test_the_copies_run_at_hbm_speed():
    """536,870,912 B / (2 TB/s x hbm_efficiency x sustained_fraction) + 3 kernel overheads, each way."""
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    cost = CostModel()
    zero = KernelTimes(*([0.0] * 10))
    t = with_fp8_padding(zero, Roofline.of(acc, "bf16", cost), "current", "megatron", None, True, E, EP, CAPACITY,
                         H, 2)
    expected = 3 * cost.kernel_overhead_us * 1e-6 + 536_870_912 / (2e12 * cost.hbm_efficiency * cost.sustained_fraction)
    assert t.fwd_elementwise_s == pytest.approx(expected)
    assert t.bwd_elementwise_s == pytest.approx(expected)
