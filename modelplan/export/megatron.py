"""Megatron-LM command-line arguments for a plan, as a ready-to-run `torchrun` script.

Argument names and the rules they must satisfy are those of NVIDIA/Megatron-LM
`megatron/training/arguments.py` (`validate_args`) at the release named in
`modelplan.export.versions` (tag core_v0.16.1, commit 55ac7082); tests/test_export_engines.py
checks every golden export against a table of those rules and megatron-core 0.16.1's own
`TransformerConfig`. Launch layout follows `examples/gpt3/train_gpt3_175b_distributed.sh`
(argument arrays, `torchrun ... pretrain_gpt.py`, the script at the repository root).
What Megatron cannot express is listed in `unsupported` and as `#` comments in the script.
"""

from __future__ import annotations

import shlex

from modelplan.count.flops import decoder_seq_len
from modelplan.export.launch import launch_geometry
from modelplan.export.mechanisms import megatron_mechanism_args
from modelplan.export.megatron_model import Arg, model_args
from modelplan.export.result import Engine, EngineExport, LaunchCommand
from modelplan.export.versions import release
from modelplan.plan.stages import split_layers
from modelplan.specs.base import Spec
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.load import load_engine
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

PRETRAIN_SCRIPT = "pretrain_gpt.py"
"""At the root of Megatron-LM (core_v0.16.1)."""


class MegatronArgs(Spec):
    """Megatron-LM arguments grouped as the upstream example scripts group them."""

    model: tuple[Arg, ...]
    """Network size and architecture (`_add_network_size_args`, `_add_moe_args`)."""
    training: tuple[Arg, ...]
    """Batch, precision, recompute, optimizer (`_add_training_args`, mixed precision group)."""
    parallel: tuple[Arg, ...]
    """Parallel degrees, pipeline split and sharding (`_add_distributed_args`)."""
    env: tuple[tuple[str, str | None], ...]
    """Environment the launch sets (None: unset)."""
    unsupported: tuple[str, ...] = ()
    """Parts of the plan Megatron-LM cannot express."""

    def flags(self) -> dict[str, str | None]:
        """Every flag -> value, across the three groups."""
        return dict(self.model + self.training + self.parallel)

    def argv(self) -> tuple[str, ...]:
        """The flags as one argument list."""
        out: list[str] = []
        for flag, value in self.model + self.training + self.parallel:
            out += [flag] if value is None else [flag, value]
        return tuple(out)


LIST_FLAGS = ("--recompute-modules",)
"""Flags Megatron-LM parses with nargs='*': their value is written as separate words."""


def _training_args(model: TransformerSpec, training: TrainingSpec, plan: Plan, notes: list[str]) -> list[Arg]:
    args: list[Arg] = [
        ("--micro-batch-size", str(plan.micro_batch)),
        ("--global-batch-size", str(training.global_batch)),
        ("--seq-length", str(training.seq_len)),  # the encoder's for pretrain_t5.py (validate_args: = encoder_seq_length)
    ]
    if model.arch == "encoder_decoder":  # pretrain_t5.py: sequence_length_decoder=args.decoder_seq_length
        args.append(("--decoder-seq-length", str(decoder_seq_len(model, training))))
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
        if training.recompute_modules:  # Megatron-LM arguments.py: --recompute-modules, nargs='*'
            args.append(("--recompute-modules", " ".join(training.recompute_modules)))
            if "moe_act" in training.recompute_modules:  # TransformerConfig: moe_act needs the grouped GEMM experts
                args.append(("--moe-grouped-gemm", None))
    elif recompute == "full":
        args += [
            ("--recompute-granularity", "full"),
            ("--recompute-method", training.recompute_method or "uniform"),
            ("--recompute-num-layers", str(training.recompute_num_layers or 1)),
        ]
    if not training.rope_fusion:  # arguments.py --no-rope-fusion: store_false into apply_rope_fusion (default on)
        args.append(("--no-rope-fusion", None))
    if training.loss_kernel in ("megatron_native", "te", "te_fp32_grad"):  # arguments.py (core_v0.8.0 on)
        args.append(("--cross-entropy-loss-fusion", None))
        if training.loss_kernel != "megatron_native":  # --cross-entropy-fusion-impl from core_v0.12.0, default native
            args.append(("--cross-entropy-fusion-impl", "te"))
    if training.optimizer in ("adam", "adamw"):
        args.append(("--optimizer", "adam"))
        if training.optimizer == "adam":
            notes.append("Adam with L2 decay: Megatron's adam applies decoupled (AdamW) decay")
    else:
        args.append(("--optimizer", "sgd"))
        momentum = "0.9" if training.optimizer == "momentum" else "0.0"
        args.append(("--sgd-momentum", momentum))
    return args


def pipeline_layout(layers: int, pp: int, vpp: int, split=None, mtp: int = 0) -> str:
    """Megatron's --pipeline-model-parallel-layout for modelplan's split (`split_layers`): one
    `|`-separated entry per virtual stage in layer order (virtual stage v on rank v % pp, as in
    megatron-core's PipelineParallelLayerLayout), E = embedding, t = a block, m = an MTP module
    (on the last stage, as `plan/stages.py` places them), L = loss."""
    stages = []
    for v, count in enumerate(split_layers(layers, pp * vpp, split)):
        stage = ("E" if v == 0 else "") + (f"t*{count}" if count else "")
        stages.append(stage + ("m" * mtp + "L" if v == pp * vpp - 1 else ""))
    return "|".join(stages)


def _pipeline_args(model: TransformerSpec, plan: Plan) -> list[Arg]:
    """The stage split in Megatron's terms: even (plus virtual stages), lighter first/last
    stage (--decoder-first/last-pipeline-num-layers) when the middle stays even, or the layout."""
    if plan.pp == 1:
        return []
    counts = split_layers(model.layers, plan.pp * plan.vpp, plan.stage_split)
    if len(set(counts)) == 1:
        return [("--num-virtual-stages-per-pipeline-rank", str(plan.vpp))] if plan.vpp > 1 else []
    middle = set(counts[1:-1])
    if plan.vpp == 1 and len(middle) <= 1:
        # validate_args: middle stages hold (layers - first - last) / (pp - 2) blocks each.
        return [("--decoder-first-pipeline-num-layers", str(counts[0])),
                ("--decoder-last-pipeline-num-layers", str(counts[-1]))]
    # The layout sets vpp itself; validate_args allows no --num-virtual-stages-per-pipeline-rank.
    return [("--pipeline-model-parallel-layout", pipeline_layout(model.layers, plan.pp, plan.vpp, plan.stage_split,
                                                                        model.mtp_layers))]


def _parallel_args(
    model: TransformerSpec, training: TrainingSpec, plan: Plan, notes: list[str]
) -> list[Arg]:
    args: list[Arg] = [
        ("--tensor-model-parallel-size", str(plan.tp)),
        ("--pipeline-model-parallel-size", str(plan.pp)),
    ]
    args += _pipeline_args(model, plan)
    if plan.cp > 1:
        args.append(("--context-parallel-size", str(plan.cp)))
        # arguments.py --cp-comm-type (nargs '+', default ['p2p']; one value: every layer), passed to
        # Transformer Engine's DotProductAttention, which takes p2p | all_gather | a2a | a2a+p2p
        args.append(("--cp-comm-type", training.cp_comm_type or load_engine("megatron").cp_comm_type))
        if training.seq_len % (2 * plan.cp):
            notes.append(f"seq_len ({training.seq_len}) must be a multiple of 2 * cp "
                         f"({2 * plan.cp}) in Megatron (validate_args)")
    if plan.ep > 1:
        args.append(("--expert-model-parallel-size", str(plan.ep)))
        if training.ep_comm_overlap:  # EP AllToAlls under another micro-batch's compute (Megatron-core
            args.append(("--overlap-moe-expert-parallel-comm", None))  # overlap_moe_expert_parallel_comm)
    if plan.sequence_parallel:
        args.append(("--sequence-parallel", None))
    args += _sharding_args(plan)
    args += megatron_mechanism_args(plan, notes)
    if plan.pp > 1 and plan.schedule == "gpipe":
        notes.append("GPipe schedule: Megatron runs 1F1B (same bubble, fewer live activations)")
    if plan.vpp > 1:
        m = plan.num_microbatches(training.global_batch)
        # megatron-core schedules.py (interleaved): micro-batches run in groups of
        # microbatch_group_size_per_vp_stage (default pp) in [pp, m]; the last group must be
        # empty or hold >= pp. One group of all m satisfies it whenever m >= pp.
        if m < plan.pp:
            notes.append(f"interleaved schedule with {m} micro-batches < pp ({plan.pp}): "
                         "Megatron's interleaved schedule refuses it")
        elif m % plan.pp:
            args.append(("--microbatch-group-size-per-virtual-pipeline-stage", str(m)))
    return args


def _sharding_args(plan: Plan) -> list[Arg]:
    """ZeRO-1: the distributed optimizer. ZeRO-2/3: Megatron-FSDP, whose checkpoints must be
    fsdp_dtensor (validate_args)."""
    if plan.zero == 1:
        return [("--use-distributed-optimizer", None)]
    if plan.zero in (2, 3):
        strategy = {2: "optim_grads", 3: "optim_grads_params"}[plan.zero]
        return [("--use-megatron-fsdp", None), ("--data-parallel-sharding-strategy", strategy),
                ("--ckpt-format", "fsdp_dtensor")]
    return []


def _environment(plan: Plan) -> tuple[tuple[str, str | None], ...]:
    """validate_args (pre-Blackwell): tp > 1 or cp > 1 needs CUDA_DEVICE_MAX_CONNECTIONS=1 unless
    FSDP runs, and Megatron-FSDP needs it unset or > 1."""
    if plan.zero in (2, 3):
        return (("CUDA_DEVICE_MAX_CONNECTIONS", None),)
    return (("CUDA_DEVICE_MAX_CONNECTIONS", "1"),)


def megatron_arguments(model: TransformerSpec, training: TrainingSpec, plan: Plan,
                       cost: CostModel | None = None) -> MegatronArgs:
    """The Megatron-LM arguments that reproduce `plan` for `model` under `training` (vocabulary
    padded as `cost` prices it)."""
    notes: list[str] = []
    divisible_by = (cost or CostModel()).vocab_divisible_by
    model_flags = model_args(model, training, plan, notes, divisible_by)
    training_flags = _training_args(model, training, plan, notes)
    parallel_flags = _parallel_args(model, training, plan, notes)
    return MegatronArgs(
        model=tuple(model_flags),
        training=tuple(training_flags),
        parallel=tuple(parallel_flags),
        env=_environment(plan),
        unsupported=tuple(notes),
    )


def _array(name: str, args: tuple[Arg, ...] | list[Arg]) -> list[str]:
    lines = [f"{name}=("]
    for flag, value in args:
        words = [value] if flag not in LIST_FLAGS or value is None else value.split()  # nargs='*' flags
        lines.append(f"    {flag}" + ("" if value is None else " " + " ".join(shlex.quote(w) for w in words)))
    lines.append(")")
    return lines


DATA_ARGS = ("--mock-data", "--tokenizer-type", "NullTokenizer", "--train-iters", "100",
             "--lr", "3.0e-4")
"""Placeholders so the script runs as is: mock data, a short run, a learning rate."""


def to_megatron(
    model: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    version: str | None = None,
    cost: CostModel | None = None,
) -> EngineExport:
    """A bash script: argument arrays and one `torchrun ... pretrain_gpt.py` line."""
    target = release(Engine.megatron, version)
    margs = megatron_arguments(model, training, plan, cost)
    geometry = launch_geometry(plan, cluster)
    unsupported = margs.unsupported + geometry.notes
    lines = [
        "#!/usr/bin/env bash",
        f"# Megatron-LM launch for {model.name}: dp={plan.dp} tp={plan.tp} pp={plan.pp} "
        f"vpp={plan.vpp} cp={plan.cp} ep={plan.ep} zero={plan.zero} "
        f"micro_batch={plan.micro_batch} global_batch={training.global_batch}",
        f"# Generated by modelplan for Megatron-LM {target.version}: {target.source}.",
        "# Megatron derives dp = world_size / (tp * pp * cp) from the torchrun world below.",
        f"# Run from a Megatron-LM checkout ({PRETRAIN_SCRIPT} is at its root) on every node.",
    ]
    if unsupported:
        lines.append("# Not expressible in Megatron-LM (check these by hand):")
        lines += [f"#   - {note}" for note in unsupported]
    lines.append("set -euo pipefail")
    lines += [f"export {k}={v}" if v is not None else f"unset {k}" for k, v in margs.env]
    lines += [f'PRETRAIN_SCRIPT="${{PRETRAIN_SCRIPT:-{PRETRAIN_SCRIPT}}}"', ""]
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
    data = DATA_ARGS[:3] + ("--vocab-size", str(model.vocab)) + DATA_ARGS[3:]
    lines += [
        "# Placeholders so the script runs as is (mock data, a short run, a learning rate):",
        "# replace with --data-path / --tokenizer-model / your schedule for real training.",
        "DATA_ARGS=(",
        "    " + " ".join(data),
        ")",
        "",
        'torchrun "${DISTRIBUTED_ARGS[@]}" "$PRETRAIN_SCRIPT" \\',
        '    "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" \\',
        '    "${MODEL_PARALLEL_ARGS[@]}" "${DATA_ARGS[@]}"',
        "",
    ]
    return EngineExport(
        engine=Engine.megatron,
        engine_version=target.version,
        text="\n".join(lines),
        unsupported=unsupported,
        filename="launch_megatron.sh",
        launch=LaunchCommand(program=(PRETRAIN_SCRIPT,) + margs.argv() + data, env=margs.env),
    )
