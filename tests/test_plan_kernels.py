"""Kernels of a block (kernels.py) and their roofline times (compute.py)."""

from __future__ import annotations

import pytest

from modelplan.count.flops import layer_forward_flops
from modelplan.plan.compute import Roofline
from modelplan.plan.kernels import Gemm, layer_kernels
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.load import load_model

A100 = Accelerator(name="A100", peak_tflops={"bf16": 312.0}, memory_gb=80, memory_bw_tbps=2.039,
                   matmul_efficiency=0.869)
COST = CostModel()
ROOF = Roofline.of(A100, "bf16", COST)


@pytest.mark.parametrize("preset", ["gpt2", "llama-3-8b", "mistral-7b"])
def test_gemm_flops_equal_the_counted_forward_flops(preset):
    """Sum of the block's GEMM FLOPs on one rank (tp = 1) = count's layer_forward_flops."""
    spec = load_model(preset)
    s = 1024
    counted = sum(layer_forward_flops(spec, 0, tokens=2 * s, seq_len=s).values())
    assert sum(g.flops for g in layer_kernels(spec, 1, 2, s, 2).gemms) == counted


def test_tensor_parallel_splits_the_gemm_flops():
    """With 8 KV heads and tp 8, every GEMM is split evenly: per-rank FLOPs x 8 = tp 1 FLOPs."""
    spec = load_model("llama-3-8b")
    one = sum(g.flops for g in layer_kernels(spec, 1, 1, 2048, 2).gemms)
    assert 8 * sum(g.flops for g in layer_kernels(spec, 8, 1, 2048, 2).gemms) == one


def test_backward_gemms_double_the_flops():
    """dgrad and wgrad each repeat the forward's multiply-adds: backward = 2 x forward."""
    g = Gemm("x", 128, 256, 512)
    assert sum(x.flops for x in g.backward()) == 2 * g.flops


def test_large_gemm_saturates_at_matmul_efficiency():
    """16384^3: the roofline is compute-bound, efficiency -> MAMF/peak x sustained fraction."""
    g = Gemm("big", 16384, 16384, 16384)
    assert ROOF.gemm_efficiency(g, 2) == pytest.approx(0.869 * COST.sustained_fraction, rel=1e-3)


def test_skinny_gemm_is_memory_bound():
    """Q K^T with head_dim 64: intensity 2 s s 64 / (2 (2 s 64 + s s)) ~ 60 FLOP/B is below the
    ridge, so time = bytes / (HBM x hbm_efficiency x sustained) + overhead."""
    s, dh, batch = 2048, 64, 32
    g = Gemm("scores", s, s, dh, batch)
    bytes_moved = 2 * (s * dh + dh * s + s * s) * batch
    hbm = 2.039e12 * COST.hbm_efficiency * COST.sustained_fraction
    assert ROOF.gemm_time_s(g, 2) == pytest.approx(COST.kernel_overhead_us * 1e-6 + bytes_moved / hbm)
    assert ROOF.gemm_efficiency(g, 2) < 0.5 * 0.869 * COST.sustained_fraction


def test_tiny_gemm_pays_the_kernel_overhead():
    """64^3 is 0.5 MFLOP: its time is essentially the fixed per-kernel overhead."""
    g = Gemm("tiny", 64, 64, 64)
    assert ROOF.gemm_time_s(g, 2) == pytest.approx(COST.kernel_overhead_us * 1e-6, rel=0.01)


def test_memory_bound_work_weighs_more_in_small_models():
    """LayerNorm, softmax over a s^2 b, GeLU, dropout scale with s h and a s^2 while GEMMs scale with
    s h^2: the elementwise share of a GPT-2 block (h 768) exceeds GPT-3's (h 12288)."""
    def share(preset: str) -> float:
        k = layer_kernels(load_model(preset), 1, 1, 2048, 2)
        ew = sum(ROOF.elementwise_fwd_s(e) for e in k.elementwise)
        return ew / (ew + sum(ROOF.gemm_time_s(g, 2) for g in k.gemms))

    assert share("gpt2") > 2 * share("gpt3-175b")


def test_flash_attention_runs_head_dim_80_on_its_96_kernel():
    """flash-attn 2's HEADDIM_SWITCH (csrc/flash_attn/src/static_switch.h) runs head dim 80 on the
    kernel compiled for 96: both matmuls of its tiles run 96 wide. Worked by hand: one non-causal
    problem of 1024 x 1024, forward 4 s_q s_k 96 = 402,653,184 FLOPs at the A100 FA2 forward rate
    0.6 x 312 TFLOP/s x sustained 0.8 = 149.76 TFLOP/s -> 2.6887 us + 4 us overhead; backward
    2.5 x those FLOPs at 0.5 x 312 x 0.8 = 124.8 TFLOP/s -> 8.0660 us + 4 us. cuDNN (no template
    list) and head dim 128 (a template) run unpadded."""
    from modelplan.count.attention import FusedAttention

    fa2 = A100.model_copy(update={"attention_efficiency": {"fa2": (0.6, 0.5), "cudnn": (0.6, 0.5)}})
    op = FusedAttention("core", 1, 1024, 1024, 80, causal=False)
    roof = Roofline.of(fa2, "bf16", COST, ("fa2",))
    assert roof.fused_fwd_s(op) == pytest.approx(4e-6 + 402_653_184 / 149.76e12, rel=1e-9)
    assert roof.fused_bwd_s(op) == pytest.approx(4e-6 + 2.5 * 402_653_184 / 124.8e12, rel=1e-9)
    cudnn = Roofline.of(fa2, "bf16", COST, ("cudnn",))
    assert cudnn.fused_fwd_s(op) == pytest.approx(4e-6 + 335_544_320 / 149.76e12, rel=1e-9)
    wide = FusedAttention("core", 1, 1024, 1024, 128, causal=False)
    assert roof.fused_fwd_s(wide) == pytest.approx(4e-6 + 4 * 1024 * 1024 * 128 / 149.76e12, rel=1e-9)
