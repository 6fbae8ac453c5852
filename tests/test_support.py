"""What verify executes (modelplan.execute.support): every feature the numpy executor does not run
is refused by name before anything runs (exit 2), never dropped; the planner says which features
it prices as baseline blocks."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _hf_reference import HF
from modelplan.cli.app import app
from modelplan.errors import SpecError
from modelplan.execute.support import unexecuted_features
from modelplan.execute.verify import verify
from modelplan.plan.validate import plan_notes
from modelplan.specs.features import architecture_features
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec

LLAMA = TransformerSpec(name="llama-tiny", layers=2, hidden=16, heads=4, kv_heads=2, ffn_hidden=24, vocab=32)
TRAIN = TrainingSpec(global_batch=4, seq_len=8)


def test_baseline_block_has_no_features():
    """A plain Llama block (pre-norm, rotary, SwiGLU, LM head) uses no listed feature."""
    assert architecture_features(LLAMA) == []


@pytest.mark.parametrize(("update", "name"), [
    ({"lm_head": False}, "lm_head=false"),
    ({"embedding_dim": 8}, "embedding_dim"),
    ({"moe": MoESpec(num_experts=4, top_k=2, expert_ffn_hidden=8, router="sparsemixer")}, "moe.router=sparsemixer"),
])
def test_verify_refuses_unexecuted_features_by_name(update, name):
    """Features the executor does not run yet (two the issue found passing silently): a one-line
    SpecError naming each."""
    spec = TransformerSpec.model_validate({**LLAMA.model_dump(), **update})
    with pytest.raises(SpecError, match=f"verify cannot execute {name}"):
        verify(spec, TRAIN, Plan(dp=2))


def test_a_refused_family_names_all_its_features():
    """T5 lists the encoder-decoder and its relative bias; nothing it uses is left out of the message."""
    spec = from_hf_config(json.loads((HF / "flan-t5-xl.json").read_text()))
    assert unexecuted_features(spec) == ["arch=encoder_decoder", "position=relative"]


@pytest.mark.parametrize("fixture", ["deepseek-v3", "gemma-3-27b-it", "qwen3-0.6b", "gpt-oss-20b", "olmo-2-0325-32b",
                                     "llama-4-scout-17b-16e-text", "jamba-v0.1", "mamba-130m-hf"])
def test_floor_families_execute_every_feature(fixture):
    """DeepSeek-V3 (MLA, MTP, sigmoid groups), Gemma 3, Qwen3, gpt-oss, OLMo 2, Llama 4 (router
    weights on the expert inputs), Jamba and Mamba leave nothing refused."""
    path = HF / f"{fixture}.json"
    assert unexecuted_features(from_hf_config(json.loads(path.read_text()))) == []


def test_executed_names_are_feature_names():
    """Every EXECUTED entry is a name architecture_features gives some shipped config or preset (no typo
    can mark a feature executed that nothing checks)."""
    from modelplan.execute.support import EXECUTED, TEXT_ONLY

    names = set()
    for path in HF.glob("*.json"):
        try:
            names |= set(architecture_features(from_hf_config(json.loads(path.read_text()))))
        except SpecError:
            continue
    from modelplan.specs.load import load_model

    names |= set(architecture_features(load_model("deepseek-v3")))  # mtp_layers: the preset trains MTP (HF builds none)
    assert (EXECUTED | TEXT_ONLY) - names == set()  # qkv_clip: dbrx-base (clip_qkv 8)
    assert architecture_features(LLAMA.model_copy(update={"qkv_clip": 8.0})) == ["qkv_clip"]


def test_cli_verify_exits_2_naming_the_feature(tmp_path):
    """`modelplan verify` on T5 (encoder-decoder) prints one error line and exits 2."""
    result = CliRunner().invoke(app, ["verify", str(HF / "flan-t5-xl.json"), "--dp", "2"])
    assert result.exit_code == 2, result.output
    assert "verify cannot execute arch=encoder_decoder" in result.output


def test_planner_notes_what_it_prices_as_baseline():
    """plan's notes name the features its step time leaves out instead of dropping them silently;
    the ones it prices (q/k norms, sinks) are not named."""
    spec = LLAMA.model_copy(update={"qk_norm": True, "attention_sinks": True, "embedding_dim": 8})
    notes = plan_notes(spec, Plan(dp=1))
    assert any("baseline blocks: embedding_dim not modelled by the planner" in n for n in notes)
    assert not any("not modelled" in n for n in plan_notes(LLAMA, Plan(dp=1)))
