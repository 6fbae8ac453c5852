"""`--mtp-layers N` (modelplan.cli.mtp_option): a DeepSeek-V3 HF config declares one MTP module that
DeepseekV3ForCausalLM does not build; the option trains it as Megatron-LM --mtp-num-layers does, in the
count, the plan's FLOPs, and the Megatron export."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from test_hf_text_exact import SMALL_MLA, _defaults
from modelplan.cli import app
from modelplan.cli.mtp_option import with_mtp_layers
from modelplan.specs.hf import from_hf_config

PLAN = ["--gpus", "8", "--tp", "1", "--pp", "2", "--dp", "4", "--ep", "1", "--micro-batch", "1", "--batch", "64",
        "--seq", "256", "--recompute", "none"]


def _config(tmp_path, **overrides):
    """A small DeepSeek-V3 config.json (num_nextn_predict_layers: the class default, 1)."""
    data = _defaults("deepseek_v3", False, **SMALL_MLA, **overrides)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return data, path


def _invoke(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result


@pytest.mark.torch
@pytest.mark.slow
def test_count_with_mtp_equals_transformers_main_plus_mtp_model(tmp_path):
    """count --mtp-layers 1: transformers' DeepseekV3ForCausalLM sum(p.numel()) plus what its
    MtpModel adds (enorm, hnorm, eh_proj, an MoE block, a norm), and nothing left `not_built`."""
    from _hf_reference import hf_mtp_numel, hf_numel

    data, path = _config(tmp_path)
    result = _invoke("count", path, "--mtp-layers", 1, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["params"]["total"] == hf_numel(data) + hf_mtp_numel(data)
    assert "not_built" not in doc


def test_plan_flops_rise_and_note_goes(tmp_path):
    """The trained module adds its forward and backward to the step (model FLOPs rise); the note
    that the declared module is not trained is printed only without --mtp-layers."""
    _, path = _config(tmp_path)
    docs = []
    for extra in ([], ["--mtp-layers", "1"]):
        result = _invoke("plan", path, *PLAN, "--json", *extra)
        assert result.exit_code == 0, result.output
        docs.append(json.loads(result.output))
    flops = [d["plans"][0]["predictions"]["throughput"]["model_flops"] for d in docs]
    assert flops[1] > flops[0]
    assert [len(d.get("notes", [])) for d in docs] == [1, 0]
    text = _invoke("plan", path, *PLAN)
    assert text.exit_code == 0, text.output
    notes = [ln for ln in text.output.splitlines() if "num_nextn_predict_layers 1" in ln]
    assert len(notes) == 1 and "--mtp-layers 1" in notes[0]


def test_export_writes_mtp_num_layers(tmp_path):
    """plan -o with --mtp-layers 2, then export --to megatron: the script trains 2 MTP modules."""
    _, path = _config(tmp_path)
    doc = tmp_path / "plan.json"
    result = _invoke("plan", path, *PLAN, "--mtp-layers", 2, "-o", doc)
    assert result.exit_code == 0, result.output
    script = _invoke("export", doc, "--to", "megatron")
    assert script.exit_code == 0, script.output
    assert "--mtp-num-layers 2" in script.output


@pytest.mark.slow
def test_megatron_core_builds_the_exported_mtp_layout():
    """An uneven interleaved split writes a layout with the MTP modules on the last stage;
    megatron-core 0.16.1's TransformerConfig accepts it with mtp_num_layers (it checks the count
    of `m` and their place, pipeline_parallel_layer_layout.py validate_layer_layout)."""
    from _engines import engine_module
    from _megatron_rules import parse_flags, read_script, transformer_config_kwargs
    from modelplan.export.engines import export_plan
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    tc = engine_module("megatron.core.transformer.transformer_config")
    spec = with_mtp_layers(from_hf_config(_defaults("deepseek_v3", False, **{**SMALL_MLA, "num_hidden_layers": 5})), 1)
    plan = Plan(dp=1, pp=2, vpp=2, schedule="interleaved")
    training = TrainingSpec(global_batch=8, seq_len=64)
    flags = parse_flags(read_script(export_plan("megatron", spec, training, plan).text)[1])
    assert flags["--mtp-num-layers"] == "1"
    assert flags["--pipeline-model-parallel-layout"].endswith("mL")
    config = tc.TransformerConfig(**transformer_config_kwargs(flags))
    assert config.mtp_num_layers == 1


def test_negative_value_is_one_line_error(tmp_path):
    """--mtp-layers -1: exit 2, one line naming the option."""
    _, path = _config(tmp_path)
    for command in (["count", path], ["plan", path, "--gpus", "8"]):
        result = _invoke(*command, "--mtp-layers", "-1")
        assert result.exit_code == 2, result.output
        assert result.output.strip() == "error: --mtp-layers (-1) must be >= 0"


def test_encoder_refuses_mtp():
    """An encoder (BERT) takes no MTP module: the spec's rule, one line."""
    result = _invoke("count", "bert-base", "--mtp-layers", 1)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "needs a decoder model" in result.output


def test_network_refuses_mtp():
    """A network spec (the `mlp` preset) has no blocks to add a module to: one line naming the option."""
    result = _invoke("count", "mlp", "--mtp-layers", 1)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == "error: --mtp-layers: mlp is a 'network' spec; MTP modules belong to a decoder"


def test_value_the_model_has_warns(tmp_path):
    """--mtp-layers 1 on the deepseek-v3 preset (mtp_layers = 1 already): one warning, the run goes on."""
    result = _invoke("count", "deepseek-v3", "--mtp-layers", 1, "--json")
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.output.splitlines() if ln.startswith("warning: --mtp-layers 1")]
    assert len(warnings) == 1 and "nothing changes" in warnings[0]


def test_verify_executes_the_trained_module(tmp_path):
    """verify --mtp-layers 1 at tp 2 runs the module sharded (its vocab-parallel lookup shows in the
    ledger as tp/mtp/embedding, execute/mtp.py) and passes; without the option no such call is made."""
    _, path = _config(tmp_path)
    regions = []
    for extra in ([], ["--mtp-layers", "1"]):
        result = CliRunner().invoke(app, ["verify", str(path), "--tp", "2", "--steps", "1", "--json", "--ledger",
                                          *extra])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc["passed"] is True
        regions.append("tp/mtp/embedding" in json.dumps(doc["ledgers"]))
    assert regions == [False, True]
