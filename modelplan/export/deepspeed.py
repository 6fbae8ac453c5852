"""A DeepSpeed `ds_config.json` for a plan.

Key names from deepspeedai/DeepSpeed `docs/_pages/config-json.md` at commit
00376da49967bc6a15d70a550200ac67277b1fb4 (batch sizes, optimizer, fp16/bf16, zero_optimization,
activation_checkpointing), `docs/_tutorials/autotp-training.md` at
0e2a0c24aa833dbf8e9ba5f4c4f8785021ac3fc2
(`tensor_parallel.autotp_size`; that tutorial's "ZeRO-3 unsupported" is out of date) and
`deepspeed/runtime/pipe/engine.py` at 03f6f75c5caadf213b53a7b3f5438bb46a30d278 (pipeline engine:
`pipeline.activation_checkpoint_interval`; asserts ZeRO stage < 2 under pipeline parallelism).
The release written for is `modelplan.export.versions` (deepspeed 0.19.8, whose
`runtime/engine.py` supports AutoTP with ZeRO stage 3); tests/test_export_engines.py feeds every
golden export to that release's own `DeepSpeedConfig` in CI.

DeepSpeed takes pipeline stages, expert parallelism and the model itself in code, not in the
config; what the config cannot carry is listed under the sibling key `_modelplan_unsupported`
(DeepSpeed ignores keys it does not know).
"""

from __future__ import annotations

import json
from typing import Any

from modelplan.export.mechanisms import deepspeed_mechanisms
from modelplan.export.result import Engine, EngineExport, LaunchCommand
from modelplan.export.versions import release
from modelplan.plan.deepspeed_partition import parameters_split
from modelplan.plan.stages import split_layers
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

DEEPSPEED_SOURCE = (
    "deepspeedai/DeepSpeed docs/_pages/config-json.md @ 00376da49967bc6a15d70a550200ac67277b1fb4"
)
UNSUPPORTED_KEY = "_modelplan_unsupported"
"""Sibling key listing what DeepSpeed cannot express from the plan."""
TRAIN_SCRIPT = "train.py"
"""The user's training script: it builds the model and calls deepspeed.initialize(config=...)."""
LAUNCH_KEY = "_modelplan_launch"
"""Sibling key with the world size and degrees the config assumes (launch on that many GPUs)."""


def _optimizer(training: TrainingSpec) -> dict[str, Any]:
    # DeepSpeed's "Adam" applies AdamW decay unless adam_w_mode is false (config-json.md, Adam).
    if training.optimizer == "adamw":
        return {"type": "AdamW", "params": {}}
    if training.optimizer == "adam":
        return {"type": "Adam", "params": {"adam_w_mode": False}}
    # Other names are imported from torch.optim (config-json.md, optimizer.type).
    momentum = 0.9 if training.optimizer == "momentum" else 0.0
    return {"type": "SGD", "params": {"momentum": momentum}}


def deepspeed_config(model: TransformerSpec, training: TrainingSpec, plan: Plan) -> dict[str, Any]:
    """The ds_config dict; key `_modelplan_unsupported` lists what DeepSpeed cannot express."""
    notes: list[str] = []
    m = plan.num_microbatches(training.global_batch)
    # train_batch_size = micro * gradient_accumulation_steps * dp (config-json.md, batch note;
    # pipe/engine.py asserts it with the data-parallel size).
    config: dict[str, Any] = {
        "train_batch_size": training.global_batch,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": m,
        "optimizer": _optimizer(training),
        "zero_optimization": {"stage": plan.zero},
    }
    if training.precision in ("bf16", "fp8"):
        config["bf16"] = {"enabled": True}
    elif training.precision == "fp16":
        config["fp16"] = {"enabled": True}
    if training.precision == "fp8":
        notes.append("fp8 matmuls: DeepSpeed's config has no fp8 switch (use Transformer Engine in "
                     "the model); exported as bf16")
    if not training.uses_master_weights and training.precision != "fp32":
        notes.append("no fp32 master weights: bf16/fp16 master weights need ZeRO-Offload "
                     "in DeepSpeed")
    notes.append("optimizer.params: learning rate, betas and weight decay are not part of a plan")
    notes.append(f"the model is built in code: {TRAIN_SCRIPT} is your script, which builds it and "
                 "calls deepspeed.initialize(config='ds_config.json')")
    if model.mtp_layers:
        notes.append(f"multi-token prediction ({model.mtp_layers} module(s)): the plan prices it; the model "
                     f"{TRAIN_SCRIPT} builds must include it")

    recompute = plan.recompute if plan.recompute is not None else training.recompute
    if recompute != "none":
        config["activation_checkpointing"] = {
            "partition_activations": plan.tp > 1,
            "cpu_checkpointing": False,
            "contiguous_memory_optimization": False,
            "synchronize_checkpoint_boundary": False,
        }
        notes.append(
            f"recompute '{recompute}': DeepSpeed recomputes what the model wraps in "
            "deepspeed.checkpointing.checkpoint; the config cannot pick layers or attention only"
        )

    if plan.tp > 1:
        config["tensor_parallel"] = {"autotp_size": plan.tp}
    if plan.sequence_parallel:
        notes.append("Megatron sequence parallelism: AutoTP has no equivalent")
    if plan.pp > 1:
        if recompute == "full":
            config["pipeline"] = {"activation_checkpoint_interval": 1}
        notes.append(
            f"pipeline parallel ({plan.pp} stages): build the model as "
            f"deepspeed.pipe.PipelineModule(layers, num_stages={plan.pp}) in code"
        )
        counts = split_layers(model.layers, plan.pp, plan.stage_split)
        if plan.vpp == 1:  # deepspeed/runtime/pipe/module.py _partition_layers: 'parameters' (the
            # default, partition_balanced over each layer's parameter count), 'uniform', 'type:<regex>'
            engine = parameters_split(model, plan.tp, plan.pp)
            if engine == counts:
                notes.append(f"stages of {list(counts)} blocks: PipelineModule's default partition_method "
                             "'parameters' places the same")
            else:
                notes.append(
                    f"stages of {list(counts)} blocks; PipelineModule's default partition_method 'parameters' "
                    f"would place {list(engine)}, and no method ('parameters', 'uniform', 'type:<regex>') takes "
                    "stage boundaries: set them in code"
                )
        if plan.zero >= 2:
            notes.append(
                f"ZeRO-{plan.zero} with pipeline parallel: DeepSpeed's pipeline engine asserts "
                "ZeRO stage < 2"
            )
        if plan.vpp > 1:
            notes.append(f"interleaved schedule (vpp {plan.vpp}): DeepSpeed's pipeline has no "
                         "virtual stages")
        if plan.schedule == "gpipe":
            notes.append("GPipe schedule: DeepSpeed's pipeline engine runs its own 1F1B-style "
                         "TrainSchedule")
    if plan.cp > 1:
        notes.append(f"context parallel ({plan.cp}): not in the config; DeepSpeed-Ulysses (cp_comm_type a2a, "
                     "the all-to-all of Q, K, V this plan prices by default for DeepSpeed) is set up in code "
                     "(deepspeed.sequence.layer.DistributedAttention over a sequence-parallel group of cp ranks)")
    if model.moe is not None:
        notes.append(
            f"MoE with expert parallel {plan.ep}: wrap experts in deepspeed.moe.layer.MoE("
            f"num_experts={model.moe.num_experts}, ep_size={plan.ep}, k={model.moe.top_k}) in code"
        )
    if training.grad_dtype == "same" and training.precision != "fp32":
        notes.append("gradients in the compute dtype: not expressed (DeepSpeed picks its own)")
    deepspeed_mechanisms(config["zero_optimization"], plan, notes)
    config[UNSUPPORTED_KEY] = notes
    config[LAUNCH_KEY] = {
        "world_size": plan.world_size,
        "dp": plan.dp,
        "tp": plan.tp,
        "pp": plan.pp,
        "cp": plan.cp,
        "ep": plan.ep,
    }
    return config


def to_deepspeed(
    model: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    version: str | None = None,
) -> EngineExport:
    """ds_config.json text (2-space indent) with the `_modelplan_unsupported` notes inside."""
    target = release(Engine.deepspeed, version)
    config = deepspeed_config(model, training, plan)
    return EngineExport(
        engine=Engine.deepspeed,
        engine_version=target.version,
        text=json.dumps(config, indent=2) + "\n",
        unsupported=tuple(config[UNSUPPORTED_KEY]),
        filename="ds_config.json",
        launch=LaunchCommand(
            program=(TRAIN_SCRIPT, "--deepspeed", "--deepspeed_config", "ds_config.json"),
            files=("ds_config.json",),
        ),
    )
