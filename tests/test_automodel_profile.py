"""NeMo AutoModel's engine profile (presets/frameworks/automodel.toml), each value against the
AutoModel / torch source it cites."""

from __future__ import annotations

from modelplan.specs.load import load_engine


def test_automodel_runs_transformer_engine_kernels():
    """BackendConfig (components/moe/utils.py, 89e3a9fdd): attn "te", linear "te", rms_norm "te"
    when Transformer Engine is installed: TE's fused attention first and fused element-wise ops."""
    profile = load_engine("automodel")
    assert profile.attention_kernels[0] == "cudnn"
    assert profile.elementwise == "fused"


def test_automodel_reduces_gradients_in_bf16_without_a_predivide():
    """FSDP2Config's MixedPrecisionPolicy(reduce_dtype bf16): the copy into the reduce-scatter input
    moves 2 + 2 bytes per element and NCCL's AVG divides (torch _fsdp_collectives.py
    _get_gradient_divide_factors), where torchtitan's fp32 reduce moves 2 + 4 + 4 + 4 = 14."""
    am, tt = load_engine("automodel"), load_engine("torchtitan")
    assert (am.reduce_in_fp32, am.grad_copy_bytes) == (False, 2 + 2)
    assert (tt.reduce_in_fp32, tt.grad_copy_bytes) == (True, 14)


def test_automodel_keeps_torch_pipelining_buffers_and_outputs():
    """AutoModel drives torch.distributed.pipelining like torchtitan and calls schedule.step without
    return_outputs=False (recipes/llm/train_ft.py): receive buffers and the last stage's outputs
    are held; TE attention takes grouped K, V unrepeated."""
    profile = load_engine("automodel")
    assert profile.pp_microbatch_buffers and profile.pp_keeps_outputs
    assert not profile.sdpa_repeats_kv
