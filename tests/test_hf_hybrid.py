"""The Mamba-2 and gated DeltaNet mixers (modelplan/count/mixers.py, plan/linear_mixers.py) and
the hybrid HF readers (modelplan/specs/hf_hybrid.py): counts equal transformers' own modules on
the meta device, scan FLOPs and state caches equal hand-worked formulas, `count` reports the
state per sequence (tests/test_hf_cli.py runs `count` / `plan` and `verify`'s refusals)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _hf_hybrid_cases import HYBRID_FIXTURES, HYBRID_VARIANTS
from _hf_n17_checks import assert_dense_blocks_shard
from _hf_reference import config, hf_components
from modelplan.cli import app
from modelplan.count.blocks import Block
from modelplan.count.flops import layer_forward_flops
from modelplan.count.memory import activation_bytes_per_layer, kv_cache_bytes, kv_cache_bytes_per_token
from modelplan.count.mixers import deltanet_scan_flops, mamba2_params, mamba2_scan_flops
from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.plan.kernels import layer_kernels
from modelplan.specs.hf import from_hf_config
from modelplan.specs.transformer import TransformerSpec

HF = Path(__file__).parent / "data" / "hf"
runner = CliRunner()


def components(data: dict) -> dict[str, int]:
    b = count_params(from_hf_config(data, "config.json")).breakdown
    return {key: b.get(key, 0) for key in ("embedding", "layers", "final_norm", "head")}


def tiny(mlp: bool = False, **fields) -> TransformerSpec:
    """A one-block model around a linear mixer (sizes small enough to work by hand)."""
    return TransformerSpec(layers=1, hidden=5, heads=1, vocab=7, mlp=mlp, position="none", **fields)


MAMBA2 = dict(layer_types=["mamba2"], mamba2=dict(heads=2, inner=8, state_size=3, groups=1, conv_kernel=4,
                                                   chunk_size=2))
DELTA = dict(layer_types=["gated_deltanet"], deltanet=dict(key_heads=1, value_heads=2, key_head_dim=2,
                                                          value_head_dim=3, chunk_size=2))


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("name", HYBRID_FIXTURES)
def test_published_hybrids_equal_transformers_by_component(name):
    """Published configs: embedding / layers / final_norm / head equal transformers 5.24's module."""
    data = config(name)
    assert components(data) == hf_components(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", HYBRID_VARIANTS, ids=[f"{d['model_type']}-{i}" for i, d in enumerate(HYBRID_VARIANTS)])
def test_hybrid_variants_equal_transformers(data):
    """Variants switching each option the readers read (groups, biases, tying, MoE placement,
    shared MLP, pattern characters) count exactly, per component."""
    assert components(data) == hf_components(data)


@pytest.mark.parametrize(("name", "billions", "digits"), [
    ("bamba-9b", 9.78, 2),  # ibm-ai-platform/Bamba-9B Hub safetensors: 9.78B
    ("granite-4.0-h-tiny", 7, 0),  # IBM Granite 4.0 model card: H-Tiny 7B total (1B active)
    ("nvidia-nemotron-nano-9b-v2", 9, 0),  # NVIDIA Nemotron Nano 2 report (arXiv 2508.14444): 9B
    ("qwen3-next-80b-a3b-instruct", 80, 0),  # Qwen3-Next model card: 80B total (MTP layer not built by HF)
    ("mamba-codestral-7b-v0.1", 7.3, 1),  # Mistral AI Mamba-Codestral model card: 7,285,403,648
])
def test_published_totals_rounded(name, billions, digits):
    """Each fixture's total rounds to its publisher's figure."""
    assert round(count_params(from_hf_config(config(name))).total / 1e9, digits) == billions


def test_mamba2_parameters_by_hand():
    """BambaMixer shapes for h 5, H 2, d_inner 8, N 3, G 1, k 4: in_proj 5 x (8 + 14 + 2) = 120,
    conv 14 x 4 + 14 = 70, dt_bias / A_log / D 6, gated-norm weight 8, out_proj 40."""
    assert mamba2_params(tiny(**MAMBA2)) == {"mamba2/in_proj": 120, "mamba2/conv": 70, "mamba2/ssm": 6,
                                             "mamba2/norm": 8, "mamba2/out_proj": 40}


def test_ssd_scan_flops_by_hand():
    """SSD (Dao & Gu 2024 sec. 6), Q 2, N 3, P 4, H 2, G 1: per token 2QNG 12 + 2QPH 32 + 4NPH 96
    = 140; 8 tokens 1,120."""
    assert mamba2_scan_flops(tiny(**MAMBA2), tokens=8, seq_len=4) == 1120


def test_delta_rule_scan_flops_by_hand():
    """Chunkwise delta rule, C 2, d_k 2, d_v 3, 2 value heads: per token and head
    2C(3 d_k + 2 d_v) 48 + 6 d_k d_v 36 = 84; 2 heads x 4 tokens = 672."""
    assert deltanet_scan_flops(tiny(**DELTA), tokens=4, seq_len=4) == 672


def test_short_sequence_is_one_chunk():
    """A sequence shorter than the chunk: Q = seq_len (1 token: 2QNG 6 + 2QPH 16 + 4NPH 96 = 118)."""
    assert mamba2_scan_flops(tiny(**MAMBA2), tokens=1, seq_len=1) == 118


def test_bamba_state_cache_by_hand():
    """Bamba-9B, batch 1, 1000 tokens, bf16: 29 Mamba-2 blocks hold conv (8192 + 2 x 128) x 4 and
    SSM 128 x 64 x 128 elements whatever the length; 3 attention blocks 2 x 8 x 128 per token."""
    spec = from_hf_config(config("bamba-9b"))
    mamba = (8192 + 256) * 4 + 128 * 64 * 128
    assert kv_cache_bytes(spec, 1, 1000, 2) == 2 * (29 * mamba + 3 * 2 * 8 * 128 * 1000)
    assert kv_cache_bytes_per_token(spec, 2) == 2 * 3 * 2 * 8 * 128


def test_qwen3_next_state_cache_by_hand():
    """Qwen3-Next-80B: 36 DeltaNet blocks, conv (2 x 2048 + 4096) x 4 + recurrent 32 x 128 x 128;
    12 gated-attention blocks 2 x 2 x 256 per token."""
    spec = from_hf_config(config("qwen3-next-80b-a3b-instruct"))
    delta = (2 * 2048 + 4096) * 4 + 32 * 128 * 128
    assert kv_cache_bytes(spec, 2, 512, 2) == 2 * 2 * (36 * delta + 12 * 2 * 2 * 256 * 512)


@pytest.mark.parametrize("mixer", ["mamba2", "gated_deltanet"])
def test_linear_mixer_activations_are_linear_in_seq_len(mixer):
    """No s^2 term: a linear-mixer block's kept bytes double with the sequence even with eager
    attention (the chunk stays fixed once seq_len exceeds it)."""
    spec = tiny(**(MAMBA2 if mixer == "mamba2" else DELTA))
    block = Block(mixer, False, False, False, False)
    one = activation_bytes_per_layer(spec, 1, 64, 2, block=block)
    assert activation_bytes_per_layer(spec, 1, 128, 2, block=block) == 2 * one


@pytest.mark.parametrize(("name", "index"), [("qwen3-next-80b-a3b-instruct", 0), ("nvidia-nemotron-nano-9b-v2", 0),
                                             ("bamba-9b", 0)])
def test_planner_gemms_carry_the_counted_flops(name, index):
    """The planner's GEMMs of a linear-mixer block (projections and the chunked scan's batched
    matmuls) carry count's forward FLOPs but the conv, which it prices as a memory-bound pass."""
    spec = from_hf_config(config(name))
    from modelplan.count.blocks import block_of
    block = block_of(spec, index)
    s = 1024
    counted = layer_forward_flops(spec, index, tokens=2 * s, seq_len=s)
    expected = sum(v for k, v in counted.items() if not k.endswith("/conv"))
    kernels = layer_kernels(spec, 1, 2, s, 2, block=block, moe_layer=block.moe)
    if block.moe:  # routed experts are priced by moe_mlp_kernels at their dispatched shapes
        expected -= sum(v for k, v in counted.items() if k.startswith("mlp/"))
        gemm = sum(g.flops for g in kernels.gemms if not g.name.startswith("mlp/"))
    else:
        gemm = sum(g.flops for g in kernels.gemms)
    assert gemm == expected


def test_planner_gemms_carry_the_counted_kda_flops():
    """Kimi Delta Attention (a Kimi Linear variant's block 0, dense MLP): GEMM FLOPs = count's
    forward FLOPs but the conv."""
    spec = from_hf_config(HYBRID_VARIANTS[13])
    from modelplan.count.blocks import block_of
    block = block_of(spec, 0)
    assert block.mixer == "gated_deltanet" and not block.moe
    counted = layer_forward_flops(spec, 0, tokens=2 * 256, seq_len=256)
    gemm = sum(g.flops for g in layer_kernels(spec, 1, 2, 256, 2, block=block).gemms)
    assert gemm == sum(v for k, v in counted.items() if not k.endswith("/conv"))


@pytest.mark.parametrize("index", [0, 4, 9, 11, 13])
def test_tp_shards_hold_the_counted_mixer_parameters(index):
    """plan/shard.py's per-rank elements of a block: at tp 1 the whole block (count's
    block_params); at tp 2 with sequence parallelism (every replicated tensor's gradient then a
    partial sum) the two ranks hold it once plus the replicated part once more."""
    assert_dense_blocks_shard(from_hf_config(HYBRID_VARIANTS[index]))


def test_tensor_parallel_splits_the_deltanet_gemms():
    """Qwen3-Next's 16 key / 32 value heads split over tp 2: per-rank mixer FLOPs x 2 = tp 1."""
    spec = from_hf_config(config("qwen3-next-80b-a3b-instruct"))
    block = Block("gated_deltanet", True, False, False, True)

    def mixer(tp):
        return sum(g.flops for g in layer_kernels(spec, tp, 1, 2048, 2, block=block, moe_layer=True).gemms
                   if g.name.startswith("deltanet/"))
    assert 2 * mixer(2) == mixer(1)








def test_parallel_hybrid_holds_kv_and_state():
    """Falcon-H1 block: K/V per token (2 x 2 kv heads x 64) and the Mamba-2 states (conv
    (384 + 2 x 2 x 16) x 4, SSM 6 x 64 x 16) in every one of its 3 blocks."""
    spec = from_hf_config(HYBRID_VARIANTS[11])
    state = (384 + 64) * 4 + 6 * 64 * 16
    assert kv_cache_bytes(spec, 1, 100, 2) == 2 * 3 * (state + 2 * 2 * 64 * 100)
    assert kv_cache_bytes_per_token(spec, 2) == 2 * 3 * 2 * 2 * 64




@pytest.mark.parametrize(("data", "message"), [
    ({"model_type": "nemotron_h", "hybrid_override_pattern": "MX*", "hidden_size": 64},
     r"hybrid_override_pattern: unsupported characters \['X'\]"),
    ({"model_type": "nemotron_h", "hybrid_override_pattern": "M*", "moe_latent_size": 32, "hidden_size": 64},
     r"moe_latent_size: Nemotron-H latent MoE"),
    ({"model_type": "qwen3_next", **HYBRID_VARIANTS[0], "full_attention_interval": 0},
     r"full_attention_interval: must be >= 1, got 0"),
    ({**HYBRID_VARIANTS[2], "layer_types": ["linear_attention", "full_attention"]},
     r"layer_types: 2 entries for num_hidden_layers 4"),
    ({**HYBRID_VARIANTS[6], "layer_types": ["mamba", "sliding", "mamba", "mamba"]},
     r"layer_types: unsupported \['sliding'\]"),
    ({**HYBRID_VARIANTS[4], "mamba_n_heads": 6}, r"mamba2.heads \(6\) must divide mamba2.inner \(512\)"),
])
def test_bad_configs_are_one_line_errors_naming_the_field(data, message):
    with pytest.raises(SpecError, match=message) as exc:
        from_hf_config(data, "config.json")
    assert "\n" not in str(exc.value)


def test_mixer_types_need_their_specs():
    """layer_types naming a mixer whose sub-spec is missing is refused naming both."""
    with pytest.raises(ValueError, match="layer_types has mamba2 but mamba2 is not set"):
        tiny(layer_types=["mamba2"])
    with pytest.raises(ValueError, match="deltanet is set but no block is gated_deltanet"):
        tiny(layer_types=["full_attention"], deltanet=DELTA["deltanet"], mlp=True, ffn_hidden=4)


def test_qwen3_5_composite_reads_whole():
    """Qwen3.5 composites now map with their vision tower (tests/test_hf_vision.py counts them)."""
    from _hf_vision_cases import VISION_VARIANTS

    data = next(d for d in VISION_VARIANTS if d["model_type"] == "qwen3_5_moe")
    assert from_hf_config(data, "config.json").vision is not None


@pytest.mark.torch
@pytest.mark.slow
def test_qwen3_5_text_config_equals_the_composite_language_model():
    """A Qwen3.5 composite's text_config saved as qwen3_5_text counts as the composite's
    language model and head (Qwen3_5ForConditionalGeneration, the vision tower left out)."""
    text = HYBRID_VARIANTS[2]
    composite = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
                 "text_config": {k: v for k, v in text.items() if k != "model_type"},
                 "vision_config": {"depth": 1, "hidden_size": 64, "num_heads": 4, "intermediate_size": 128,
                                   "out_hidden_size": 256}}
    assert components(text) == hf_components(composite, skip="visual")


def test_serving_keeps_the_state_per_sequence_not_per_token():
    """Bamba-9B served with tp 1: K/V per token from its 3 attention blocks only (2 x 3 x 8 x
    128 x 2 B); a sequence adds its 29 Mamba-2 states once, in whole 16-token blocks."""
    from modelplan.count.serve import count_serve_memory
    from modelplan.specs.serve import ServeSpec

    mem = count_serve_memory(from_hf_config(config("bamba-9b")), ServeSpec(context=1024, tp=1))
    assert mem.kv_per_token_bytes == 2 * 3 * 8 * 128 * 2
    state = 2 * 29 * ((8192 + 256) * 4 + 128 * 64 * 128)
    block = 16 * mem.kv_per_token_bytes
    assert mem.blocks_per_sequence == 1024 // 16 + -(-state // block)


def test_count_reports_the_state_per_sequence():
    """`count`'s memory holds Bamba-9B's 29 Mamba-2 states per sequence (bf16) apart from K/V."""
    result = runner.invoke(app, ["count", str(HF / "bamba-9b.json"), "--json"])
    assert result.exit_code == 0, result.output
    memory = json.loads(result.stdout)["memory"]
    assert memory["kv_state_per_sequence"] == 2 * 29 * ((8192 + 256) * 4 + 128 * 64 * 128)
