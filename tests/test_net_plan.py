"""The planner on networks: kernel FLOPs, memory, the search's answer and its reasons, the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import load_cluster
from modelplan.count.network import count_network_memory, network_layers
from modelplan.errors import SpecError
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.net_evaluator import NetEvaluator
from modelplan.plan.search import search_plans
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

runner = CliRunner()
A100 = load_cluster("dgx-a100")


@pytest.mark.parametrize("name", ["small-cnn", "lstm-lm", "resnet-18"])
def test_planned_gemm_flops_are_three_times_the_counted_matmuls(name):
    """Forward + dgrad + wgrad = 3x the matmul FLOPs of count/network_layers (pinned to torch's
    FlopCounterMode), less the first layer's dgrad (the input needs no gradient)."""
    spec = load_model(name)
    ev = NetEvaluator(spec, TrainingSpec(global_batch=4), A100)
    (stage,) = ev.times(1, 1, 4, 1, 1)
    layers = network_layers(spec)
    first = layers[0].matmul_flops
    assert stage.gemm_flops == 4 * (3 * sum(r.matmul_flops for r in layers) - first)


def test_unsplit_activation_memory_equals_the_count():
    """tp 1, pp 1: one micro-batch in flight, so the planner's activations are exactly
    count_network_memory's (micro_batch x the per-sample bytes of network_layers)."""
    spec = load_model("resnet-18")
    training = TrainingSpec(global_batch=64, precision="bf16")
    est = estimate_plan(spec, training, Plan(dp=8, micro_batch=4), A100)
    assert est.memory[0].activations == count_network_memory(spec, training, 4).activations


def test_weights_per_gpu_are_the_parameters_in_bf16():
    """ResNet-50 under plain DP: 25,557,032 params x 2 B = 51,114,064 B of weights per GPU
    (torchvision's published count, bf16)."""
    est = estimate_plan(load_model("resnet-50"), TrainingSpec(global_batch=256, precision="bf16"),
                        Plan(dp=8, micro_batch=32), A100)
    assert est.memory[0].weights == 25_557_032 * 2


def test_step_terms_add_up():
    """compute + TP + PP + bubble + exposed DP + optimizer = the step."""
    est = estimate_plan(load_model("small-cnn"), TrainingSpec(global_batch=64), Plan(tp=2, pp=2, dp=2, micro_batch=4), A100)
    assert sum(est.step.terms().values()) == pytest.approx(est.step.step_time_s, rel=1e-12)


def test_pipeline_plan_reports_its_stage_boundaries():
    """pp 2 on LeNet: the balanced split is named in the notes."""
    est = estimate_plan(load_model("small-cnn"), TrainingSpec(global_batch=64), Plan(pp=2, dp=4, micro_batch=8), A100)
    assert any(n.startswith("pipeline stages (balanced by training FLOPs): conv1") for n in est.notes)


def test_resnet50_on_a_dgx_a100_prefers_data_parallelism_and_says_why():
    """8 A100s: the best plan is data parallel (tp 1, pp 1, dp 8), with the memory, overlap, TP
    and PP arguments in its notes; model states 25,557,032 x 18 B = 460.0 MB (hand: 2 + 4 + 12)."""
    result = search_plans(load_model("resnet-50"), TrainingSpec(global_batch=256, precision="bf16"), A100, 8)
    best = result.best[0]
    assert (best.plan.tp, best.plan.pp, best.plan.dp) == (1, 1, 8)
    notes = " ".join(best.notes)
    assert "25,557,032 params x 18 B" in notes and "= 460.0 MB" in notes
    assert "why not tensor parallel" in notes and "why not pipeline parallel" in notes


def test_lstm_is_split_by_tp_only_at_the_decoder():
    """Recurrent layers are dp/pp only: tp 2 splits just the decoder Linear."""
    ev = NetEvaluator(load_model("lstm-lm"), TrainingSpec(global_batch=8), A100)
    assert ev.splits(2) == 1


def test_a_network_plan_breaking_rules_is_one_line():
    """pp 6 > the MLP's 5 units, and sequence parallelism: both named."""
    with pytest.raises(SpecError, match=r"sequence_parallel applies to transformers, not network 'mlp'; "
                                        r"pp \* vpp \(6 \* 1\) must not exceed the network's units \(5\)"):
        estimate_plan(load_model("mlp"), TrainingSpec(global_batch=6), Plan(pp=6, tp=2, sequence_parallel=True), A100)


def test_cli_plan_resnet50_dgx_a100():
    """`modelplan plan resnet-50 --gpus 8 --cluster dgx-a100`: ranked table in samples/s, the
    best plan dp 8, and the reasons for data parallelism."""
    result = runner.invoke(app, ["plan", "resnet-50", "--gpus", "8", "--cluster", "dgx-a100"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "samples/s" in out and "tp1 pp1 dp8" in out
    assert "fit on one GPU" in out and "why not tensor parallel" in out and "why not pipeline parallel" in out


def test_cli_plan_document_of_a_network_verifies(tmp_path):
    """`plan mlp --gpus 4 -o plan.json` then `verify plan.json`: the document round-trips."""
    doc = tmp_path / "plan.json"
    result = runner.invoke(app, ["plan", "mlp", "--gpus", "4", "--batch", "16", "-o", str(doc)])
    assert result.exit_code == 0, result.output
    assert json.loads(doc.read_text())["model"]["kind"] == "network"
    result = runner.invoke(app, ["verify", str(doc)])
    assert result.exit_code == 0, result.output
