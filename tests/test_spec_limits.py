"""Size bounds on every spec (modelplan.specs.limits) and finite floats (modelplan.specs.base)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import cluster_from_dict
from modelplan.errors import SpecError
from modelplan.specs.limits import MAX_LAYERS
from modelplan.specs.load import model_from_dict

TINY = {"layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 128}
runner = CliRunner()


def test_layers_beyond_the_limit_are_one_line_at_once():
    """layers = 10**12 used to run for ever (a list per layer): now one line, immediately."""
    start = time.perf_counter()
    with pytest.raises(SpecError) as exc:
        model_from_dict({**TINY, "layers": 10**12})
    assert time.perf_counter() - start < 1
    assert str(exc.value) == (f"layers (1000000000000) must be <= {MAX_LAYERS:,}: larger than "
                              "anything modelplan sizes (a typo?)")


def test_hf_num_hidden_layers_beyond_the_limit(tmp_path):
    """A HuggingFace config with num_hidden_layers 10**12 is refused in one line (by the HF reader's
    own bound, or the spec's), at once."""
    config = json.loads((Path(__file__).parent / "data" / "hf" / "gpt2.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "n_layer": 10**12, "num_hidden_layers": 10**12}))
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code == 2 and "1000000000000" in result.stderr and result.stderr.count("\n") == 1


def test_network_repeat_times_is_bounded():
    """A network block repeated 10**9 times is refused before the shape walk unrolls it."""
    spec = {"kind": "network", "input_shape": [4],
            "layers": [{"type": "repeat", "times": 10**9, "layers": [{"type": "linear", "out_features": 4}]}]}
    with pytest.raises(SpecError, match=r"times \(1000000000\) must be <="):
        model_from_dict(spec)


def test_batch_beyond_the_limit_is_refused_by_plan():
    """--batch 10**15 (40x slower than 2**20 before: a divisor loop) is refused in one line."""
    result = runner.invoke(app, ["plan", "gpt2", "--gpus", "8", "--batch", str(10**15)])
    assert result.exit_code == 2 and "global_batch (1000000000000000) must be <=" in result.stderr


@pytest.mark.parametrize("table, field", [
    ({"intra": {"latency_us": float("inf")}}, "intra.latency_us"),
    ({"inter": {"bandwidth_gbps": float("nan")}}, "inter.bandwidth_gbps"),
])
def test_cluster_floats_must_be_finite(table, field):
    """`latency_us = inf` in a cluster TOML used to pass validation and turn into NaN."""
    with pytest.raises(SpecError, match=rf"{field}: Input should be a finite number"):
        cluster_from_dict({"extends": "dgx-h100", **table})


def test_capacity_factor_must_be_finite():
    """An MoE capacity_factor of inf is refused where it enters."""
    moe = {"num_experts": 4, "top_k": 2, "expert_ffn_hidden": 64, "capacity_factor": float("inf")}
    with pytest.raises(SpecError, match="moe.capacity_factor: Input should be a finite number"):
        model_from_dict({**TINY, "moe": moe})


def test_accelerator_without_a_peak_for_the_precision(tmp_path):
    """An accelerator listing only fp32 and a bf16 plan: one line saying what to add."""
    path = tmp_path / "c.toml"
    path.write_text('extends = "dgx-h100"\n[accelerator]\nname = "x"\npeak_tflops = {fp32 = 60.0}\n'
                    "memory_gb = 80.0\nmemory_bw_tbps = 3.0\n")
    result = runner.invoke(app, ["plan", "gpt2", "--gpus", "8", "--cluster", str(path)])
    assert result.exit_code == 2
    assert "lists no peak_tflops for precision 'bf16' (it lists: fp32)" in result.stderr
