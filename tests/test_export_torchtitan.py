"""torchtitan export: the job data and the rendered config module (no torchtitan needed here;
tests/test_export_engines.py loads every golden export with torchtitan 0.3.0 itself).

Sources: torchtitan 0.3.0 torchtitan/config/configs.py (ParallelismConfig, TrainingConfig),
torchtitan/trainer.py (batch and CUDA-graph rules), torchtitan/distributed/pipeline_parallel.py
(stage v on pp rank v % pp), torch.distributed.pipelining.schedules.get_schedule_class.
"""

import ast

import pytest

from modelplan.export.torchtitan import (
    FP8_CONVERTER, SCHEDULE_NAMES, stage_modules, to_torchtitan, torchtitan_job,
)
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec

# Llama-3-70B (HF config.json: 80 layers, hidden 8192, 64 heads, 8 kv heads, intermediate 28672,
# vocab 128256).
LLAMA3_70B = TransformerSpec(name="llama-3-70b", layers=80, hidden=8192, heads=64, kv_heads=8,
                             ffn_hidden=28672, vocab=128256, max_positions=8192)
MIXTRAL = TransformerSpec(name="mixtral", layers=32, hidden=4096, heads=32, kv_heads=8,
                          ffn_hidden=14336, vocab=32000,
                          moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=14336))


def test_llama3_70b_recipe_degrees():
    """torchtitan's llama3_70b recipe (64 GPUs): tensor_parallel_degree 8, the rest (64 / 8 = 8)
    FSDP-sharded, local_batch_size 8, seq_len 8192, full activation checkpointing."""
    job = torchtitan_job(LLAMA3_70B, TrainingSpec(global_batch=64, seq_len=8192, recompute="full"),
                         Plan(dp=8, tp=8, zero=3, micro_batch=8, sequence_parallel=True))
    par, train = job.parallelism, job.training
    assert (par["tensor_parallel_degree"], par["data_parallel_shard_degree"],
            par["data_parallel_replicate_degree"], par["pipeline_parallel_degree"]) == (8, 8, 1, 1)
    assert (train["local_batch_size"], train["seq_len"]) == (8, 8192)
    assert job.activation_checkpoint == "full"
    assert par["fsdp_reshard_after_forward"] == "always"  # ZeRO-3: weights freed after forward


def test_pipeline_local_batch_holds_all_microbatches():
    """configs.py: with PP, local_batch_size is split into micro-batches of
    pipeline_parallel_microbatch_size. dp 2, pp 4, micro 2, batch 64: 64 / (2 * 2) = 16
    micro-batches -> local 32; trainer.py: global % (local * dp) = 64 % 64 = 0."""
    job = torchtitan_job(LLAMA3_70B, TrainingSpec(global_batch=64), Plan(dp=2, pp=4, micro_batch=2))
    assert job.training["local_batch_size"] == 32
    assert job.parallelism["pipeline_parallel_microbatch_size"] == 2
    assert job.training["disable_cuda_graphs"] is True  # trainer.py: CUDA graphs refuse PP


def test_uneven_stages_are_modelplans_split():
    """Llama 3 405B: 126 layers on 16 stages = 7 + 14 x 8 + 7 (Dubey et al. 2024, sec. 3.3.2);
    embedding with the first stage, final norm and head with the last."""
    stages = stage_modules(126, 16, 1)
    layers = [sum(name.startswith("layers.") for name in stage) for stage in stages]
    assert layers == [7] + [8] * 14 + [7]
    assert stages[0][0] == "tok_embeddings" and stages[-1][-2:] == ["norm", "lm_head"]
    assert [n for s in stages for n in s if n.startswith("layers.")] == [
        f"layers.{i}" for i in range(126)]


def test_interleaved_stages_one_list_per_virtual_stage():
    """80 layers over pp 4 x vpp 2: 8 lists of 10 layers, schedule Interleaved1F1B."""
    job = torchtitan_job(LLAMA3_70B, TrainingSpec(global_batch=64),
                         Plan(dp=2, pp=4, vpp=2, schedule="interleaved"))
    parts = job.parallelism["module_fqns_per_model_part"]
    assert len(parts) == 8
    assert job.parallelism["pipeline_parallel_schedule"] == "Interleaved1F1B"


def test_plain_data_parallel_is_ddp():
    """ZeRO-0 with only data parallelism: replicate degree = dp, shard degree 1 (DDP)."""
    par = torchtitan_job(LLAMA3_70B, TrainingSpec(global_batch=64), Plan(dp=8)).parallelism
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (8, 1)


def test_experts_need_the_fsdp_axis():
    """configs.py expert_parallel_degree: EP borrows ranks from dp_shard * cp * tp, so an EP plan
    shards data parallel (dp_shard 8 x tp 1 = 8 = efsdp 1 x ep 8) even at ZeRO-0, with a note."""
    job = torchtitan_job(MIXTRAL, TrainingSpec(global_batch=64), Plan(dp=8, ep=8))
    assert job.parallelism["data_parallel_shard_degree"] == 8
    assert job.parallelism["expert_parallel_degree"] == 8
    assert job.model.moe_layers == tuple(range(32)) and job.model.family == "qwen3"
    assert any("ZeRO-0" in note for note in job.notes)


def test_sequence_parallel_follows_the_plan():
    """configs.py enable_sequence_parallel (default True) is the plan's sequence_parallel."""
    job = torchtitan_job(LLAMA3_70B, TrainingSpec(global_batch=64), Plan(dp=4, tp=2))
    assert job.parallelism["enable_sequence_parallel"] is False


def test_module_is_python_with_the_planned_sizes():
    """The module parses, defines modelplan_job, and carries the spec's sizes as constants."""
    export = to_torchtitan(LLAMA3_70B, TrainingSpec(global_batch=64, precision="fp8"),
                           Plan(dp=8, tp=8, zero=3))
    tree = ast.parse(export.text)
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"modelplan_job", "modelplan_model"} <= functions
    constants = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                 and node.targets[0].id.isupper() and isinstance(node.value, ast.Constant)}
    assert (constants["LAYERS"], constants["DIM"], constants["N_KV_HEADS"],
            constants["FFN_HIDDEN"], constants["VOCAB"]) == (80, 8192, 8, 28672, 128256)
    assert f"[{FP8_CONVERTER}.Config()]" in export.text
    assert export.engine_version == "0.3.0"


def test_notes_for_what_torchtitan_lacks():
    """SGD and fp16 are not torchtitan options: both are named in the notes."""
    job = torchtitan_job(LLAMA3_70B, TrainingSpec(global_batch=64, optimizer="sgd",
                                                  precision="fp16"), Plan(dp=8))
    assert any("sgd" in note for note in job.notes)
    assert any("fp16" in note for note in job.notes)
    assert job.optimizer == "AdamW"


@pytest.mark.slow
@pytest.mark.torch
def test_schedule_names_are_torch_schedules():
    """Each schedule name resolves in torch.distributed.pipelining's get_schedule_class
    (slow: importing torch takes ~10 s on the CI's 2 cores)."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    for name in SCHEDULE_NAMES.values():
        assert schedules.get_schedule_class(name).__name__.lower().endswith(name.lower())


def test_mtp_not_written_is_noted():
    """A model with a multi-token-prediction module (DeepSeek-V3 trains one: its config's
    num_nextn_predict_layers 1) is priced with it; this export writes no MTP field, so it says so,
    and a model without MTP gets no such note."""
    training = TrainingSpec(global_batch=64, seq_len=8192)
    plan = Plan(dp=8, tp=8, zero=3, micro_batch=8, sequence_parallel=True)
    with_mtp = torchtitan_job(LLAMA3_70B.model_copy(update={"mtp_layers": 1}), training, plan)
    assert [n for n in with_mtp.notes if n.startswith("multi-token prediction (1 module(s))")]
    assert not [n for n in torchtitan_job(LLAMA3_70B, training, plan).notes if "multi-token" in n]
