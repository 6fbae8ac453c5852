"""A plain PyTorch launch for a data-parallel plan: a small JSON config for `torchrun`.

For plans that only replicate or shard over data-parallel ranks (any MLP, CNN or RNN plan, and a
transformer plan with tp = pp = cp = ep = 1). The config names torch 2.13's own APIs:
ZeRO-0 -> `torch.nn.parallel.DistributedDataParallel`; ZeRO-1 -> DDP plus
`torch.distributed.optim.ZeroRedundancyOptimizer` (optimizer states sharded); ZeRO-2 ->
`torch.distributed.fsdp.fully_shard(reshard_after_forward=False)` (weights gathered once per
step, gradients and states sharded); ZeRO-3 -> `fully_shard(reshard_after_forward=True)`.
The training script is the user's (`train.py`): it reads the config, builds the model and wraps
it as `data_parallel` says. Plans with model parallelism are refused with one line.
"""

from __future__ import annotations

import json
from typing import Any

from modelplan.errors import ModelplanError
from modelplan.export.result import Engine, EngineExport, LaunchCommand
from modelplan.export.versions import release
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

CONFIG_FILE = "ddp_config.json"
TRAIN_SCRIPT = "train.py"
WRAPPERS = {
    0: "torch.nn.parallel.DistributedDataParallel",
    1: "torch.nn.parallel.DistributedDataParallel",
    2: "torch.distributed.fsdp.fully_shard",
    3: "torch.distributed.fsdp.fully_shard",
}
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16"}


def check_data_parallel_only(plan: Plan, engine: str = "ddp") -> None:
    """One line naming the first degree a plain data-parallel launch cannot carry."""
    for axis in ("tp", "pp", "cp", "ep"):
        degree = getattr(plan, axis)
        if degree > 1:
            raise ModelplanError(
                f"--to {engine}: the plan has {axis} = {degree}; a plain PyTorch DDP/FSDP launch "
                "carries data parallelism only (export a transformer plan to megatron, "
                "deepspeed or torchtitan)"
            )


def ddp_config(model: TransformerSpec | NetworkSpec, training: TrainingSpec,
               plan: Plan) -> dict[str, Any]:
    """The config dict: wrapper, batch split, precision, optimizer, model."""
    check_data_parallel_only(plan)
    m = plan.num_microbatches(training.global_batch)
    config: dict[str, Any] = {
        "world_size": plan.world_size,
        "data_parallel": WRAPPERS[plan.zero],
        "zero_stage": plan.zero,
        "micro_batch_per_gpu": plan.micro_batch,
        # global = micro * accumulation * dp (the same identity DeepSpeed checks).
        "gradient_accumulation_steps": m,
        "global_batch": training.global_batch,
        "autocast_dtype": None if training.precision == "fp32" else DTYPES[training.precision],
        "optimizer": {"adamw": "torch.optim.AdamW", "adam": "torch.optim.Adam",
                      "sgd": "torch.optim.SGD", "momentum": "torch.optim.SGD"}[training.optimizer],
    }
    if training.optimizer in ("sgd", "momentum"):
        config["optimizer_kwargs"] = {"momentum": 0.9 if training.optimizer == "momentum" else 0.0}
    if plan.zero == 1:
        config["optimizer_wrapper"] = "torch.distributed.optim.ZeroRedundancyOptimizer"
    if plan.zero >= 2:
        config["fully_shard_kwargs"] = {"reshard_after_forward": plan.zero == 3}
    if training.precision == "fp8":
        config["notes"] = ["fp8 matmuls need torchao's Float8Linear in the model; exported as "
                           "bfloat16 autocast"]
    recompute = plan.recompute if plan.recompute is not None else training.recompute
    if recompute != "none":
        config["activation_checkpointing"] = "torch.utils.checkpoint.checkpoint per block"
    config["model"] = model.model_dump(mode="json")
    return config


def to_ddp(
    model: TransformerSpec | NetworkSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: object | None = None,
    version: str | None = None,
) -> EngineExport:
    """ddp_config.json text; the launch runs the user's train.py under torchrun."""
    target = release(Engine.ddp, version)
    config = ddp_config(model, training, plan)
    return EngineExport(
        engine=Engine.ddp,
        engine_version=target.version,
        text=json.dumps(config, indent=2) + "\n",
        unsupported=tuple(config.get("notes", ())),
        filename=CONFIG_FILE,
        launch=LaunchCommand(program=(TRAIN_SCRIPT, "--config", CONFIG_FILE), files=(CONFIG_FILE,)),
    )
