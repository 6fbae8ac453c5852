"""The engine's tensor-core rate per architecture (plan/tensor_rate.py, EngineProfile.tensor_rate_by_arch,
TrainingSpec.tensor_rate, `modelplan plan --tensor-rate`).

Expected rates are worked by hand from the presets' stated numbers: H100 SXM bf16 dense peak 989.4
TFLOP/s, MAMF fraction 0.803 (794.5 / 989.4, stas00/ml-engineering), FlashAttention-2 forward 0.33 of
peak (causal, 325.1 / 989.4: cudnn-frontend b740542 benchmark_results.csv), the cost model's
sustained fraction 0.8 (Narayanan et al. 2021), and
the foundry / fsdp presets' Hopper figure 0.85; A100 80GB: 312 TFLOP/s, MAMF fraction 0.869.
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import load_cluster
from modelplan.plan.evaluator import Evaluator
from modelplan.specs.engine import EngineProfile
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

LLAMA = load_model("llama-2-7b")
H100, H200, A100 = load_cluster("dgx-h100"), load_cluster("dgx-h200"), load_cluster("dgx-a100")
runner = CliRunner()


def rates(cluster, **training):
    """(matmul, fused-attention forward) TFLOP/s the evaluator prices one GPU at."""
    ev = Evaluator(LLAMA, TrainingSpec(global_batch=32, seq_len=2048, **training), cluster)
    return ev.roofline.matmul_flops_per_s / 1e12, ev.roofline.flash_fwd_flops_per_s / 1e12


def test_hopper_parts_are_marked_hopper():
    """H100 SXM and H200 are compute capability 9.0 (CUDA C++ Programming Guide); A100 is 8.0."""
    assert H100.accelerator.architecture == H200.accelerator.architecture == "hopper"
    assert A100.accelerator.architecture == "ampere"


def test_foundry_on_h100_applies_the_presets_factor():
    """--framework foundry on an H100: 989.4 x 0.803 x 0.8 x 0.85 = 540.25 TFLOP/s of GEMM and
    989.4 x 0.33 x 0.8 x 0.85 = 222.02 of FlashAttention-2 forward."""
    matmul, flash = rates(H100, framework="foundry")
    assert matmul == pytest.approx(540.25, rel=1e-4)
    assert flash == pytest.approx(222.02, rel=1e-4)


def test_fsdp_on_h200_applies_it_too():
    """The fsdp preset states the same Hopper figure; the H200 preset: 989.0 x 0.803 x 0.8 x 0.85 = 540.03."""
    assert rates(H200, framework="fsdp")[0] == pytest.approx(540.03, rel=1e-4)


def test_foundry_on_a100_does_not():
    """On an Ampere part the foundry preset lists no figure: 312 x 0.869 x 0.8 = 216.91 TFLOP/s."""
    assert rates(A100, framework="foundry")[0] == pytest.approx(216.91, rel=1e-4)


def test_megatron_on_h100_does_not():
    """Megatron lists no tensor-rate figure: 989.4 x 0.803 x 0.8 = 635.59 TFLOP/s."""
    assert rates(H100, framework="megatron")[0] == pytest.approx(635.59, rel=1e-4)


def test_the_runs_own_rate_wins():
    """TrainingSpec.tensor_rate replaces the engine's figure: 989.4 x 0.803 x 0.8 x 0.95 = 603.81;
    1.0 prices the part as is (635.59)."""
    assert rates(H100, framework="foundry", tensor_rate=0.95)[0] == pytest.approx(603.81, rel=1e-4)
    assert rates(H100, framework="foundry", tensor_rate=1.0)[0] == pytest.approx(635.59, rel=1e-4)


def test_the_figure_needs_its_source():
    """A profile that lists a figure without saying what it was fitted to, or one above 1, is refused."""
    base = load_engine("foundry").model_dump()
    with pytest.raises(ValidationError, match="tensor_rate_source"):
        EngineProfile(**{**base, "tensor_rate_source": ""})
    with pytest.raises(ValidationError, match="hopper"):
        EngineProfile(**{**base, "tensor_rate_by_arch": {"hopper": 1.2}})


def _plan(*extra: str) -> tuple[int, str]:
    args = ["plan", "llama-2-7b", "--gpus", "8", "--global-batch", "32", "--seq", "2048", "--tp", "1", "--pp", "1",
            "--zero", "3", "--micro-batch", "4", "--recompute", "none", "--top", "1", *extra]
    result = runner.invoke(app, args)
    return result.exit_code, result.output


def _notes(output: str) -> list[str]:
    return json.loads(output)["plans"][0]["predictions"]["notes"]


def test_cli_says_the_factor_is_applied_and_fitted():
    """`plan --framework foundry` on dgx-h100 prints the factor, that it was fitted and to what."""
    code, out = _plan("--cluster", "dgx-h100", "--framework", "foundry", "--json")
    assert code == 0, out
    note = next(n for n in _notes(out) if n.startswith("tensor-core rate"))
    assert "x0.85 on hopper" in note and "FITTED" in note and "fit-split" in note


def test_cli_on_a100_prints_no_factor():
    """On dgx-a100 nothing is applied, so nothing is said."""
    code, out = _plan("--cluster", "dgx-a100", "--framework", "foundry", "--json")
    assert code == 0, out
    assert not [n for n in _notes(out) if n.startswith("tensor-core rate")]


def test_cli_override_wins_and_is_said():
    """--tensor-rate 1 replaces the preset's figure: the step is faster than under 0.85 and the note
    names the run's figure."""
    code, fitted = _plan("--cluster", "dgx-h100", "--framework", "foundry", "--json")
    code2, mine = _plan("--cluster", "dgx-h100", "--framework", "foundry", "--tensor-rate", "1", "--json")
    assert code == code2 == 0, mine
    step = lambda out: json.loads(out)["plans"][0]["predictions"]["step_time"]["step_time_s"]  # noqa: E731
    assert step(mine) < step(fitted)
    assert any("the run's --tensor-rate" in n for n in _notes(mine))


def test_cli_rejects_a_rate_out_of_range():
    """--tensor-rate 0 is bad input: non-zero exit, the option named, no traceback."""
    code, out = _plan("--cluster", "dgx-h100", "--tensor-rate", "0")
    assert code != 0
    assert "--tensor-rate" in out and "Traceback" not in out


def test_grand_teton_part_is_torchtitans_published_h100():
    """grand-teton-h100: 96 GB HBM2e at 2.4 TB/s and a 500 W limit (torchtitan docs/performance.md);
    torchtitan lists no engine figure, so only the part's fitted clock 0.85 applies:
    989.4 x 0.803 x 0.8 x 0.85 = 540.25 TFLOP/s."""
    teton = load_cluster("grand-teton-h100")
    acc = teton.accelerator
    assert (acc.memory_gb, acc.memory_bw_tbps, acc.board_power_w, acc.architecture) == (96, 2.4, 500, "hopper")
    assert rates(teton, framework="torchtitan")[0] == pytest.approx(540.25, rel=1e-4)
    assert rates(H100, framework="torchtitan")[0] == pytest.approx(635.59, rel=1e-4)


def test_cli_says_the_parts_clock():
    """On grand-teton-h100 the plan's notes name the part's 0.85 clock (and no engine figure)."""
    code, out = _plan("--cluster", "grand-teton-h100", "--framework", "torchtitan", "--json")
    assert code == 0, out
    notes = _notes(out)
    assert any("keeps x0.85 of its tensor-core rate" in n for n in notes)
    assert not [n for n in notes if n.startswith("tensor-core rate")]
