"""Command-line options defined once (Annotated aliases) so every command spells them the same.

A command declares `batch: GlobalBatchOpt = None` and gets `--batch/--global-batch` with the
same help text, bounds and choices as every other command.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

from modelplan.errors import ModelplanError
from modelplan.specs.limits import MAX_BATCH, MAX_LAYERS

# The choices of modelplan.specs.training, repeated here so that `modelplan --help` does not
# import pydantic; tests/test_cli_count.py checks that the two stay equal.
Precision = Literal["fp32", "bf16", "fp16", "fp8"]
Optimizer = Literal["sgd", "momentum", "adam", "adamw"]
Recompute = Literal["none", "selective", "full"]
Attention = Literal["flash", "sdpa", "eager"]
# The choices of modelplan.specs.engine (tests/test_engine.py checks that they stay equal).
Framework = Literal["megatron", "deepspeed", "torchtitan", "fsdp", "foundry", "automodel"]
AcMode = Literal["attention_core", "op_sac", "layer_sac", "every_nth_block"]
Fp8Recipe = Literal["delayed", "current", "tensorwise", "rowwise", "blockwise"]
CpCommType = Literal["p2p", "all_gather", "a2a"]


def complete_presets(category: str):
    """Shell completion of the preset names of `category` (typer `autocompletion`)."""

    def complete(incomplete: str) -> list[str]:
        from modelplan.presets import preset_names

        return [n for n in preset_names(category) if n.startswith(incomplete)]

    return complete


def complete_words(words):
    """Shell completion of a list of names (or of a function returning them, called lazily)."""

    def complete(incomplete: str) -> list[str]:
        names = words() if callable(words) else words
        return [w for w in names if w.startswith(incomplete)]

    return complete


complete_models = complete_presets("models")
complete_clusters = complete_presets("clusters")


ModelArg = Annotated[
    str,
    typer.Argument(
        metavar="MODEL",
        help="Preset name (`modelplan presets`), TOML/JSON spec file, HuggingFace config.json, "
             "or - for a spec on standard input.",
        show_default=False,
        autocompletion=complete_models,
    ),
]


def global_batch_option(default: str):
    """`--batch/--global-batch`, its default described as `default`."""
    return Annotated[
        Optional[int],
        typer.Option(
            "--batch", "--global-batch", min=1,
            help=f"Sequences per optimizer step over all data-parallel ranks (default: {default}).",
            show_default=False,
        ),
    ]


GlobalBatchOpt = global_batch_option("the micro-batch")
SeqOpt = Annotated[
    Optional[int],
    typer.Option(
        "--seq", "--seq-len", min=1,
        help="Tokens per sequence (default: 2048, or the model's max_positions if smaller).",
        show_default=False,
    ),
]
MicroBatchOpt = Annotated[
    int, typer.Option("--micro-batch", min=1, max=MAX_BATCH, help="Sequences per micro-batch (activation memory).")
]
PrecisionOpt = Annotated[
    Precision, typer.Option("--precision", help="fp32, or mixed precision with bf16/fp16/fp8 matmuls.")
]
OptimizerOpt = Annotated[
    Optimizer, typer.Option("--optimizer", help="Optimizer (sets the fp32 state tensors per parameter).")
]
RecomputeOpt = Annotated[
    Recompute, typer.Option("--recompute", help="Activation recompute: none, selective, or full.")
]
AttentionOpt = Annotated[
    Attention,
    typer.Option(
        "--attention",
        help="Attention kernel: flash (fused; no s x s tensors kept, its own sustained rate, causal "
        "tiles skipped), sdpa (PyTorch SDPA, fused the same way) or eager (unfused, Megatron-LM 2021-22).",
    ),
]
FrameworkOpt = Annotated[
    Framework,
    typer.Option(
        "--framework",
        help="Training engine: its kernels, what its selective recompute keeps, its loss and allocator "
        "(presets/frameworks/<name>.toml).",
    ),
]
AcModeOpt = Annotated[
    Optional[AcMode],
    typer.Option("--ac-mode", help="What 'selective' recompute keeps [default: the engine's own].", show_default=False),
]
RecomputeModulesOpt = Annotated[
    Optional[str],
    typer.Option("--recompute-modules",
                 help="Megatron-core selective recompute modules, a comma list of core_attn, moe_act, layernorm, "
                      "mla_up_proj, mlp, moe, shared_experts (sets --recompute selective).", show_default=False),
]
RecomputeMethodOpt = Annotated[
    Optional[Literal["uniform", "block"]],
    typer.Option("--recompute-method",
                 help="Megatron-core full recompute: uniform (groups of --recompute-layers, only their inputs "
                      "kept) or block (the first --recompute-layers of each pipeline chunk); sets --recompute full.",
                 show_default=False),
]
RecomputeLayersOpt = Annotated[
    Optional[int],
    typer.Option("--recompute-layers", min=1, max=MAX_LAYERS, help="Megatron-core --recompute-num-layers (with --recompute-method).",
                 show_default=False),
]


def implied_recompute(recompute: str, modules: str | None, method: str | None) -> str:
    """--recompute-modules implies selective and --recompute-method full when --recompute is left at none."""
    if recompute != "none":
        return recompute
    return "selective" if modules is not None else "full" if method is not None else recompute


def recompute_settings(modules: str | None, method: str | None, layers: int | None) -> dict:
    """The TrainingSpec fields of --recompute-modules / --recompute-method / --recompute-layers."""
    out: dict = {}
    if modules is not None:
        out["recompute_modules"] = tuple(m.strip() for m in modules.split(",") if m.strip())
    if method is not None:
        out["recompute_method"] = method
    if layers is not None:
        if method is None:  # name the flags, not the TrainingSpec fields they set
            raise ModelplanError(f"--recompute-layers ({layers}) needs --recompute-method (uniform or block)")
        out["recompute_num_layers"] = layers
    return out


Fp8RecipeOpt = Annotated[
    Optional[Fp8Recipe],
    typer.Option("--fp8-recipe", help="fp8 scaling recipe with --precision fp8 [default: the engine's].",
                 show_default=False),
]
CompileOpt = Annotated[
    bool, typer.Option("--compile/--no-compile", help="torch.compile: element-wise ops fused (eager engines).")
]
TpOverlapOpt = Annotated[
    Optional[bool],
    typer.Option("--tp-comm-overlap/--no-tp-comm-overlap",
                 help="Overlap TP collectives with GEMMs (TE userbuffers, async TP) [default: the engine's].",
                 show_default=False),
]
GradDtypeOpt = Annotated[
    Optional[Literal["fp32", "same"]],
    typer.Option("--grad-dtype",
                 help="Gradient buffer and reduction dtype: fp32 (Megatron's default) or same (the compute dtype: "
                      "Megatron --no-grad-reduce-in-fp32 / accumulate-allreduce-grads-in-fp32 off, NeMo "
                      "grad_sync_dtype bf16) [default: fp32].", show_default=False),
]
Fp8ParamGatherOpt = Annotated[
    bool,
    typer.Option("--fp8-param-gather/--no-fp8-param-gather",
                 help="fp8: keep and gather the parameters in fp8, no 16-bit copy (Megatron --fp8-param-gather, "
                      "NeMo fp8_params, torchao fp8 all-gather).", show_default=False),
]
MasterWeightsOpt = Annotated[
    Optional[bool],
    typer.Option("--master-weights/--no-master-weights",
                 help="Keep fp32 master weights in the optimizer [default: yes under mixed precision].",
                 show_default=False),
]
EpOverlapOpt = Annotated[
    bool,
    typer.Option("--ep-comm-overlap/--no-ep-comm-overlap",
                 help="MoE: overlap expert-parallel AllToAlls with another micro-batch's compute "
                      "(Megatron-core --overlap-moe-expert-parallel-comm).", show_default=False),
]
CpCommTypeOpt = Annotated[
    Optional[CpCommType],
    typer.Option("--cp-comm-type",
                 help="Context-parallel exchange: p2p (ring send/recv overlapped with attention), all_gather "
                      "(AllGather of K, V; Llama 3), a2a (Ulysses AllToAll, heads split over cp) "
                      "[default: plan searches every type the engine runs and keeps the cheapest; verify runs "
                      "the engine's: Megatron p2p, torchtitan all_gather, DeepSpeed a2a].",
                 show_default=False),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print a machine-readable JSON document instead of tables.")
]
DepthOpt = Annotated[
    int, typer.Option("--depth", min=1, help="Levels of the slash-path breakdown shown in tables.")
]


def finite(value: float | None) -> float | None:
    """Option callback: refuse nan and inf (click's float ranges let nan through)."""
    import math

    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def given(**fields) -> dict:
    """The spec fields whose options were given (None: the option was left out, the field keeps its default)."""
    return {name: value for name, value in fields.items() if value is not None}


def given_options(ctx, keep: set[str]) -> list[str]:
    """The options given on the command line (not left at their defaults) whose parameters are not
    in `keep`, by their first flag (`ctx`: the command's typer.Context)."""
    out = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if param.name in keep or param.param_type_name != "option" or source is None:
            continue
        if source.name not in ("DEFAULT", "DEFAULT_MAP"):
            out.append(param.opts[0])
    return out
