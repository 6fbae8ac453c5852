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
    ({"qk_norm": True}, "qk_norm"),
    ({"lm_head": False}, "lm_head=false"),
    ({"embedding_dim": 8}, "embedding_dim"),
    ({"moe": MoESpec(num_experts=4, top_k=2, expert_ffn_hidden=8, shared_experts=1, shared_expert_gate=True)},
     "moe.shared_expert_gate"),
    ({"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 4}, "layer_types=sliding_attention"),
    ({"norm_placement": "sandwich"}, "norm_placement=sandwich"),
    ({"attention_sinks": True}, "attention_sinks"),
])
def test_verify_refuses_unexecuted_features_by_name(update, name):
    """The four the issue found passing silently, and new ones: a one-line SpecError naming it."""
    spec = TransformerSpec.model_validate({**LLAMA.model_dump(), **update})
    with pytest.raises(SpecError, match=f"verify cannot execute {name}"):
        verify(spec, TRAIN, Plan(dp=2))


def test_every_new_family_is_refused_with_all_its_features():
    """DeepSeek-V3 lists MLA, MTP and its router; nothing it uses is left out of the message."""
    spec = from_hf_config(json.loads((HF / "deepseek-v3.json").read_text()))
    assert unexecuted_features(spec) == ["mla", "mtp_layers", "moe.router=sigmoid",
                                         "moe.router_score_correction", "moe.routed_scaling"]


def test_cli_verify_exits_2_naming_the_feature(tmp_path):
    """`modelplan verify` on Qwen3 (q/k norms) prints one error line and exits 2."""
    result = CliRunner().invoke(app, ["verify", str(HF / "qwen3-0.6b.json"), "--dp", "2"])
    assert result.exit_code == 2, result.output
    assert "verify cannot execute qk_norm" in result.output


def test_planner_notes_what_it_prices_as_baseline():
    """plan's notes name the features its step time leaves out instead of dropping them silently."""
    spec = LLAMA.model_copy(update={"qk_norm": True, "attention_sinks": True})
    notes = plan_notes(spec, Plan(dp=1))
    assert any("qk_norm, attention_sinks not modelled by the planner" in n for n in notes)
    assert not any("not modelled" in n for n in plan_notes(LLAMA, Plan(dp=1)))
