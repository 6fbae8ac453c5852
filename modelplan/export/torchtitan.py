"""A torchtitan job-config TOML: `[parallelism]`, `[training]`, `[activation_checkpoint]`.

Field names from pytorch/torchtitan `torchtitan/config/job_config.py` at commit
000204a4a8bf3d0f31adc44fc29855fbb6ea13d8 (dataclasses Parallelism, Training, ActivationCheckpoint,
Optimizer, Model); behaviour notes from `torchtitan/models/llama3/infra/parallelize.py` at
018740b7aae7846d24954539244c78215dbd181f (TP always applies SequenceParallel to the norms; DDP
refuses > 1-D meshes; `fsdp_reshard_after_forward` never/always) and
`torchtitan/components/optimizer.py` at 018740b7 (optimizer names Adam, AdamW). Pipeline schedule
names are torch's `torch.distributed.pipelining.schedules.get_schedule_class` keys.

The target is torchtitan's TOML job config (`--job.config_file`), read by torchtitan <= 0.2
(checked: torchtitan 0.2.2's ConfigManager, which rejects unknown field names, loads these files);
torchtitan 0.3 replaced TOML files with Python config registries.

torchtitan shards data parallelism with FSDP2, so ZeRO stages map onto FSDP settings; the model
itself is a registry `name`/`flavor`. What TOML cannot carry is written as `#` comments.
"""

from __future__ import annotations

from typing import Any

from modelplan.export.result import Engine, EngineExport
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

TORCHTITAN_SOURCE = (
    "pytorch/torchtitan torchtitan/config/job_config.py @ 000204a4a8bf3d0f31adc44fc29855fbb6ea13d8"
)

# modelplan schedule -> torch.distributed.pipelining schedule name.
SCHEDULE_NAMES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}


def _data_parallel(plan: Plan, notes: list[str]) -> dict[str, Any]:
    """ZeRO stage -> FSDP2 shard/replicate degrees and reshard-after-forward policy."""
    if plan.dp == 1:
        return {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": 1}
    if plan.zero == 0 and plan.world_size == plan.dp:
        return {"data_parallel_replicate_degree": plan.dp, "data_parallel_shard_degree": 1}
    if plan.zero == 0:
        notes.append(
            "ZeRO-0 (replicated) data parallel with other parallelism: torchtitan's DDP runs on "
            "1-D meshes only, so this uses FSDP with reshard_after_forward = never"
        )
    elif plan.zero in (1, 2):
        notes.append(
            f"ZeRO-{plan.zero}: torchtitan shards with FSDP2; reshard_after_forward = never keeps "
            "gathered weights from forward to backward, but weights are still sharded at rest"
        )
    policy = "always" if plan.zero == 3 else "never"
    return {
        "data_parallel_replicate_degree": 1,
        "data_parallel_shard_degree": plan.dp,
        "fsdp_reshard_after_forward": policy,
    }


def torchtitan_sections(
    model: TransformerSpec, training: TrainingSpec, plan: Plan
) -> tuple[dict[str, dict[str, Any]], tuple[str, ...]]:
    """The TOML tables (section -> key -> value) and what torchtitan cannot express."""
    notes: list[str] = []
    m = plan.num_microbatches(training.global_batch)
    parallelism: dict[str, Any] = _data_parallel(plan, notes)
    parallelism["tensor_parallel_degree"] = plan.tp
    parallelism["enable_async_tensor_parallel"] = False
    parallelism["pipeline_parallel_degree"] = plan.pp
    if plan.pp > 1:
        parallelism["pipeline_parallel_schedule"] = SCHEDULE_NAMES[plan.schedule]
        parallelism["pipeline_parallel_microbatch_size"] = plan.micro_batch
        if plan.vpp > 1:
            chunks = plan.pp * plan.vpp
            if model.layers % chunks:
                notes.append(f"layers ({model.layers}) not divisible by pp * vpp ({chunks}): "
                             "set pipeline_parallel_split_points by hand")
            else:
                parallelism["pipeline_parallel_layers_per_stage"] = model.layers // chunks
    parallelism["context_parallel_degree"] = plan.cp
    parallelism["expert_parallel_degree"] = plan.ep
    if plan.tp > 1 and not plan.sequence_parallel:
        notes.append("tensor parallel without sequence parallel: torchtitan always shards the "
                     "norms over the sequence (SequenceParallel) under TP")
    if plan.ep > 1 and parallelism["data_parallel_shard_degree"] * plan.cp < plan.ep:
        notes.append(f"expert parallel ({plan.ep}) needs cp <= ep <= dp_shard * cp in torchtitan")
    if plan.cp > 1 and training.seq_len % (plan.tp * 2 * plan.cp):
        notes.append(f"seq_len ({training.seq_len}) must be divisible by tp * 2 * cp "
                     f"({plan.tp * 2 * plan.cp}) in torchtitan")

    # local_batch_size is per data-parallel rank; with PP it is split into micro-batches of
    # pipeline_parallel_microbatch_size, without PP the rest is gradient accumulation
    # (job_config.py, Training.local_batch_size / global_batch_size).
    local = plan.micro_batch * m if plan.pp > 1 else plan.micro_batch
    training_table: dict[str, Any] = {
        "local_batch_size": local,
        "global_batch_size": training.global_batch,
        "seq_len": training.seq_len,
    }
    if training.precision in ("bf16", "fp8"):
        training_table["mixed_precision_param"] = "bfloat16"
    elif training.precision == "fp32":
        training_table["mixed_precision_param"] = "float32"
    else:
        training_table["mixed_precision_param"] = "bfloat16"
        notes.append("fp16: torchtitan's mixed_precision_param is bfloat16 or float32; "
                     "exported as bfloat16")
    if training.grad_dtype == "same" and training.precision != "fp32":
        notes.append("gradients in the compute dtype: torchtitan reduces in float32 "
                     "(mixed_precision_reduce)")

    recompute = plan.recompute if plan.recompute is not None else training.recompute
    checkpoint: dict[str, Any] = {"mode": recompute}
    if recompute == "selective":
        checkpoint["selective_ac_option"] = "op"
        notes.append("selective recompute: torchtitan's op-level policy saves matmul outputs and "
                     "recomputes the rest, close to but not exactly Megatron's core attention")

    model_table: dict[str, Any] = {}
    if training.precision == "fp8":
        model_table["converters"] = ["float8"]
    notes.append(
        f"model: pick the torchtitan [model] name/flavor with layers={model.layers} "
        f"hidden={model.hidden} heads={model.heads} kv_heads={model.num_kv_heads} "
        f"ffn_hidden={model.ffn_hidden} vocab={model.vocab}"
        + (f" moe={model.moe.num_experts}x top{model.moe.top_k}" if model.moe else "")
    )
    if model.arch == "encoder":
        notes.append("encoder (BERT) models are not among torchtitan's model families")

    optimizer: dict[str, Any] = {}
    if training.optimizer in ("adam", "adamw"):
        optimizer["name"] = {"adam": "Adam", "adamw": "AdamW"}[training.optimizer]
    else:
        notes.append(f"optimizer '{training.optimizer}': torchtitan builds Adam or AdamW only")
    sections = {
        "model": model_table,
        "optimizer": optimizer,
        "training": training_table,
        "parallelism": parallelism,
        "activation_checkpoint": checkpoint,
    }
    return sections, tuple(notes)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def to_torchtitan(
    model: TransformerSpec, training: TrainingSpec, plan: Plan, cluster: Cluster | None = None
) -> EngineExport:
    """The job-config TOML text; notes as comments at the top."""
    sections, notes = torchtitan_sections(model, training, plan)
    lines = [
        f"# torchtitan job config for {model.name}: dp={plan.dp} tp={plan.tp} pp={plan.pp} "
        f"vpp={plan.vpp} cp={plan.cp} ep={plan.ep} zero={plan.zero}",
        f"# Generated by modelplan; field names from {TORCHTITAN_SOURCE}.",
        "# TOML job config of torchtitan <= 0.2 (--job.config_file); 0.3 uses Python configs.",
        f"# Launch on {plan.world_size} GPUs (e.g. NGPU={plan.world_size} ./run_train.sh).",
    ]
    if notes:
        lines.append("# Not expressible in torchtitan (check these by hand):")
        lines += [f"#   - {note}" for note in notes]
    for name, table in sections.items():
        if not table:
            continue
        lines += ["", f"[{name}]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
    lines.append("")
    return EngineExport(
        engine=Engine.torchtitan,
        text="\n".join(lines),
        unsupported=notes,
        filename="torchtitan.toml",
    )
