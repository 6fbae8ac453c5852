"""`modelplan plan` options that fix a layout setting the search would otherwise leave at its
default or search: the first / last pipeline stage's blocks, ZeRO-3's reshard after forward, and
the element-wise kernel settings (the model code's element-wise ops, a fused norm, the compiled loss)
and the loss's cross-entropy kernels.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from modelplan.cli.options import given
from modelplan.specs.engine import Elementwise, LossKernel
from modelplan.specs.limits import MAX_LAYERS

FirstStageOpt = Annotated[Optional[int], typer.Option(
    "--first-stage-layers", min=1, max=MAX_LAYERS, help="Blocks of the first virtual pipeline stage: Megatron-LM "
    "--decoder-first-pipeline-num-layers at vpp 1; with --vpp V Megatron's N is the first rank's V chunks together, "
    "N / V here (the export writes --pipeline-model-parallel-layout) [default: searched].", show_default=False)]
LastStageOpt = Annotated[Optional[int], typer.Option(
    "--last-stage-layers", min=1, max=MAX_LAYERS, help="Blocks of the last virtual pipeline stage: "
    "--decoder-last-pipeline-num-layers at vpp 1 (with --vpp V: its N / V) [default: searched].", show_default=False)]
ReshardOpt = Annotated[Optional[str], typer.Option(
    "--reshard-after-forward", help="ZeRO-3 / FSDP: free gathered parameters after forward (true), keep them to "
    "backward (false), or the engine's rule (default) [default: default].", show_default=False)]
FusedNormOpt = Annotated[Optional[bool], typer.Option(
    "--fused-norm/--no-fused-norm", help="Eager engines: the norm as one fused kernel (torchtitan fused_rmsnorm) "
    "[default: no].", show_default=False)]
ElementwiseOpt = Annotated[Optional[Elementwise], typer.Option(
    "--elementwise", help="How the model code runs norms, activations and rotary where it is not the engine's: eager "
    "(PyTorch composites: a transformers model under DeepSpeed ZeRO) or fused [default: the engine's].",
    show_default=False)]
CompileLossOpt = Annotated[Optional[bool], typer.Option(
    "--compile-loss/--no-compile-loss", help="With --compile: torch.compile covers the loss too [default: the "
    "engine's].", show_default=False)]
LossUpcastOpt = Annotated[Optional[bool], typer.Option(
    "--loss-upcast/--no-loss-upcast", help="Eager engines: the cross-entropy casts the logits to fp32 first "
    "(--no-loss-upcast: on the 16-bit logits, NeMo AutoModel fp32_upcast=False) [default: yes].", show_default=False)]
LossKernelOpt = Annotated[Optional[LossKernel], typer.Option(
    "--loss-kernel", help="Cross-entropy kernels the loss runs, for its time and the memory it holds: megatron "
    "(unfused vocab_parallel_cross_entropy; megatron_2022: Megatron-core 2022-09..2024-06 and Megatron-DeepSpeed, "
    "out-of-place subtract), megatron_native / te (Megatron-core --cross-entropy-loss-fusion with --cross-entropy-fusion-impl native / te; "
    "te_fp32_grad: TE 2.18 on), eager, compiled, flash_attn [default: the engine's].", show_default=False)]


def parse_reshard(text: str | None) -> bool | str:
    """`true` / `false` / `default` -> True / False / 'default'; one-line SpecError otherwise."""
    from modelplan.errors import SpecError

    if text is None:
        return "default"
    word = text.strip().lower()
    if word not in ("true", "false", "default"):
        raise SpecError(f"--reshard-after-forward: expected true, false or default (got '{text[:40]}')")
    return word if word == "default" else word == "true"


def layout_space(first: int | None, last: int | None, reshard: str | None) -> dict:
    """The SearchSpace fields these options set."""
    return {"first_stage_layers": first, "last_stage_layers": last, "reshard_after_forward": parse_reshard(reshard)}


def kernel_settings(fused_norm: bool | None, compile_loss: bool | None, loss_upcast: bool | None = None,
                    loss_kernel: str | None = None, elementwise: str | None = None) -> dict:
    """The TrainingSpec fields these options set (left out: the spec's defaults)."""
    return given(loss_kernel=loss_kernel, elementwise=elementwise, loss_upcast=loss_upcast, fused_norm=fused_norm,
                 compile_loss=compile_loss)
