"""The types of modelplan/specs/hf_n17classic.py (encoders ernie, megatron-bert; decoders
openai-gpt, xglm, ctrl; composites llava_next_video, llava_onevision, vipllava): total parameters
equal sum(p.numel()) of transformers 5.24's module built from a tiny config (the independent
source), `modelplan count` / `plan --gpus 8` run on the config.json, and the refused classic
types name their missing mechanism."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _hf_reference import hf_numel
from _hf_vision_cases import _CLIP, TEXT
from modelplan.cli import app
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

runner = CliRunner()

TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96,
            vocab_size=100, max_position_embeddings=40, type_vocab_size=1)
"""Small enough to build on CPU; type_vocab_size 1 to show the table follows the config."""

CLASSES = {"ernie": "Ernie", "megatron-bert": "MegatronBert"}
"""model_type -> transformers class prefix."""

HEADS = ("Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification")

CASES = [{**TINY, "model_type": t, "architectures": [p + h]} for t, p in CLASSES.items() for h in HEADS]

DECODERS = {
    "openai-gpt": dict(architectures=["OpenAIGPTLMHeadModel"], n_layer=2, n_embd=64, n_head=4, vocab_size=100,
                       n_positions=40),
    "xglm": dict(architectures=["XGLMForCausalLM"], num_layers=2, d_model=64, attention_heads=4, ffn_dim=96,
                 vocab_size=100, max_position_embeddings=40),
    "ctrl": dict(architectures=["CTRLLMHeadModel"], n_layer=2, n_embd=64, n_head=4, dff=96, vocab_size=100,
                 n_positions=40),
}
"""Tiny configs of the GPT-style decoders, in each config class's own key names."""
CASES += [{"model_type": t, **d} for t, d in DECODERS.items()]

_TOWERS = [dict(_CLIP, model_type="clip_vision_model"), dict(_CLIP, model_type="siglip_vision_model")]
CASES += [{"model_type": t, "architectures": [a], "text_config": {**TEXT, "model_type": "qwen2"}, "vision_config": v}
          for t, a in (("llava_next_video", "LlavaNextVideoForConditionalGeneration"),
                       ("llava_onevision", "LlavaOnevisionForConditionalGeneration")) for v in _TOWERS]
_VIP = dict(_CLIP, model_type="clip_vision_model", num_hidden_layers=12)  # deep enough for layers -11 and 6
CASES += [{"model_type": "vipllava", "architectures": ["VipLlavaForConditionalGeneration"],
           "text_config": {**TEXT, "model_type": "llama"}, "vision_config": _VIP, **extra}
          for extra in ({}, {"vision_feature_layer": [-2, 0]}, {"vision_feature_layer": -2})]
"""LLaVA-NeXT-Video / OneVision composites on a Qwen2 text model, CLIP and SigLIP towers; VipLLaVA
with its default five feature layers, two, and one."""


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=[d["architectures"][0] for d in CASES])
def test_total_equals_transformers(data):
    """Total parameters equal sum(p.numel()) of the transformers model of the same config."""
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.parametrize("data", [d for d in CASES if d["architectures"][0].endswith(("ForMaskedLM", "LMHeadModel", "CausalLM", "Generation"))],
                         ids=lambda d: d["model_type"])
def test_count_and_plan_run(data, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` succeed on the config.json."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["plan", str(path), "--gpus", "8", "--json"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("model_type, reason", [("reformer", "LSH and local chunked self-attention")])
def test_refused_types_name_the_mechanism(model_type, reason, tmp_path):
    """A refused classic type exits non-zero with a one-line reason naming what is not modelled."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type}))
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code != 0
    assert reason in result.output and "Traceback" not in result.output
