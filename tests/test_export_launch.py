"""`modelplan launch` and the export edge cases a new user hits (network plans, versions),
through Typer's CliRunner; the torchrun / sbatch text against torch's and SLURM's option names."""

import json

from typer.testing import CliRunner

from test_cli_export import _one_line_error

from modelplan.cli import app
from modelplan.export.cluster_launch import launch_text
from modelplan.export.ddp import ddp_config
from modelplan.export.engines import export_plan
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

runner = CliRunner()
MODEL = TransformerSpec(name="llama-3-8b", layers=32, hidden=4096, heads=32, kv_heads=8,
                        ffn_hidden=14336, vocab=128256, max_positions=8192)
TRAINING = TrainingSpec(global_batch=64, seq_len=8192)
PLAN_16 = Plan(dp=4, tp=2, pp=2, zero=1, sequence_parallel=True)
MLP = NetworkSpec(name="mlp", input_shape=[2], layers=[
    {"type": "linear", "out_features": 3}, {"type": "sigmoid"},
    {"type": "linear", "out_features": 1}])


def _document(tmp_path, model, plan, training=TRAINING):
    path = tmp_path / "plan.json"
    path.write_text(export_plan("json", model, training, plan).text)
    return path


def test_launch_prints_a_torchrun_line_per_node(tmp_path):
    """16 ranks on 2 x 8: torchrun --nnodes 2 --nproc-per-node 8 with a c10d rendezvous
    (torch.distributed.run options), then Megatron's script and the plan's degrees."""
    result = runner.invoke(app, ["launch", str(_document(tmp_path, MODEL, PLAN_16)), "--to",
                                 "megatron", "--nodes", "2", "--gpus-per-node", "8"])
    assert result.exit_code == 0, result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d ")
    assert " pretrain_gpt.py " in line and "--tensor-model-parallel-size 2" in line
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in result.output


def test_launch_slurm_script(tmp_path):
    """--emit slurm: #SBATCH --nodes/--ntasks-per-node=1/--gpus-per-node, srun torchrun."""
    result = runner.invoke(app, ["launch", str(_document(tmp_path, MODEL, PLAN_16)), "--to",
                                 "torchtitan", "--nodes", "2", "--gpus-per-node", "8",
                                 "--emit", "slurm"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith("#!/bin/bash\n")
    for directive in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --gpus-per-node=8"):
        assert directive in text
    assert "srun torchrun --nnodes 2 --nproc-per-node 8" in text
    assert "-m torchtitan.train --module modelplan_torchtitan --config modelplan_job" in text


def test_launch_deepspeed_uses_its_launcher():
    """DeepSpeed's runner: deepspeed --num_nodes N --num_gpus G --hostfile ..."""
    export = export_plan("deepspeed", MODEL, TRAINING, PLAN_16)
    text = launch_text(export, 16, 2, 8)
    assert "deepspeed --num_nodes 2 --num_gpus 8 --hostfile" in text
    assert "--deepspeed_config ds_config.json" in text


def test_launch_geometry_must_match_the_plan(tmp_path):
    """3 nodes x 8 = 24 GPUs for a 16-rank plan is one line naming both numbers."""
    result = runner.invoke(app, ["launch", str(_document(tmp_path, MODEL, PLAN_16)), "--to",
                                 "megatron", "--nodes", "3", "--gpus-per-node", "8"])
    line = _one_line_error(result)
    assert "24" in line and "16" in line


def test_network_plan_to_an_llm_engine_is_one_line(tmp_path):
    """An MLP plan exported to megatron exits 2 with one line pointing at --to ddp."""
    doc = _document(tmp_path, MLP, Plan(dp=4), TrainingSpec(global_batch=16))
    line = _one_line_error(runner.invoke(app, ["export", str(doc), "--to", "megatron"]))
    assert "--to ddp" in line


def test_network_plan_exports_to_ddp(tmp_path):
    """--to ddp: a JSON config naming torch's DDP wrapper, the batch split and the model."""
    doc = _document(tmp_path, MLP, Plan(dp=4, micro_batch=2), TrainingSpec(global_batch=16))
    result = runner.invoke(app, ["export", str(doc), "--to", "ddp"])
    assert result.exit_code == 0, result.output
    config = json.loads(result.output)
    assert config["data_parallel"] == "torch.nn.parallel.DistributedDataParallel"
    assert config["gradient_accumulation_steps"] == 16 // (2 * 4)
    assert config["model"]["kind"] == "network"


def test_ddp_zero_stages_name_torch_apis():
    """ZeRO-1 -> ZeroRedundancyOptimizer; ZeRO-2/3 -> fully_shard(reshard_after_forward=
    False/True): torch 2.13's own names."""
    one = ddp_config(MLP, TrainingSpec(global_batch=16), Plan(dp=4, zero=1))
    three = ddp_config(MLP, TrainingSpec(global_batch=16), Plan(dp=4, zero=3))
    assert one["optimizer_wrapper"] == "torch.distributed.optim.ZeroRedundancyOptimizer"
    assert three["data_parallel"] == "torch.distributed.fsdp.fully_shard"
    assert three["fully_shard_kwargs"] == {"reshard_after_forward": True}


def test_ddp_refuses_model_parallel_plans(tmp_path):
    """A tp = 2 plan has no plain data-parallel launch: one line naming tp."""
    doc = _document(tmp_path, MODEL, Plan(dp=4, tp=2))
    line = _one_line_error(runner.invoke(app, ["export", str(doc), "--to", "ddp"]))
    assert "tp = 2" in line


def test_unknown_engine_version_lists_the_supported(tmp_path):
    """--engine-version 0.2.2 for torchtitan is one line listing 0.3.0."""
    doc = _document(tmp_path, MODEL, PLAN_16)
    line = _one_line_error(runner.invoke(app, ["export", str(doc), "--to", "torchtitan",
                                               "--engine-version", "0.2.2"]))
    assert "0.3.0" in line


def test_export_states_its_engine_version(tmp_path):
    """--json carries the release the file is written for."""
    doc = _document(tmp_path, MODEL, PLAN_16)
    result = runner.invoke(app, ["export", str(doc), "--to", "deepspeed", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["engine_version"] == "0.19.8"
