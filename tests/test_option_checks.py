"""Options that contradict each other are refused (exit 2, one `error:` line naming the field);
options with nothing to act on are accepted with one `warning:` line (`modelplan.plan.option_checks`).

Which pairs are refused follows the engines' own argument checks: Megatron-LM
megatron/training/arguments.py (tp-comm-overlap needs sequence parallelism; sequence parallelism
turned off with a warning at tp 1; fp8-param-gather needs the distributed optimizer), Megatron-core
transformer_config.py (overlap_moe_expert_parallel_comm needs expert parallelism and no full
recompute), DeepSpeed ZeRO++ (a ZeRO-3 feature, docs/_tutorials/zeropp.md), torchao's
Float8LinearRecipeName (tensorwise, rowwise) against Transformer Engine's recipes.
"""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.cli.app import run

RUNNER = CliRunner()
PLAN = ["plan", "gpt2", "--gpus", "8", "--batch", "64", "--seq", "256", "--tp", "1", "--pp", "1"]
MOE = ["plan", "mixtral-8x7b", "--gpus", "8", "--batch", "64", "--seq", "256"]


@pytest.fixture(scope="module")
def command():
    app.load()
    return typer.main.get_command(app)


def _run(command, argv: list[str]) -> tuple[int, list[str]]:
    with RUNNER.isolation() as (out, err, _):
        code = run(argv, command)
        text = out.getvalue().decode() + err.getvalue().decode()
    assert "Traceback" not in text, text
    return code, text.splitlines()


@pytest.mark.parametrize(("extra", "field"), [
    (["--ac-mode", "op_sac", "--recompute", "none"], "ac_mode"),  # the brief's known gap
    (["--ac-mode", "layer_sac", "--recompute", "full"], "ac_mode"),
    (["--no-sac-saves-attention", "--recompute", "none,full"], "sac_saves_attention"),
    (["--recompute", "full", "--recompute-modules", "core_attn"], "recompute_modules"),
    (["--recompute", "selective", "--recompute-method", "uniform", "--recompute-layers", "1"], "recompute_method"),
    (["--ep-comm-overlap"], "ep_comm_overlap"),  # GPT-2 has no experts
    (["--fake-balanced-gate"], "fake_balanced_gate"),
    (["--zeropp", "--zero", "1"], "zeropp"),
    (["--fsdp-shard-size", "8", "--zero", "0,1"], "fsdp_shard_size"),
    (["--reshard-after-forward", "true", "--zero", "2"], "reshard_after_forward"),
    (["--compile-loss", "--framework", "torchtitan"], "compile_loss"),
    (["--precision", "fp8", "--fp8-recipe", "rowwise"], "fp8_recipe"),  # torchao's recipe, Megatron runs TE
    (["--precision", "fp8", "--fp8-recipe", "delayed", "--framework", "torchtitan"], "fp8_recipe"),
    (["--precision", "fp8", "--fp8-param-gather", "--zero", "0"], "fp8_param_gather"),
])
def test_contradiction_is_refused_naming_the_field(command, extra, field):
    """Two options no engine runs together: exit 2, one error line that names the field."""
    code, lines = _run(command, PLAN + extra)
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1, lines
    assert field in errors[0], errors


@pytest.mark.parametrize(("extra", "field"), [
    (["--ep-comm-overlap", "--ep", "1"], "ep_comm_overlap"),
    (["--ep-comm-overlap", "--recompute", "full"], "ep_comm_overlap"),
])
def test_moe_contradiction_is_refused(command, extra, field):
    """EP overlap needs expert parallelism and no full recompute (Megatron-core transformer_config.py)."""
    code, lines = _run(command, MOE + extra)
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and field in errors[0], lines


def test_fake_gate_without_deepep_warns(command):
    """The balanced gate changes only DeepEP's deduplicated exchange (plan/deepep.py): with alltoall, a warning."""
    code, lines = _run(command, MOE + ["--fake-balanced-gate", "--tp", "1", "--pp", "1", "--ep", "8", "--zero", "1"])
    assert sum(ln.startswith("warning:") and "fake_balanced_gate" in ln for ln in lines) == 1, lines


def test_tp_overlap_without_sequence_parallel_is_refused(command):
    """Megatron-LM: 'Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled'."""
    argv = ["plan", "gpt2", "--gpus", "8", "--batch", "64", "--seq", "256", "--tp", "2", "--tp-overlap", "ring",
            "--no-sequence-parallel"]
    code, lines = _run(command, argv)
    assert code == 2 and any(ln.startswith("error:") and "tp_overlap" in ln for ln in lines), lines


@pytest.mark.parametrize(("extra", "field"), [
    (["--sequence-parallel"], "sequence_parallel"),  # Megatron-LM disables it at tp 1 with a warning
    (["--cp-comm-type", "a2a"], "cp_comm_type"),  # cp stays 1 at seq 256
    (["--schedule", "zb-h1"], "schedule"),
    (["--pp-flush-microbatches", "2"], "pp_flush_microbatches"),
    (["--compile"], "compile"),  # Megatron's element-wise kernels are fused already
    (["--framework", "torchtitan", "--compile", "--fused-norm"], "fused_norm"),
    (["--no-loss-upcast"], "loss_upcast"),  # Megatron's loss is not the eager cross-entropy
    (["--precision", "fp32", "--grad-dtype", "same"], "grad_dtype"),
    (["--tp-comm-overlap", "--no-sequence-parallel"], "tp_comm_overlap"),  # at tp 1: nothing to overlap
    (["--zeropp", "--zero", "3", "--framework", "torchtitan"], "zeropp"),  # DeepSpeed's, priced as a what-if
    (["--offload-activations", "--framework", "deepspeed"], "offload_activations"),  # Megatron-core's
])
def test_inert_option_warns_once_and_runs(command, extra, field):
    """An option with nothing to act on: the plan runs (exit 0) and one warning line names the field."""
    code, lines = _run(command, PLAN + extra)
    warnings = [ln for ln in lines if ln.startswith("warning:")]
    assert code == 0, lines
    assert len(warnings) == 1 and field in warnings[0], warnings


def test_zero_without_data_parallel_ranks_warns(command):
    """ZeRO shards over dp x cp ranks: at dp 1 (pp 8) there is nothing to shard over."""
    argv = ["plan", "gpt2", "--gpus", "8", "--batch", "64", "--seq", "256", "--tp", "1", "--dp", "1", "--zero", "1"]
    code, lines = _run(command, argv)
    assert any(ln.startswith("warning:") and "zero" in ln for ln in lines), lines


def test_consistent_options_print_no_warning(command):
    """The same options where they apply: no warning, no error."""
    argv = ["plan", "gpt2", "--gpus", "8", "--batch", "64", "--seq", "256", "--tp", "2", "--sequence-parallel",
            "--ac-mode", "op_sac", "--recompute", "selective", "--zero", "1"]
    code, lines = _run(command, argv)
    assert code == 0 and not [ln for ln in lines if ln.startswith(("warning:", "error:"))], lines


def test_verify_warns_on_cp_comm_type_at_cp_1(command):
    """verify --cp-comm-type on a plan without context parallelism: a warning, the check still runs."""
    argv = ["verify", "gpt2", "--dp", "2", "--cp-comm-type", "p2p", "--max-ranks", "2", "--global-batch", "4",
            "--seq", "16"]
    code, lines = _run(command, argv)
    assert code == 0 and sum(ln.startswith("warning:") and "cp_comm_type" in ln for ln in lines) == 1, lines


def test_count_batch_not_divisible_by_micro_batch_is_refused(command):
    """Megatron-core num_microbatches_calculator.py: 'global batch size (6) is not divisible by micro batch size (4)'."""
    code, lines = _run(command, ["count", "gpt2", "--batch", "6", "--micro-batch", "4"])
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "global_batch (6)" in errors[0] and "micro_batch (4)" in errors[0], lines


@pytest.mark.parametrize(("argv", "flag"), [
    (["export", "{plan}", "-o", "-", "--json"], "-o -"),  # both would print on standard output
    (["calibrate", "--backend", "sim", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0", "-o", "-", "--json"], "--output -"),
    (["verify", "gpt2", "--dp", "2", "--max-ranks", "2", "--global-batch", "4", "--seq", "16", "--timeline", "--json"],
     "--timeline"),
    (["verify", "gpt2", "--dp", "2", "--max-ranks", "2", "--global-batch", "4", "--seq", "16", "--np", "2"], "--np"),
])
def test_output_options_that_exclude_each_other_are_refused(command, tmp_path, argv, flag):
    """Two options that each claim standard output, or an MPI-only option on the simulator: exit 2, named."""
    plan = tmp_path / "plan.json"
    if "{plan}" in argv:
        code, lines = _run(command, ["plan", "gpt2", "--gpus", "8", "--batch", "64", "--seq", "256", "-o", str(plan)])
        assert code == 0, lines
    code, lines = _run(command, [a.format(plan=plan) for a in argv])
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and flag in errors[0], lines


def test_comm_one_size_and_a_sweep_is_refused(command):
    """--size is one message; --min-size sets a sweep (nccl-tests -b / -e / -f): give one or the other."""
    code, lines = _run(command, ["comm", "all_reduce", "-n", "8", "-c", "dgx-h100", "-s", "1M", "-b", "2K"])
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "--size" in errors[0] and "--min-size" in errors[0], lines


def test_comm_sweep_bounds_alone_still_sweep(command):
    """-b 2K -e 8K -f 2 without --size: three rows, 2K, 4K, 8K (nccl-tests' doubling sweep)."""
    code, lines = _run(command, ["comm", "all_reduce", "-n", "8", "-c", "dgx-h100", "-b", "2K", "-e", "8K",
                                 "-f", "2", "--json"])
    import json

    doc = json.loads("\n".join(lines))
    assert code == 0 and [r["size_bytes"] for r in doc["rows"]] == [2048, 4096, 8192], doc


def test_explain_refuses_search_options_it_would_ignore(command, tmp_path):
    """plan --explain evaluates the document's plan: --tp / --precision beside it are refused, named."""
    doc = tmp_path / "plan.json"
    code, lines = _run(command, ["plan", "gpt2", "--gpus", "8", "--batch", "64", "--seq", "256", "-o", str(doc)])
    assert code == 0, lines
    code, lines = _run(command, ["plan", "--explain", str(doc), "--tp", "2", "--precision", "fp8"])
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "--tp" in errors[0] and "--precision" in errors[0], lines
    code, lines = _run(command, ["plan", "--explain", str(doc), "--cluster", "dgx-a100", "--memory-headroom", "0.1"])
    assert code == 0, lines  # the options --explain reads


# Megatron-core's apply_rope_fusion acts only on rotary embeddings (Megatron-Bridge utils/fusions.py
# validate_rope_fusion_compatibility) and only Megatron reads it: gpt2 has learned positions,
# llama-3-8b is rotary (its preset), so only the Megatron llama run takes the flag silently.
@pytest.mark.parametrize(("argv", "warned"), [
    (PLAN + ["--no-rope-fusion"], "no rotary embedding"),
    (["plan", "llama-3-8b", "--gpus", "8", "--batch", "64", "--seq", "256", "--framework", "torchtitan",
      "--no-rope-fusion"], "under framework 'torchtitan'"),
    (["plan", "llama-3-8b", "--gpus", "8", "--batch", "64", "--seq", "256", "--no-rope-fusion"], None),
])
def test_rope_fusion_off_warns_where_it_acts_on_nothing(command, argv, warned):
    code, lines = _run(command, argv)
    assert code == 0
    rope = [x for x in lines if x.startswith("warning: rope_fusion")]
    if warned is None:
        assert rope == []
    else:
        assert len(rope) == 1 and warned in rope[0]
