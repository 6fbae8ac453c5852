"""`modelplan plan` through Typer's CliRunner: tables, JSON, documents, explain, one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.plan.document import read_plan_document

runner = CliRunner()
BASE = ["plan", "gpt2", "--gpus", "8", "--cluster", "dgx-a100", "--batch", "64", "--seq", "1024"]


def run(*args: str):
    return runner.invoke(app, list(args))


def test_ranked_table_and_best_plan_detail():
    """Top plans, the step-time breakdown and memory per stage of the best."""
    result = run(*BASE, "--top", "3")
    assert result.exit_code == 0, result.output
    assert "Top 3 plans" in result.output and "Step time" in result.output and "Memory per GPU" in result.output


def test_json_lists_the_ranked_plans():
    """--json: a search document with `top` plans and their predictions."""
    result = run(*BASE, "--top", "2", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["kind"] == "modelplan.search" and len(doc["plans"]) == 2
    times = [p["predictions"]["step_time"]["step_time_s"] for p in doc["plans"]]
    assert times == sorted(times)


def test_output_writes_the_best_plan_document(tmp_path):
    """-o writes a plan document that reads back with the best plan."""
    out = tmp_path / "plan.json"
    result = run(*BASE, "--json", "-o", str(out))
    assert result.exit_code == 0, result.output
    best = json.loads(result.output)["plans"][0]["plan"]
    assert read_plan_document(out).plan.model_dump(mode="json") == best


def test_ep_option_fixes_expert_parallelism():
    """--ep 8 on Mixtral 8x7B: every ranked plan splits the 8 experts over 8 ranks (ep column)."""
    result = run("plan", "mixtral-8x7b", "--gpus", "64", "--cluster", "dgx-h100", "--ep", "8", "--tp", "1",
                 "--pp", "2", "--zero", "1", "--recompute", "none", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["plans"] and {p["plan"]["ep"] for p in doc["plans"]} == {8}
    assert all(p["predictions"]["step_time"]["ep_comm_s"] > 0 for p in doc["plans"])


def test_ep_that_does_not_divide_the_experts_exit_2():
    """--ep 3 on 8 experts: one line naming both numbers, exit 2."""
    result = run("plan", "mixtral-8x7b", "--gpus", "48", "--cluster", "dgx-h100", "--tp", "1", "--pp", "1",
                 "--batch", "96", "--ep", "3")
    assert result.exit_code == 2
    assert "ep (3) must divide moe.num_experts (8)" in result.output and result.output.count("\n") == 1


def test_explain_a_plan_that_fits(tmp_path):
    """--explain re-evaluates a written plan and says it fits (exit 0)."""
    out = tmp_path / "plan.json"
    assert run(*BASE, "-o", str(out)).exit_code == 0
    result = run("plan", "--explain", str(out))
    assert result.exit_code == 0, result.output
    assert "fits: stage 0 needs" in result.output


def test_explain_a_plan_that_does_not_fit(tmp_path):
    """GPT-3 175B on 8 GPUs with no sharding: 'does not fit', exit 1, and what dominates."""
    path = tmp_path / "big.json"
    from modelplan.specs.load import load_model

    doc = {"schema_version": 1, "model": load_model("gpt3-175b").model_dump(mode="json"),
           "training": {"global_batch": 8, "seq_len": 2048}, "plan": {"dp": 1, "tp": 8}}
    path.write_text(json.dumps(doc))
    result = run("plan", "--explain", str(path), "--cluster", "dgx-a100")
    assert result.exit_code == 1, result.output
    assert "does not fit: stage 0 needs" in result.output and "optimizer" in result.output


def test_too_few_gpus_exit_2_one_line():
    """GPT-3 175B on 8 x 80 GB: one line naming the GPUs it needs, exit code 2."""
    result = run("plan", "gpt3-175b", "--gpus", "8", "--cluster", "dgx-a100")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: needs at least")


def test_batch_not_divisible_exit_2():
    """A batch of 7 cannot be split over 8 data-parallel ranks."""
    result = run("plan", "gpt2", "--gpus", "8", "--cluster", "dgx-a100", "--batch", "7", "--tp", "1", "--pp", "1")
    assert result.exit_code == 2
    assert result.output.strip() == "error: no valid plan of 8 GPUs: micro_batch * dp (1 * 8 = 8) must divide global_batch (7)"


def test_bad_range_exit_2():
    """--pp 4..2 is not a range."""
    result = run(*BASE, "--pp", "4..2")
    assert result.exit_code == 2 and "--pp: range 4..2 must be lo..hi" in result.output


def test_invalid_explained_plan_exit_2(tmp_path):
    """A hand-written plan whose tp does not divide the heads: one line, exit 2."""
    from modelplan.specs.load import load_model

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema_version": 1, "model": load_model("gpt2").model_dump(mode="json"),
                                "training": {"global_batch": 8, "seq_len": 1024}, "plan": {"dp": 1, "tp": 5}}))
    result = run("plan", "--explain", str(path))
    assert result.exit_code == 2
    assert result.output.startswith("error: tp (5) must divide heads (12); ") and result.output.count("\n") == 1


def test_network_spec_is_planned():
    """Network specs are planned since issue 8 (details in tests/test_net_plan.py): exit 0."""
    result = run("plan", "mlp", "--gpus", "8", "--cluster", "dgx-a100")
    assert result.exit_code == 0, result.output
    assert "samples/s" in result.output

def test_gpus_not_factorable_under_fixed_tp_names_the_constraint():
    """7 GPUs cannot hold tp 2 (2 does not divide the prime 7): the one-line error names tp 2 and 7."""
    result = run("plan", "gpt2", "--gpus", "7", "--cluster", "dgx-a100", "--tp", "2")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "7 GPUs" in lines[0] and "tp 2" in lines[0] and "must equal 7" in lines[0]


def test_outputs_are_checked_before_the_search(tmp_path, monkeypatch):
    """-o in a missing folder, or -o and --svg naming one file, fail before any search runs."""
    from modelplan.plan import search

    monkeypatch.setattr(search, "search_plans", lambda *a, **k: pytest.fail("searched"))
    for args, message in ((["-o", str(tmp_path / "no" / "p.json")], "does not exist"),
                          (["-o", str(tmp_path / "x"), "--svg", str(tmp_path / "x")], "name the same file")):
        result = runner.invoke(app, ["plan", "gpt2", "--gpus", "8", *args])
        assert result.exit_code == 2 and message in result.stderr, result.output


def test_model_spec_on_standard_input_and_document_on_standard_output():
    """`plan - -o -` reads the spec from stdin and prints only the plan document."""
    spec = json.dumps({"layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 128})
    result = runner.invoke(app, ["plan", "-", "--gpus", "2", "-o", "-"], input=spec)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "modelplan.plan" and doc["model"]["layers"] == 2


def test_search_json_is_read_as_its_best_plan():
    """`plan --json` output (a search document) is accepted by export: its best plan."""
    search_doc = runner.invoke(app, ["plan", "gpt2", "--gpus", "8", "--json"])
    best = json.loads(search_doc.stdout)["plans"][0]["plan"]
    result = runner.invoke(app, ["export", "-", "--to", "json"], input=search_doc.stdout)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["plan"] == best


def test_wide_flags_fix_their_dimension():
    """--tp-overlap ring, --no-dp-overlap, --offload-optimizer none, --no-zeropp, --rank-order: every
    ranked plan carries exactly the fixed values (the flags' stated meaning)."""
    result = run(*BASE, "--top", "5", "--json", "--tp-overlap", "ring", "--no-dp-overlap", "--offload-optimizer",
                 "none", "--no-offload-activations", "--no-zeropp", "--rank-order", "tp-cp-pp-dp")
    assert result.exit_code == 0, result.output
    plans = [p["plan"] for p in json.loads(result.output)["plans"]]
    assert plans and all(p["dp_overlap"] is False and p["offload_optimizer"] == "none" and not p["zeropp"]
                         and not p["offload_activations"] and p["rank_order"] == "tp-cp-pp-dp" for p in plans)
    assert all(p["tp_overlap"] == "ring" for p in plans if p["tp"] > 1)


@pytest.mark.parametrize("flag, value, words", [
    ("--tp-overlap", "bulk", "--tp-overlap"),
    ("--offload-optimizer", "disk", "--offload-optimizer"),
    ("--fsdp-shard-size", "8,x", "--fsdp-shard-size"),
    ("--fsdp-shard-size", "-1", "--fsdp-shard-size"),
    ("--fsdp-shard-size", "99999999999", "larger than"),
    ("--rank-order", "tp-dp-pp", "--rank-order"),
])
def test_bad_wide_flag_exit_2_one_line(flag, value, words):
    """A bad value of a wide-search flag: one `error:` line naming the flag, exit 2."""
    result = run(*BASE, flag, value)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], result.output


def test_header_states_the_memory_the_budget_uses():
    """An H100 '80 GB' holds 81,559 MiB as NVML reports it (presets/accelerators/h100-sxm.toml):
    81,559 x 2^20 B = 85.52e9 B, the budget of every memory table and refusal ('> 85.5 GB'), so
    the header says so beside the marketed figure; a plan at 81.5 GB then reads as fitting."""
    result = CliRunner().invoke(app, ["plan", "llama-3-8b", "--gpus", "8", "--top", "1"])
    assert result.exit_code == 0, result.output
    assert f"80 GB, {81559 * 2**20 / 1e9:.1f} GB usable)" in result.output.splitlines()[0]


def test_memory_refusals_name_the_budget_itself():
    """Llama-3-8B on 12 H100s (pp 3: uneven stages, 11+11+10): the memory floor lets plans within
    5 % over the budget through for the stage-split search's relief splits; its refusal printed
    that slack as if it were the GPU ('> 89.8 GB' on an 85.5 GB budget). Every limit printed is the
    budget, 81,559 MiB = 85.5 GB (presets/accelerators/h100-sxm.toml)."""
    import re

    result = CliRunner().invoke(app, ["plan", "llama-3-8b", "--gpus", "12"])
    assert result.exit_code == 0, result.output
    budget = f"{81559 * 2**20 / 1e9:.1f}"
    limits = re.findall(r"GB per GPU > ([\d.]+) GB", result.output)
    limits += re.findall(r"over the ([\d.]+) GB budget", result.output)
    assert limits and set(limits) == {budget}, limits
