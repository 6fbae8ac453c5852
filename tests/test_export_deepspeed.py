"""DeepSpeed export: golden tests against deepspeedai/DeepSpeed's documentation.

Sources: docs/_pages/config-json.md (commit 00376da4), docs/_tutorials/autotp-training.md
(commit 0e2a0c24), deepspeed/runtime/pipe/engine.py (commit 03f6f75c).
"""

import json

import pytest

from modelplan.export.deepspeed import LAUNCH_KEY, UNSUPPORTED_KEY, deepspeed_config, to_deepspeed
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

MODEL = TransformerSpec(name="llama-3-8b", layers=32, hidden=4096, heads=32, kv_heads=8,
                        ffn_hidden=14336, vocab=128256)

# Top-level keys documented in config-json.md, plus tensor_parallel (autotp-training.md) and
# pipeline (read by pipe/engine.py: self._config.pipeline['activation_checkpoint_interval']).
DOCUMENTED_KEYS = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "optimizer", "zero_optimization", "fp16", "bf16", "activation_checkpointing",
    "tensor_parallel", "pipeline",
}
# config-json.md "Activation Checkpointing" block.
ACTIVATION_CHECKPOINTING_KEYS = {
    "partition_activations", "cpu_checkpointing", "contiguous_memory_optimization",
    "number_checkpoints", "synchronize_checkpoint_boundary", "profile",
}


def test_autotp_tutorial_config():
    """tp=4, ZeRO-2, bf16, micro-batch 1, batch 8 reproduces autotp-training.md's preset example:
    {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
     "zero_optimization": {"stage": 2}, "tensor_parallel": {"autotp_size": 4}}."""
    config = deepspeed_config(MODEL, TrainingSpec(global_batch=8, precision="bf16"),
                              Plan(dp=2, tp=4, zero=2, micro_batch=1))
    expected = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1,
                "bf16": {"enabled": True}, "zero_optimization": {"stage": 2},
                "tensor_parallel": {"autotp_size": 4}}
    assert {k: config.get(k) for k in expected} == expected


def test_batch_identity_of_the_pipeline_engine():
    """pipe/engine.py asserts train_batch_size == micro_batch * micro_batches * dp:
    512 == 4 * gradient_accumulation_steps * 8, so gradient_accumulation_steps = 16."""
    config = deepspeed_config(MODEL, TrainingSpec(global_batch=512),
                              Plan(dp=8, pp=4, micro_batch=4))
    assert config["gradient_accumulation_steps"] == 16
    assert config["train_batch_size"] == 4 * 16 * 8


def test_only_documented_keys():
    """Every key is documented (or a `_modelplan` sibling DeepSpeed ignores)."""
    config = deepspeed_config(MODEL, TrainingSpec(global_batch=64, recompute="full"),
                              Plan(dp=2, tp=2, pp=2, zero=1, micro_batch=2))
    own = {k for k in config if k.startswith("_modelplan")}
    assert own == {UNSUPPORTED_KEY, LAUNCH_KEY}
    assert set(config) - own - DOCUMENTED_KEYS == set()
    assert set(config["activation_checkpointing"]) <= ACTIVATION_CHECKPOINTING_KEYS


def test_fp16_without_bf16():
    """config-json.md: bf16 'cannot be combined with the fp16 mode': fp16 plan -> fp16 only."""
    config = deepspeed_config(MODEL, TrainingSpec(global_batch=8, precision="fp16"), Plan(dp=8))
    assert config["fp16"] == {"enabled": True}
    assert "bf16" not in config


def test_plain_adam_turns_off_adamw_mode():
    """config-json.md: DeepSpeed's Adam has adam_w_mode (default true); plain Adam sets false."""
    config = deepspeed_config(MODEL, TrainingSpec(global_batch=8, optimizer="adam"), Plan(dp=8))
    assert config["optimizer"] == {"type": "Adam", "params": {"adam_w_mode": False}}


def test_zero3_with_pipeline_is_stated():
    """pipe/engine.py: 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'."""
    config = deepspeed_config(MODEL, TrainingSpec(global_batch=8), Plan(dp=2, pp=2, zero=3))
    assert any("ZeRO-3" in note and "pipeline" in note for note in config[UNSUPPORTED_KEY])


def test_zero3_with_autotp_is_not_refused():
    """deepspeed 0.19.8 runtime/engine.py: 'AutoTP + ZeRO stage 3 is supported for both inference
    and training' (the autotp-training.md limitation is out of date): no note, AutoTP kept."""
    config = deepspeed_config(MODEL, TrainingSpec(global_batch=8), Plan(dp=2, tp=4, zero=3))
    assert not any("AutoTP" in note for note in config[UNSUPPORTED_KEY])
    assert config["tensor_parallel"] == {"autotp_size": 4}


def test_text_is_the_config_as_json():
    """The exported text parses back to the same dict, notes included."""
    training, plan = TrainingSpec(global_batch=8), Plan(dp=2, tp=2, cp=2)
    export = to_deepspeed(MODEL, training, plan)
    assert json.loads(export.text) == deepspeed_config(MODEL, training, plan)
    assert export.unsupported and export.filename == "ds_config.json"


@pytest.mark.slow
@pytest.mark.parametrize("plan, training", [
    (Plan(dp=2, tp=2, pp=2, zero=1, micro_batch=2),
     TrainingSpec(global_batch=64, recompute="full")),
    (Plan(dp=8, zero=3, micro_batch=2), TrainingSpec(global_batch=64, precision="fp16",
                                                     optimizer="adam")),
    (Plan(dp=4, tp=2, zero=2), TrainingSpec(global_batch=64, optimizer="momentum",
                                            recompute="selective")),
])
def test_deepspeed_parses_the_config(monkeypatch, plan, training):
    """DeepSpeed's own DeepSpeedConfig accepts the export and reads back the batch split, ZeRO
    stage, precision and AutoTP size (skipped where deepspeed is not installed; checked with
    deepspeed 0.19.8). A stub mpu supplies the data-parallel size, as Megatron's mpu would."""
    ds_runtime_config = pytest.importorskip("deepspeed.runtime.config")
    monkeypatch.setattr(ds_runtime_config.dist, "get_rank", lambda: 0)

    class DataParallelOnly:
        def get_data_parallel_world_size(self):
            return plan.dp

    config = deepspeed_config(MODEL, training, plan)
    parsed = ds_runtime_config.DeepSpeedConfig(json.loads(json.dumps(config)),
                                               mpu=DataParallelOnly())
    assert parsed.train_batch_size == training.global_batch
    accumulation = training.global_batch // (plan.micro_batch * plan.dp)
    assert parsed.gradient_accumulation_steps == accumulation
    assert parsed.zero_optimization_stage == plan.zero
    assert parsed.float16_config.enabled == (training.precision == "fp16")
    if plan.tp > 1:
        assert parsed.tensor_parallel_config.autotp_size == plan.tp


def test_mtp_left_to_the_training_script_is_noted():
    """ds_config carries no model: a multi-token-prediction module (DeepSeek-V3's
    num_nextn_predict_layers 1) that the plan prices must be built by the user's script, and the
    config's unsupported list says so; a model without MTP gets no such line."""
    training, plan = TrainingSpec(global_batch=8, precision="bf16"), Plan(dp=8)
    noted = deepspeed_config(MODEL.model_copy(update={"mtp_layers": 2}), training, plan)[UNSUPPORTED_KEY]
    assert [n for n in noted if n.startswith("multi-token prediction (2 module(s))")]
    assert not [n for n in deepspeed_config(MODEL, training, plan)[UNSUPPORTED_KEY] if "multi-token" in n]
