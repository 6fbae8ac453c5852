"""NeMo AutoModel's engine profile (presets/frameworks/automodel.toml), each value against the
AutoModel / torch source it cites."""

from __future__ import annotations

from modelplan.plan.engine import grad_copy_bytes
from modelplan.specs.load import load_engine
from modelplan.specs.training import TrainingSpec


def test_automodel_runs_transformer_engine_kernels():
    """BackendConfig (components/moe/utils.py, 89e3a9fdd): attn "te", linear "te", rms_norm "te"
    when Transformer Engine is installed: TE's fused attention first and fused element-wise ops."""
    profile = load_engine("automodel")
    assert profile.attention_kernels[0] == "cudnn"
    assert profile.elementwise == "fused"


def test_automodel_reduces_gradients_in_bf16_without_a_predivide():
    """FSDP2Config's MixedPrecisionPolicy(reduce_dtype bf16): the copy into the reduce-scatter input
    moves 2 + 2 bytes per element and NCCL's AVG divides (torch _fsdp_collectives.py
    _get_gradient_divide_factors), where torchtitan's fp32 reduce writes 4 bytes (2 + 4)."""
    am, tt = load_engine("automodel"), load_engine("torchtitan")
    run = TrainingSpec(global_batch=8, seq_len=4096, framework="automodel")
    assert (am.reduce_in_fp32, grad_copy_bytes(run, am)) == (False, 2 + 2)
    assert (tt.reduce_in_fp32, grad_copy_bytes(run.model_copy(update={"framework": "torchtitan"}), tt)) == (True, 2 + 4)


def test_automodel_keeps_torch_pipelining_buffers_and_outputs():
    """AutoModel drives torch.distributed.pipelining like torchtitan and calls schedule.step without
    return_outputs=False (recipes/llm/train_ft.py): receive buffers and the last stage's outputs
    are held; TE attention takes grouped K, V unrepeated."""
    profile = load_engine("automodel")
    assert profile.pp_microbatch_buffers and profile.pp_keeps_outputs
    assert not profile.sdpa_repeats_kv
