"""Gemma 3n's language model (modelplan/specs/hf_gemma3n.py, specs/side_paths.py,
count/side_paths.py): AltUp, per-layer inputs, LAuReL and the K/V-sharing last blocks. Parameter
counts equal transformers 5.24's Gemma3nForCausalLM built on CPU from small configs (and on the
meta device for the class defaults, google/gemma-3n-E4B's text model); FLOPs of one block by hand;
`count` / `plan` run, `verify` refuses the side paths in one line, the composite is refused with
the text_config hint."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan_verify, assert_one_line_error, class_defaults
from _hf_reference import hf_model, hf_numel
from modelplan.count.flops import layer_forward_flops
from modelplan.count.memory import kv_cache_bytes
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

TEXT = dict(model_type="gemma3n_text", hidden_size=32, num_hidden_layers=6, num_attention_heads=2,
            num_key_value_heads=1, head_dim=16, intermediate_size=48, vocab_size=101,
            vocab_size_per_layer_input=50, hidden_size_per_layer_input=8, altup_num_inputs=3, laurel_rank=4,
            num_kv_shared_layers=2, sliding_window=8,
            layer_types=["sliding_attention", "full_attention"] * 3)
CASES = [
    TEXT,
    {**TEXT, "tie_word_embeddings": False, "attention_bias": True, "altup_num_inputs": 4},
    {**TEXT, "num_kv_shared_layers": 0, "intermediate_size": [48] * 6, "laurel_rank": 7},
    {**TEXT, "num_hidden_layers": 10, "layer_types": None, "num_kv_shared_layers": 2},  # default pattern
]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", CASES, ids=[f"gemma3n_text-{i}" for i in range(len(CASES))])
def test_total_equals_transformers_on_cpu(data):
    """sum(p.numel()) of transformers' Gemma3nForCausalLM built on CPU equals modelplan's total,
    component by component (embedding with the per-layer table and AltUp projections, blocks,
    final norm, head with the AltUp unembeddings)."""
    data = {k: v for k, v in data.items() if v is not None}
    model = hf_model(data, device="cpu")
    parts = {"embedding": 0, "layers": 0, "final_norm": 0, "head": 0}
    for name, p in model.named_parameters():
        if ".layers." in name:
            parts["layers"] += p.numel()
        elif name.startswith("model.norm."):
            parts["final_norm"] += p.numel()
        elif "altup_unembed" in name or name.startswith("lm_head."):
            parts["head"] += p.numel()
        else:
            parts["embedding"] += p.numel()
    b = count_params(from_hf_config(data)).breakdown
    assert {key: b[key] for key in parts} == parts


@pytest.mark.torch
@pytest.mark.slow
def test_class_defaults_equal_transformers():
    """Gemma3nTextConfig's defaults (gemma-3n-E4B's text model): 6,835,235,568 on the meta device."""
    data = class_defaults("gemma3n_text")
    assert count_params(from_hf_config(data)).total == hf_numel(data) == 6_835_235_568


def test_side_path_parameters_by_hand():
    """TEXT (h 32, n 3, r 4, w 8, 6 blocks, vocab_pl 50): per block AltUp 32 + 9 + 27 + 96 + 32 =
    196, LAuReL 2 x 32 x 4 + 32 = 288, per-layer input 2 x 32 x 8 + 32 = 544; the per-layer
    table 50 x 48 = 2,400, its projection 32 x 48 = 1,536 and norm 8; AltUp 2 x 32 x 32 = 2,048 on
    each side. The two K/V-sharing blocks lack k/v_proj 2 x 32 x 16 and k_norm 16."""
    b = count_params(from_hf_config(TEXT)).breakdown
    assert (b["layers/altup"], b["layers/laurel"], b["layers/per_layer_input"]) == (6 * 196, 6 * 288, 6 * 544)
    assert (b["embedding/per_layer/token"], b["embedding/per_layer/proj"], b["embedding/per_layer/norm"]) == (2400, 1536, 8)
    assert b["embedding/altup"] == b["head/altup"] == 2048
    assert b["layers/attention/qkv"] == 6 * 32 * 64 - 2 * 2 * 32 * 16
    assert b["layers/attention/qk_norm"] == 6 * 32 - 2 * 16


def test_block_flops_by_hand():
    """Block 0 (sliding, window 8), 8 tokens of one sequence: q/k/v 2 x 8 x 32 x 64 = 32,768,
    scores 4 x 8 x 8 x 32 = 8,192, o 16,384, MLP 49,152 + 24,576, AltUp 2 x 8 x (2 x 32 x 3 + 27 +
    9 + 32 x 9) = 8,256, LAuReL 2 x 8 x 2 x 32 x 4 = 4,096, per-layer input 2 x 8 x 2 x 32 x 8 =
    8,192; block 4 (K/V shared) projects q only: 2 x 8 x 32 x 32 = 16,384."""
    spec = from_hf_config(TEXT)
    assert layer_forward_flops(spec, 0, 8, 8) == {
        "attention/qkv": 32_768, "attention/score": 8_192, "attention/out": 16_384, "mlp/in": 49_152,
        "mlp/out": 24_576, "altup": 8_256, "laurel": 4_096, "per_layer_input": 8_192}
    assert layer_forward_flops(spec, 4, 8, 8)["attention/qkv"] == 16_384


def test_kv_sharing_blocks_cache_nothing():
    """Only the 4 producing blocks cache K/V (2 x 16 a token each; windows 8 on the sliding ones)."""
    spec = from_hf_config(TEXT)
    assert kv_cache_bytes(spec, 1, 4, 2) == 2 * 4 * 2 * 16 * 4
    assert kv_cache_bytes(spec, 1, 100, 2) - kv_cache_bytes(spec, 1, 50, 2) == 2 * 2 * 2 * 16 * 50  # 2 full blocks


@pytest.mark.parametrize(("data", "message"), [
    ({**TEXT, "intermediate_size": [48, 64] * 3}, r"intermediate_size: per-block widths \[48, 64\] are not modelled"),
    ({**TEXT, "intermediate_size": [48] * 5}, r"intermediate_size: 5 entries for num_hidden_layers 6"),
    ({**TEXT, "num_kv_shared_layers": 6}, r"num_kv_shared_layers: 6 must be in 0..5"),
    ({**TEXT, "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}, r"num_kv_shared_layers: the first 4 blocks must hold every layer type"),
    ({**TEXT, "altup_num_inputs": 1}, r"altup_num_inputs: must be >= 2"),
])
def test_bad_configs_are_one_line_errors(data, message):
    assert_one_line_error(data, message)


def test_composite_less_its_towers_is_the_text_model():
    """The gemma3n composite (tests/test_hf_gemma3n_mm.py) less its vision group counts TEXT alone."""
    whole = count_params(from_hf_config({"model_type": "gemma3n", "text_config": TEXT}, "config.json"))
    assert whole.total - whole.breakdown["vision"] == count_params(from_hf_config(TEXT)).total


def test_cli_count_plan_and_verify(tmp_path):
    """count and plan --gpus 8 exit 0; verify refuses the side paths by name in one line."""
    assert_count_plan_verify(tmp_path, TEXT, "altup", "kv_shared_layers")