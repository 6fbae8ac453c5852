"""Per-expert kernel launches of the routed experts (plan/grouped_gemm.py) against counts worked by
hand from TransformerEngine's documented GroupedLinear path (MoE guide, "Grouped linear": one
cuBLAS GEMM per expert, the input split and quantized per expert): per MoE block and local expert,
2 forward GEMMs (fc1, fc2), 4 backward (their dgrad and wgrad), and under fp8 one quantisation per
GEMM input each way; the roofline already charges one of each per grouped GEMM."""

from __future__ import annotations

import pytest

from modelplan.plan.compute import Roofline, kernel_times
from modelplan.plan.engine import MEGATRON_2021
from modelplan.plan.grouped_gemm import extra_launches
from modelplan.plan.kernel_types import Gemm
from modelplan.plan.kernels import moe_mlp_kernels
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.transformer import MoESpec, TransformerSpec

# Qwen3-30B-A3B's MoE shape (HF config.json: hidden 2048, 128 experts, top-8, moe_intermediate 768)
SPEC = TransformerSpec(layers=2, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn_hidden=6144, vocab=1024,
                       moe=MoESpec(num_experts=128, top_k=8, expert_ffn_hidden=768))


def expert_block_gemms(ep: int) -> list[Gemm]:
    tokens = 4096
    gemms, _ = moe_mlp_kernels(SPEC, 1, ep, tokens, 2, tokens * 8 // 128)
    return gemms


@pytest.mark.parametrize("ep, fp8, expected", [
    # 128 / 8 = 16 local experts, 15 beyond the one charged, 2 grouped GEMMs:
    # bf16 fwd 2 x 15 = 30, bwd 2 x 2 x 15 = 60; fp8 adds one quantisation per GEMM: 60, 90
    (8, False, (30, 60)),
    (8, True, (60, 90)),
    # ep 128: one local expert, nothing beyond the single charge
    (128, True, (0, 0)),
])
def test_megatron_launches_one_gemm_per_local_expert(ep, fp8, expected):
    assert extra_launches(expert_block_gemms(ep), "megatron", fp8) == expected


def test_a_single_grouped_kernel_engine_pays_once():
    """torchtitan's torch._grouped_mm is one kernel per grouped GEMM: nothing added."""
    assert extra_launches(expert_block_gemms(8), "torchtitan", True) == (0, 0)


def test_dense_and_router_gemms_are_not_expert_launches():
    """The router GEMM and a dense MLP are single GEMMs whatever their batch."""
    gemms = [Gemm("mlp/router", 4096, 128, 2048), Gemm("mlp/in", 4096, 2048, 2048),
             Gemm("attention/scores", 64, 64, 64, 32)]
    assert extra_launches(gemms, "megatron", True) == (0, 0)


def test_block_forward_gains_the_launches_at_the_per_kernel_overhead():
    """kernel_times of one MoE block (bf16, ep 8): Megatron's forward GEMM seconds exceed a
    single-kernel engine's by 30 launches x kernel_overhead_us, the backward by 60."""
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    cost = CostModel()
    roof = Roofline.of(acc, "bf16", cost)
    args = (SPEC, 1, False, 1, 4096, 2, 1024, roof)
    kw = dict(moe_layer=True, ep=8, capacity=4096 * 8 // 128, attention="flash")
    meg = kernel_times(*args, software=MEGATRON_2021, **kw)
    single = kernel_times(*args, software=MEGATRON_2021._replace(framework="torchtitan"), **kw)
    overhead = cost.kernel_overhead_us * 1e-6
    assert meg.fwd_gemm_s - single.fwd_gemm_s == pytest.approx(30 * overhead)
    assert meg.bwd_gemm_s - single.bwd_gemm_s == pytest.approx(60 * overhead)


def test_automodel_gmm_launches_one_cublas_gemm_per_local_expert():
    """NeMo AutoModel's experts run grouped_gemm.ops.gmm, whose v1.1.4 csrc/grouped_gemm.cu loops
    one cublasGemmEx per expert on sm_90 (forward, dgrad, wgrad): 16 local experts -> the same
    30 / 60 extra bf16 launches as Megatron's per-expert path."""
    assert extra_launches(expert_block_gemms(8), "automodel", False) == (30, 60)
