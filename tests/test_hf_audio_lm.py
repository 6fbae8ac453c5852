"""musicgen / musicgen_melody and their decoder types, moshi (modelplan/specs/hf_audio_lm.py): the
decoder over audio codebooks that MusicgenForCausalLM / MusicgenMelodyForCausalLM hold, Moshi's
temporal transformer (MoshiForCausalLM). Expected totals are
sum(p.numel()) of those transformers 5.24 classes built from the decoder sub-config (on CPU for the
small configs, on the meta device for the class defaults); the codebook tables and heads by hand;
`count` / `plan --gpus 8` run; MusicgenForConditionalGeneration is refused in one line."""

from __future__ import annotations

import json

import pytest

from _hf_n17_checks import assert_count_plan, assert_count_refused, assert_one_line_error
from _hf_reference import hf_config, hf_numel, transformers_module
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

_DECODER = {"num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4, "ffn_dim": 96, "vocab_size": 50,
            "num_codebooks": 8, "max_position_embeddings": 256}

CASES = {
    "musicgen": ({"model_type": "musicgen", "decoder": {"model_type": "musicgen_decoder", **_DECODER}},
                 "MusicgenForCausalLM"),
    "musicgen_decoder": ({"model_type": "musicgen_decoder", **_DECODER, "scale_embedding": True,
                          "architectures": ["MusicgenForCausalLM"]}, "MusicgenForCausalLM"),
    "musicgen_melody": ({"model_type": "musicgen_melody",
                         "decoder": {"model_type": "musicgen_melody_decoder", **_DECODER, "num_codebooks": 4}},
                        "MusicgenMelodyForCausalLM"),
    "musicgen_melody_decoder": ({"model_type": "musicgen_melody_decoder", **_DECODER, "num_codebooks": 2},
                                "MusicgenMelodyForCausalLM"),
}


def _decoder_numel(data: dict, cls: str, device: str) -> int:
    """sum(p.numel()) of `cls` built from the decoder sub-config (the composite class cannot build it)."""
    import torch

    decoder = data.get("decoder", data)
    with torch.device(device):
        model = getattr(transformers_module(), cls)._from_config(hf_config(decoder))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_total_equals_transformers_on_cpu(name):
    """modelplan's total = sum(p.numel()) of the ...ForCausalLM built on CPU."""
    data, cls = CASES[name]
    assert count_params(from_hf_config(data)).total == _decoder_numel(data, cls, "cpu")


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "cls"), [("musicgen", "MusicgenForCausalLM"),
                                                 ("musicgen_melody", "MusicgenMelodyForCausalLM")])
def test_class_defaults_equal_transformers(model_type, cls):
    """The composite config class's defaults (its decoder's: 24 blocks of 1024, 4 codebooks of 2048)."""
    data = json.loads(transformers_module().AutoConfig.for_model(model_type).to_json_string(use_diff=False))
    assert count_params(from_hf_config(data)).total == _decoder_numel(data, cls, "meta")


_MOSHI = {"model_type": "moshi", "architectures": ["MoshiForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "ffn_dim": 192, "vocab_size": 100,
          "max_position_embeddings": 128, "sliding_window": 64}


@pytest.mark.torch
@pytest.mark.parametrize("data", [_MOSHI, {"model_type": "moshi"}], ids=["small", "class-defaults"])
def test_moshi_total_equals_transformers(data):
    """MoshiForCausalLM's sum(p.numel()) (meta device): the small config and MoshiConfig's defaults."""
    if len(data) == 1:
        data = json.loads(transformers_module().AutoConfig.for_model("moshi").to_json_string(use_diff=False))
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_moshi_by_hand():
    """h 64, 2 blocks: table (100 + 1) x 64, fc1 64 x 192 and fc2 96 x 64 a block (MoshiGatingMLP),
    q 64 x 64, k and v 64 x 32, o 64 x 64, two RMSNorms, final norm, head 64 x 100."""
    b = count_params(from_hf_config(_MOSHI)).breakdown
    block = 64 * 192 + 96 * 64 + 64 * (64 + 32 + 32) + 64 * 64 + 2 * 64
    assert (b["embedding"], b["layers"], b["head"]) == (101 * 64, 2 * block, 64 * 100)


def test_codebook_tables_and_heads_by_hand():
    """8 codebooks of 50 codes, h 64: tables 8 x (50 + 1) x 64, heads 8 x 64 x 50 (MusicgenDecoder
    embed_tokens, MusicgenForCausalLM lm_heads); MusicGen's idle encoder_attn 4 x 64 x 64 a block,
    none in MusicGen-Melody's blocks."""
    b = count_params(from_hf_config(CASES["musicgen"][0])).breakdown
    assert b["embedding"] == 8 * 51 * 64 and b["head"] == 8 * 64 * 50
    assert b["layers/cross_attention"] == 3 * 4 * 64 * 64
    assert "layers/cross_attention" not in count_params(from_hf_config(CASES["musicgen_melody"][0])).breakdown


@pytest.mark.parametrize("name", [*CASES, "moshi"])
def test_count_and_plan_run(name, tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, _MOSHI if name == "moshi" else CASES[name][0])


def test_conditional_generation_refused_in_one_line(tmp_path):
    """The composite with its T5 text encoder and EnCodec codec: one line naming architectures."""
    data = {**CASES["musicgen"][0], "architectures": ["MusicgenForConditionalGeneration"]}
    assert_count_refused(tmp_path, data, "EnCodec")
    assert_one_line_error({"model_type": "musicgen"}, "decoder: missing")
    assert_count_refused(tmp_path, {**_MOSHI, "architectures": ["MoshiForConditionalGeneration"]}, "depth decoder")
    assert_one_line_error({**_MOSHI, "ffn_dim": 191}, "ffn_dim: 191 must be even")
