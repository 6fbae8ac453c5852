"""torchtitan export: golden tests against pytorch/torchtitan's job config and presets.

Sources: torchtitan/config/job_config.py (commit 000204a4) for field names,
torchtitan/models/llama3/train_configs/llama3_70b.toml (commit 038d5fd1) for a preset,
torch.distributed.pipelining.schedules.get_schedule_class for schedule names.
"""

import tomllib

import pytest

from modelplan.export.torchtitan import SCHEDULE_NAMES, to_torchtitan, torchtitan_sections
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

# Fields of the dataclasses in job_config.py that this export may write.
JOB_CONFIG_FIELDS = {
    "model": {"name", "flavor", "converters"},
    "optimizer": {"name", "lr", "beta1", "beta2", "eps", "weight_decay"},
    "training": {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param",
                 "mixed_precision_reduce"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree",
                    "fsdp_reshard_after_forward", "tensor_parallel_degree",
                    "enable_async_tensor_parallel", "pipeline_parallel_degree",
                    "pipeline_parallel_schedule", "pipeline_parallel_microbatch_size",
                    "pipeline_parallel_layers_per_stage", "context_parallel_degree",
                    "expert_parallel_degree"},
    "activation_checkpoint": {"mode", "selective_ac_option"},
}

# Llama-3-70B (HF config.json: 80 layers, hidden 8192, 64 heads, 8 kv heads, intermediate 28672,
# vocab 128256).
LLAMA3_70B = TransformerSpec(name="llama-3-70b", layers=80, hidden=8192, heads=64, kv_heads=8,
                             ffn_hidden=28672, vocab=128256, max_positions=8192)


def _parsed(model, training, plan):
    return tomllib.loads(to_torchtitan(model, training, plan).text)


def test_llama3_70b_preset():
    """llama3_70b.toml (64 GPUs): tensor_parallel_degree 8, data_parallel_shard_degree -1 (the
    rest: 64 / 8 = 8), replicate 1, pipeline 1, context 1, local_batch_size 8, seq_len 8192,
    activation_checkpoint mode 'full', optimizer 'AdamW'. Our plan: dp 8 x tp 8, ZeRO-3,
    micro-batch 8, global batch 8 * 8 = 64 (no accumulation)."""
    doc = _parsed(LLAMA3_70B, TrainingSpec(global_batch=64, seq_len=8192, recompute="full"),
                  Plan(dp=8, tp=8, zero=3, micro_batch=8, sequence_parallel=True))
    par, train = doc["parallelism"], doc["training"]
    assert (par["tensor_parallel_degree"], par["data_parallel_shard_degree"],
            par["data_parallel_replicate_degree"], par["pipeline_parallel_degree"],
            par["context_parallel_degree"]) == (8, 8, 1, 1, 1)
    assert (train["local_batch_size"], train["seq_len"]) == (8, 8192)
    assert doc["activation_checkpoint"]["mode"] == "full"
    assert doc["optimizer"]["name"] == "AdamW"


@pytest.mark.parametrize("plan", [
    Plan(dp=4, tp=2, pp=2, vpp=2, schedule="interleaved", sequence_parallel=True, zero=1,
         recompute="selective"),
    Plan(dp=8, cp=2, ep=4, zero=3),
    Plan(dp=8),
])
def test_only_job_config_fields(plan):
    """Every section and key exists in job_config.py's dataclasses."""
    doc = _parsed(LLAMA3_70B, TrainingSpec(global_batch=64, precision="fp8"), plan)
    assert set(doc) <= set(JOB_CONFIG_FIELDS)
    for section, table in doc.items():
        assert set(table) <= JOB_CONFIG_FIELDS[section], section


@pytest.mark.slow
@pytest.mark.torch
def test_schedule_names_are_torch_schedules():
    """Each schedule name resolves in torch.distributed.pipelining's get_schedule_class
    (slow: importing torch takes ~10 s on the CI's 2 cores)."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    for name in SCHEDULE_NAMES.values():
        assert schedules.get_schedule_class(name).__name__.lower().endswith(name.lower())


def test_pipeline_local_batch_holds_all_microbatches():
    """job_config.py: micro-batches = local_batch_size / pipeline_parallel_microbatch_size.
    dp 2, pp 4, micro-batch 2, batch 64: 64 / (2 * 2) = 16 micro-batches -> local 32."""
    doc = _parsed(LLAMA3_70B, TrainingSpec(global_batch=64), Plan(dp=2, pp=4, micro_batch=2))
    assert doc["training"]["local_batch_size"] == 32
    assert doc["parallelism"]["pipeline_parallel_microbatch_size"] == 2
    assert doc["training"]["local_batch_size"] // 2 == 16


def test_interleaved_layers_per_stage():
    """80 layers over pp 4 x vpp 2 = 8 virtual stages: 10 layers each."""
    doc = _parsed(LLAMA3_70B, TrainingSpec(global_batch=64),
                  Plan(dp=2, pp=4, vpp=2, schedule="interleaved"))
    assert doc["parallelism"]["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert doc["parallelism"]["pipeline_parallel_layers_per_stage"] == 10


def test_plain_data_parallel_is_ddp():
    """ZeRO-0 with only data parallelism: replicate degree = dp, shard degree 1 (DDP)."""
    doc = _parsed(LLAMA3_70B, TrainingSpec(global_batch=64), Plan(dp=8))
    par = doc["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (8, 1)


def test_zero_stages_map_onto_fsdp_with_a_note():
    """ZeRO-1 has no FSDP2 equivalent: sharded, reshard never, and a note says so."""
    sections, notes = torchtitan_sections(LLAMA3_70B, TrainingSpec(global_batch=64),
                                          Plan(dp=8, zero=1))
    assert sections["parallelism"]["data_parallel_shard_degree"] == 8
    assert sections["parallelism"]["fsdp_reshard_after_forward"] == "never"
    assert any("ZeRO-1" in note for note in notes)


def test_notes_are_toml_comments():
    """Unsupported settings appear as # comments, and the TOML still parses."""
    export = to_torchtitan(LLAMA3_70B, TrainingSpec(global_batch=64, optimizer="sgd",
                                                    precision="fp16"), Plan(dp=8))
    comments = [line for line in export.text.splitlines() if line.startswith("#")]
    assert any("sgd" in line for line in comments)
    assert any("fp16" in line for line in comments)
    tomllib.loads(export.text)


def _torchtitan_config_manager():
    """torchtitan's ConfigManager, loaded without torchtitan/__init__.py (which imports every
    model and needs triton); skipped unless a TOML-era torchtitan (<= 0.2) is installed."""
    import importlib.util
    import os
    import sys
    import types

    if "torchtitan" in sys.modules:  # already loaded (possibly by an earlier call)
        root = list(sys.modules["torchtitan"].__path__)[0]
    else:
        spec = importlib.util.find_spec("torchtitan")
        if spec is None or spec.origin is None:
            pytest.skip("torchtitan is not installed")
        root = os.path.dirname(spec.origin)
    if not os.path.exists(os.path.join(root, "config", "job_config.py")):
        pytest.skip("torchtitan >= 0.3 has no TOML job config")
    if "torchtitan" not in sys.modules:
        package = types.ModuleType("torchtitan")
        package.__path__ = [root]
        sys.modules["torchtitan"] = package
    from torchtitan.config import ConfigManager

    return ConfigManager


@pytest.mark.slow
@pytest.mark.parametrize("plan", [
    Plan(dp=4, tp=2, pp=2, vpp=2, schedule="interleaved", sequence_parallel=True, zero=1),
    Plan(dp=8, cp=2, ep=4, zero=3),
    Plan(dp=8),
])
def test_torchtitan_loads_the_toml(tmp_path, plan):
    """torchtitan's ConfigManager (which rejects unknown field names) loads the export and reads
    back the degrees and batch (checked with torchtitan 0.2.2)."""
    manager = _torchtitan_config_manager()
    path = tmp_path / "job.toml"
    training = TrainingSpec(global_batch=64, seq_len=1024, recompute="selective")
    path.write_text(to_torchtitan(LLAMA3_70B, training, plan).text)
    config = manager().parse_args(["--job.config_file", str(path)])
    par = config.parallelism
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree, par.context_parallel_degree,
            par.expert_parallel_degree) == (plan.tp, plan.pp, plan.cp, plan.ep)
    assert par.data_parallel_shard_degree * par.data_parallel_replicate_degree == plan.dp
    assert (config.training.global_batch_size, config.training.seq_len) == (64, 1024)
    assert config.activation_checkpoint.mode == "selective"
