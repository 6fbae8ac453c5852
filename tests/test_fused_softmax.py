"""Megatron's fused scale-mask-softmax eligibility and its PyTorch fallback (plan/fused_softmax.py).

Expected values are worked by hand from the engines' source: megatron/fused_kernels/
scaled_masked_softmax.h `get_batch_per_block` and megatron/model/fused_softmax.py
`is_kernel_available` (microsoft/Megatron-DeepSpeed; the same rule in megatron-core 0.16
core/fusions/fused_softmax.py), `forward_torch_softmax` for the fallback's passes.
"""

from __future__ import annotations

import pytest

from modelplan.plan.compute import Roofline, kernel_times
from modelplan.plan.engine import engine_settings
from modelplan.plan.fused_softmax import batch_per_block, kernel_available, torch_softmax_kernel
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.load import load_engine, model_from_dict
from modelplan.specs.training import TrainingSpec

A100 = Accelerator(name="A100", peak_tflops={"fp16": 312.0}, memory_gb=80, memory_bw_tbps=2.039,
                   matmul_efficiency=0.869)
ROOF = Roofline.of(A100, "fp16", CostModel())
# Narayanan et al. 2021's 18.4B weak-scaling GPT: 48 heads, so tp 16 leaves 3 heads per rank
GPT_18B = model_from_dict({"name": "gpt-18.4b", "layers": 40, "hidden": 6144, "heads": 48, "ffn_hidden": 24576,
                           "vocab": 51200, "max_positions": 2048, "position": "learned", "norm": "layernorm",
                           "gated_mlp": False, "activation": "gelu", "tied_embeddings": True, "dropout": True})


@pytest.mark.parametrize(("sk", "rows"), [(2048, 4), (4096, 4), (256, 4), (128, 8), (64, 8), (32, 8), (20, 8)])
def test_batch_per_block_by_key_length(sk, rows):
    """128 threads: 4 warps of 32 threads x 1 row above 128 keys, x 2 rows at <= 128 keys."""
    assert batch_per_block(sk) == rows


@pytest.mark.parametrize(("b", "heads", "sk", "available"), [
    (2, 4, 2048, True),    # vTrain 3.6B tp 8 mb 2: b np = 8, a multiple of 4
    (2, 3, 2048, False),   # vTrain 18.4B tp 16 mb 2: b np = 6 is not a multiple of 4
    (1, 8, 4096, True),    # sk at the kernel's 4096 limit
    (1, 8, 8192, False),   # sk > 4096
    (1, 8, 16, False),     # sk must exceed 16
    (1, 6, 128, False),    # b np = 6: not a multiple of 4 (nor of batch_per_block 8)
    (1, 12, 128, False),   # b np = 12: a multiple of 4 but not of batch_per_block 8
    (1, 16, 128, True),
])
def test_causal_kernel_availability(b, heads, sk, available):
    """is_kernel_available for a 16-bit causal input (sq = sk)."""
    assert kernel_available(b, heads, sk, sk, float16=True, causal=True) is available


def test_fp32_input_never_runs_the_fused_kernel():
    """The kernel needs a 16-bit input (input_in_float16)."""
    assert not kernel_available(2, 4, 2048, 2048, float16=False, causal=True)


def test_padding_mask_tests_sq_not_the_batches():
    """Non-causal: sq % batch_per_block (8 at sk = 128), b np only % 4."""
    assert kernel_available(1, 4, 128, 128, float16=True, causal=False)
    assert not kernel_available(1, 4, 100, 128, float16=True, causal=False)


def test_fallback_bytes_fp16_with_layer_scaling():
    """fp16, scaled: fwd cast 2+4, scale 8, mask 8, softmax 8, cast 4+2 = 36 B; bwd cast 2+4,
    cast 4+2, softmax bwd 12, mask 8, scale 8 = 40 B; 5 kernels each way."""
    k = torch_softmax_kernel("attention/softmax", 1000, 2, scaled=True)
    assert (k.fwd_bytes, k.bwd_bytes, k.kernels) == (36_000, 40_000, (5, 5))


def test_fallback_bytes_fp32_unscaled():
    """fp32 input, no scale: no casts; fwd mask 8 + softmax 8, bwd softmax 12 + mask 8; 2 kernels."""
    k = torch_softmax_kernel("attention/softmax", 1000, 4, scaled=False)
    assert (k.fwd_bytes, k.bwd_bytes, k.kernels) == (16_000, 20_000, (2, 2))


def _times(tp: int, b: int, softmax: str):
    """Kernel times under the deepspeed profile with its `scale_mask_softmax` set to `softmax`."""
    training = TrainingSpec(global_batch=64, seq_len=2048, precision="fp16", attention="eager", framework="deepspeed")
    profile = load_engine("deepspeed").model_copy(update={"scale_mask_softmax": softmax})
    software = engine_settings(training, profile)
    return kernel_times(GPT_18B, tp, False, b, 2048, 2, 51200 // tp, ROOF, attention="eager", software=software)


def test_deepspeed_profile_runs_the_layer_scaled_megatron_softmax():
    """presets/frameworks/deepspeed.toml: Megatron-DeepSpeed applies query-key layer scaling by default."""
    assert load_engine("deepspeed").scale_mask_softmax == "megatron_layer_scaled"
    assert load_engine("megatron").scale_mask_softmax == "megatron"


def test_ineligible_shape_adds_the_fallback_time():
    """18.4B, tp 16, mb 2 (b np = 6), Megatron-DeepSpeed: the softmax forward moves 36 B instead of
    the fused kernel's 4 B per score: + 32 B x 2 x 3 x 2048^2 at the roofline's HBM rate, + 4 kernels."""
    scores = 2 * 3 * 2048 * 2048
    added = 32 * scores / ROOF.hbm_bytes_per_s + 4 * ROOF.overhead_s
    ds, fused = _times(16, 2, "megatron_layer_scaled"), _times(16, 2, "fused")
    assert ds.fwd_elementwise_s - fused.fwd_elementwise_s == pytest.approx(added)


def test_eligible_shape_is_priced_as_the_fused_kernel():
    """18.4B, tp 16, mb 4 (b np = 12): the fused kernel runs, priced as the one fused pass."""
    assert _times(16, 4, "megatron_layer_scaled").fwd_elementwise_s == _times(16, 4, "fused").fwd_elementwise_s
