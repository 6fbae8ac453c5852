"""`modelplan count`, `plan` and `verify` on HF config.json files, one parametrized test per
command over the cases of tests/test_hf_hybrid.py (Mamba-2 / DeltaNet hybrids), test_hf_more.py
(issue 16's model_types) and test_hf_vision.py (vision-language composites): `count` totals
equal the library's count, `plan` finds a plan on 8 GPUs, `verify` refuses what the executor
cannot split in one line naming it. A new family adds rows to these lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _hf_hybrid_cases import HYBRID_FIXTURES, HYBRID_VARIANTS
from _hf_more_cases import MORE_FIXTURES, MORE_VARIANTS, RWKV_FIXTURES
from _hf_reference import config
from _hf_vision_cases import VISION_FIXTURES
from modelplan.cli import app
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

HF = Path(__file__).parent / "data" / "hf"
runner = CliRunner()
slow = pytest.mark.slow


def _path(case: str | dict, tmp_path: Path) -> str:
    """A published fixture by name, or a variant's dict written to tmp_path/config.json."""
    if isinstance(case, str):
        return str(HF / f"{case}.json")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(case))
    return str(path)


@pytest.mark.parametrize("name", HYBRID_FIXTURES + MORE_FIXTURES + RWKV_FIXTURES)
def test_count_total_equals_the_library_count(name):
    """`modelplan count <config.json> --json` on every hybrid / issue-16 fixture, total = params.total."""
    result = runner.invoke(app, ["count", str(HF / f"{name}.json"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["params"]["total"] == count_params(from_hf_config(config(name))).total


@slow
@pytest.mark.parametrize("name", VISION_FIXTURES)
def test_count_reports_the_tower_per_image(name):
    """`modelplan count config.json --json` on a composite reports the tower per image: training
    FLOPs 3x forward (forward + backward's two GEMMs each), kept activations."""
    result = runner.invoke(app, ["count", str(HF / f"{name}.json"), "--json"])
    assert result.exit_code == 0, result.output
    vision = json.loads(result.output)["vision"]
    assert vision["training_flops_per_image"] == 3 * vision["forward_flops_per_image"] > 0
    assert vision["activation_bytes_per_image"] > 0


PLANS = [
    # a Mamba-2 and a DeltaNet hybrid
    *[pytest.param(n, ["--json"], id=n, marks=slow) for n in ["nvidia-nemotron-nano-9b-v2",
                                                              "qwen3-next-80b-a3b-instruct"]],
    # Falcon-H1's attention + Mamba-2 blocks (a small variant)
    pytest.param(HYBRID_VARIANTS[11], ["--json"], id="falcon-h1-variant", marks=slow),
    *[pytest.param(n, ["--json"], id=n, marks=slow)
      for n in MORE_FIXTURES if n != "minimax-text-01-hf"],  # 456B: > 8 GPUs
    # DeepSeek-V3.2 and MiniMax-01 variants (the published sizes need more than 8 GPUs)
    *[pytest.param(MORE_VARIANTS[i], ["--json"], id=f"{MORE_VARIANTS[i]['model_type']}-{i}", marks=slow)
      for i in (7, 12)],
    *[pytest.param(n, ["--json"], id=n) for n in RWKV_FIXTURES],
    # composites, rendered as the table (no --json)
    *[pytest.param(n, [], id=n, marks=slow) for n in VISION_FIXTURES],
]


@pytest.mark.parametrize(("case", "extra"), PLANS)
def test_plan_runs_on_8_gpus(case, extra, tmp_path):
    """`modelplan plan <config.json> --gpus 8` finds a plan."""
    result = runner.invoke(app, ["plan", _path(case, tmp_path), "--gpus", "8", *extra])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("name", "extra", "feature"), [
    ("bamba-9b", ["--tp", "2"], "mamba2.groups (1)"),  # one group: its gated norm would span the tp ranks
    ("lfm2-1.2b", [], "layer_types=short_conv"),
    ("trinity-mini", [], "moe.score_correction_param"),
    ("deepseek-v3.2", [], "mla.indexer"),
    ("recurrentgemma-2b", [], "layer_types=rglru"),
    ("minimax-text-01-hf", [], "layer_types=lightning"),
    ("rwkv-4-169m-pile", [], "layer_types=rwkv"),
])
def test_verify_refuses_the_mixer_in_one_line(name, extra, feature):
    """A mixer or split the executor cannot make (tests/test_verify_mixers.py runs the ones it
    can): verify names it in one line, no traceback."""
    result = runner.invoke(app, ["verify", str(HF / f"{name}.json"), *extra])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and feature in lines[0] and "Traceback" not in result.output
