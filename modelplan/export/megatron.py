"""Megatron-LM command-line arguments for a plan, as a ready-to-paste `torchrun` snippet.

Argument names are those of NVIDIA/Megatron-LM `megatron/training/arguments.py` at commit
000c4ac24f61159c138b0975def722c65245983c (2025; has both `--num-layers-per-virtual-pipeline-stage`
and `--num-virtual-stages-per-pipeline-rank`; this export uses the latter, which states the
virtual stages per rank directly). Launch layout follows
`examples/gpt3/train_gpt3_175b_distributed.sh` (argument arrays, `torchrun ... pretrain_gpt.py`).
What Megatron cannot express is listed in `unsupported` and as `#` comments in the snippet.
"""

from __future__ import annotations

import shlex

from modelplan.export.launch import launch_geometry
from modelplan.export.result import Engine, EngineExport
from modelplan.specs.base import Spec
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

MEGATRON_SOURCE = (
    "NVIDIA/Megatron-LM megatron/training/arguments.py @ 000c4ac24f61159c138b0975def722c65245983c"
)

Arg = tuple[str, str | None]
"""One argument: the flag and its value (None for a store_true flag)."""


class MegatronArgs(Spec):
    """Megatron-LM arguments grouped as the upstream example scripts group them."""

    model: tuple[Arg, ...]
    """Network size and architecture (`_add_network_size_args`, `_add_moe_args`)."""
    training: tuple[Arg, ...]
    """Batch, precision, recompute, optimizer (`_add_training_args`, mixed precision group)."""
    parallel: tuple[Arg, ...]
    """Parallel degrees and sharding (`_add_distributed_args`)."""
    unsupported: tuple[str, ...] = ()
    """Parts of the plan Megatron-LM cannot express."""

    def flags(self) -> dict[str, str | None]:
        """Every flag -> value, across the three groups."""
        return dict(self.model + self.training + self.parallel)


def _model_args(model: TransformerSpec, plan: Plan, notes: list[str]) -> list[Arg]:
    args: list[Arg] = [
        ("--num-layers", str(model.layers)),
        ("--hidden-size", str(model.hidden)),
        ("--ffn-hidden-size", str(model.ffn_hidden)),
        ("--num-attention-heads", str(model.heads)),
        ("--kv-channels", str(model.dim_head)),
    ]
    if model.num_kv_heads != model.heads:
        # --num-query-groups is the number of key/value heads (arguments.py, network size group).
        args += [("--group-query-attention", None), ("--num-query-groups", str(model.num_kv_heads))]
    args.append(("--max-position-embeddings", str(model.max_positions)))
    position = {"rotary": "rope", "learned": "learned_absolute", "none": "none"}.get(model.position)
    if position is None:
        notes.append(f"position encoding '{model.position}' has no --position-embedding-type")
    else:
        args.append(("--position-embedding-type", position))
    args.append(("--normalization", {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}[model.norm]))
    args.append(("--norm-epsilon", repr(model.norm_eps)))
    if model.norm == "layernorm" and not model.norm_bias:
        notes.append("LayerNorm without bias: Megatron's LayerNorm always has a bias")
    if model.norm == "rmsnorm" and model.norm_bias:
        notes.append("RMSNorm with a bias: Megatron's RMSNorm has none")
    if model.gated_mlp and model.activation == "silu":
        args.append(("--swiglu", None))
    elif model.gated_mlp:
        notes.append(f"gated MLP with '{model.activation}': Megatron offers --swiglu (SiLU) only")
    elif model.activation == "gelu_tanh":
        args.append(("--openai-gelu", None))
    elif model.activation != "gelu":
        notes.append(f"activation '{model.activation}': Megatron's plain MLP uses GeLU")
    biases = (model.qkv_bias, model.attn_out_bias, model.mlp_bias)
    if biases == (False, False, False):
        args.append(("--disable-bias-linear", None))
    elif biases == (True, False, False):
        args += [("--disable-bias-linear", None), ("--add-qkv-bias", None)]
    elif biases != (True, True, True):
        notes.append(
            f"linear biases qkv={model.qkv_bias} attn_out={model.attn_out_bias} "
            f"mlp={model.mlp_bias}: Megatron sets all linear biases together (or QKV only)"
        )
    if model.qk_norm:
        args.append(("--qk-layernorm", None))  # norm type follows --normalization in mcore
    if not model.tied_embeddings:
        args.append(("--untie-embeddings-and-output-weights", None))
    if not model.dropout:
        args += [("--attention-dropout", "0.0"), ("--hidden-dropout", "0.0")]
    extras = {
        "parallel attention+MLP blocks": model.parallel_block,
        "a bias on the output head": model.lm_head_bias,
        "a norm after the embeddings": model.embedding_norm,
        "no final norm": not model.final_norm,
        f"an embedding width ({model.embedding_dim}) other than hidden": model.embedding_dim
        not in (None, model.hidden),
    }
    for what, present in extras.items():
        if present:
            notes.append(f"{what}: not a Megatron GPT option")
    if model.arch == "encoder":
        notes.append("encoder (BERT) models launch with pretrain_bert.py, not pretrain_gpt.py")
    if model.moe is not None:
        args += _moe_args(model, plan, notes)
    return args


def _moe_args(model: TransformerSpec, plan: Plan, notes: list[str]) -> list[Arg]:
    moe = model.moe
    assert moe is not None  # caller checks
    args: list[Arg] = [
        ("--num-experts", str(moe.num_experts)),
        ("--moe-router-topk", str(moe.top_k)),
        ("--moe-ffn-hidden-size", str(moe.expert_ffn_hidden)),
    ]
    if moe.shared_experts:
        # "total ffn hidden size" of all shared experts (arguments.py, moe group).
        shared = moe.shared_experts * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden)
        args.append(("--moe-shared-expert-intermediate-size", str(shared)))
    if moe.first_dense_layers or moe.layer_freq != 1:
        # Explicit per-layer pattern (1 = MoE): Megatron's integer form puts MoE on layer 0.
        pattern = ",".join("1" if model.is_moe_layer(i) else "0" for i in range(model.layers))
        args.append(("--moe-layer-freq", f"[{pattern}]"))
    if moe.capacity_factor is not None:
        args.append(("--moe-expert-capacity-factor", repr(moe.capacity_factor)))
    if moe.router_bias:
        notes.append("router bias: Megatron's router linear has no bias")
    if moe.shared_expert_gate:
        notes.append("shared-expert gate (Qwen2-MoE): not expressed by these arguments")
    if plan.ep > 1:
        args.append(("--moe-token-dispatcher-type", "alltoall"))
    return args


def _training_args(training: TrainingSpec, plan: Plan, notes: list[str]) -> list[Arg]:
    args: list[Arg] = [
        ("--micro-batch-size", str(plan.micro_batch)),
        ("--global-batch-size", str(training.global_batch)),
        ("--seq-length", str(training.seq_len)),
    ]
    precision = {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16"], "fp32": []}
    args += [(flag, None) for flag in precision[training.precision]]
    if training.precision == "fp8":
        args.append(("--fp8-format", "hybrid"))  # e4m3 forward, e5m2 backward (Transformer Engine)
    if not training.uses_master_weights and training.precision != "fp32":
        notes.append("no fp32 master weights: Megatron keeps fp32 main params in mixed precision")
    if training.grad_dtype == "same" and training.precision != "fp32":
        notes.append("gradients in the compute dtype: Megatron accumulates main grads in fp32")
    recompute = plan.recompute if plan.recompute is not None else training.recompute
    if recompute == "selective":
        args.append(("--recompute-granularity", "selective"))  # core attention by default
    elif recompute == "full":
        args += [
            ("--recompute-granularity", "full"),
            ("--recompute-method", "uniform"),
            ("--recompute-num-layers", "1"),
        ]
    if training.optimizer in ("adam", "adamw"):
        args.append(("--optimizer", "adam"))
        if training.optimizer == "adam":
            notes.append("Adam with L2 decay: Megatron's adam applies decoupled (AdamW) decay")
    else:
        args.append(("--optimizer", "sgd"))
        momentum = "0.9" if training.optimizer == "momentum" else "0.0"
        args.append(("--sgd-momentum", momentum))
    return args


def _parallel_args(
    model: TransformerSpec, training: TrainingSpec, plan: Plan, notes: list[str]
) -> list[Arg]:
    args: list[Arg] = [
        ("--tensor-model-parallel-size", str(plan.tp)),
        ("--pipeline-model-parallel-size", str(plan.pp)),
    ]
    if plan.vpp > 1:
        args.append(("--num-virtual-stages-per-pipeline-rank", str(plan.vpp)))
    if plan.cp > 1:
        args.append(("--context-parallel-size", str(plan.cp)))
    if plan.ep > 1:
        args.append(("--expert-model-parallel-size", str(plan.ep)))
    if plan.sequence_parallel:
        args.append(("--sequence-parallel", None))
    if plan.zero == 1:
        args.append(("--use-distributed-optimizer", None))
    elif plan.zero in (2, 3):
        strategy = {2: "optim_grads", 3: "optim_grads_params"}[plan.zero]
        args += [("--use-megatron-fsdp", None), ("--data-parallel-sharding-strategy", strategy)]
    if plan.pp > 1 and plan.schedule == "gpipe":
        notes.append("GPipe schedule: Megatron runs 1F1B (same bubble, fewer live activations)")
    if model.layers % (plan.pp * plan.vpp):
        notes.append(
            f"layers ({model.layers}) not divisible by pp * vpp ({plan.pp} * {plan.vpp}): "
            "set --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers"
        )
    if plan.vpp > 1:
        m = plan.num_microbatches(training.global_batch)
        if m % plan.pp:
            notes.append(
                f"interleaved schedule with {m} micro-batches not a multiple of pp ({plan.pp}): "
                "older Megatron versions refuse it"
            )
    return args


def megatron_arguments(model: TransformerSpec, training: TrainingSpec, plan: Plan) -> MegatronArgs:
    """The Megatron-LM arguments that reproduce `plan` for `model` under `training`."""
    notes: list[str] = []
    model_args = _model_args(model, plan, notes)
    training_args = _training_args(training, plan, notes)
    parallel_args = _parallel_args(model, training, plan, notes)
    notes.append(
        f"vocabulary ({model.vocab}) comes from the tokenizer; Megatron pads it to a multiple of "
        f"128 * tp ({128 * plan.tp}) unless --make-vocab-size-divisible-by says otherwise"
    )
    return MegatronArgs(
        model=tuple(model_args),
        training=tuple(training_args),
        parallel=tuple(parallel_args),
        unsupported=tuple(notes),
    )


def _array(name: str, args: tuple[Arg, ...] | list[Arg]) -> list[str]:
    lines = [f"{name}=("]
    for flag, value in args:
        lines.append(f"    {flag}" + ("" if value is None else f" {shlex.quote(value)}"))
    lines.append(")")
    return lines


def to_megatron(
    model: TransformerSpec, training: TrainingSpec, plan: Plan, cluster: Cluster | None = None
) -> EngineExport:
    """A bash snippet: argument arrays and one `torchrun ... pretrain_gpt.py` line."""
    margs = megatron_arguments(model, training, plan)
    geometry = launch_geometry(plan, cluster)
    unsupported = margs.unsupported + geometry.notes
    dp = plan.dp
    lines = [
        "#!/usr/bin/env bash",
        f"# Megatron-LM launch for {model.name}: dp={dp} tp={plan.tp} pp={plan.pp} "
        f"vpp={plan.vpp} cp={plan.cp} ep={plan.ep} zero={plan.zero} "
        f"micro_batch={plan.micro_batch} global_batch={training.global_batch}",
        f"# Generated by modelplan; argument names from {MEGATRON_SOURCE}.",
        "# Megatron derives dp = world_size / (tp * pp * cp) from the torchrun world below.",
    ]
    if unsupported:
        lines.append("# Not expressible in Megatron-LM (check these by hand):")
        lines += [f"#   - {note}" for note in unsupported]
    lines += [
        "set -euo pipefail",
        "export CUDA_DEVICE_MAX_CONNECTIONS=1",
        "# newer Megatron-LM keeps the script in examples/classes/pretrain_gpt.py",
        'PRETRAIN_SCRIPT="${PRETRAIN_SCRIPT:-pretrain_gpt.py}"',
        "",
    ]
    distributed = [
        ("--nproc_per_node", str(geometry.nproc_per_node)),
        ("--nnodes", str(geometry.nnodes)),
    ]
    lines += _array("DISTRIBUTED_ARGS", distributed)
    if geometry.nnodes > 1:
        lines[-1:-1] = [
            '    --node_rank "${NODE_RANK:?set NODE_RANK on each node}"',
            '    --master_addr "${MASTER_ADDR:?set MASTER_ADDR}"',
            '    --master_port "${MASTER_PORT:-6000}"',
        ]
    lines += _array("MODEL_ARGS", margs.model)
    lines += _array("TRAINING_ARGS", margs.training)
    lines += _array("MODEL_PARALLEL_ARGS", margs.parallel)
    lines += [
        "# Placeholders so the snippet runs as is (mock data, a short run, a learning rate):",
        "# replace with --data-path / --tokenizer-model / your schedule for real training.",
        "DATA_ARGS=(",
        "    --mock-data",
        "    --tokenizer-type NullTokenizer",
        f"    --vocab-size {model.vocab}",
        "    --train-iters 100",
        "    --lr 3.0e-4",
        ")",
        "",
        'torchrun "${DISTRIBUTED_ARGS[@]}" "$PRETRAIN_SCRIPT" \\',
        '    "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" \\',
        '    "${MODEL_PARALLEL_ARGS[@]}" "${DATA_ARGS[@]}"',
        "",
    ]
    return EngineExport(
        engine=Engine.megatron,
        text="\n".join(lines),
        unsupported=unsupported,
        filename="launch_megatron.sh",
    )
