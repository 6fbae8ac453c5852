"""The training engine's settings as the planner applies them: the run's own choices over its
engine profile's defaults (`modelplan.specs.engine`), resolved once per evaluator."""

from __future__ import annotations

from typing import NamedTuple

from modelplan.count.loss_kernels import loss_kernel_peak_bytes
from modelplan.specs.engine import EngineProfile
from modelplan.specs.training import TrainingSpec


class EngineSettings(NamedTuple):
    """What the kernels, recompute and memory terms need to know about the engine."""

    framework: str
    elementwise: str
    """fused | eager (an eager engine under torch.compile is fused)."""
    norm_elementwise: str
    """fused | eager: how the norms run (`TrainingSpec.fused_norm` fuses them alone)."""
    ac_mode: str
    """What recompute 'selective' means."""
    ac_every: int
    fp8_recipe: str | None
    """The fp8 scaling recipe, None when the precision is not fp8."""
    fp8_backend: str
    """te | torchao (`EngineProfile.fp8_backend`)."""
    attention_kernels: tuple[str, ...]
    sharded_low_precision_copy: bool
    reduce_in_fp32: bool
    grad_copy_bytes: int
    low_precision_grads: bool
    dp_bucket_elements: int
    reshard_after_forward: bool
    reshard_after_forward_pp: bool
    tp_comm_overlap: bool
    param_gather_window: str = "step_forwards"
    """`EngineProfile.param_gather_window` (the forwards the ZeRO-1/2 parameter AllGather hides behind)."""
    zero3_gather_copy_out: bool = False
    """`EngineProfile.zero3_gather_copy_out` (DeepSpeed copies each gathered parameter out of the flat buffer)."""
    sp_saves_gathered_inputs: bool = False
    """`EngineProfile.sp_saves_gathered_inputs` (DTensor SP keeps the gathered linear inputs)."""
    fp8_tp_gather: bool = False
    """The run's fp8 recipe is one of `EngineProfile.fp8_tp_gather_recipes`: 1-byte TP AllGathers."""
    fp8_weights_gathered: bool = False
    """torchao's FSDP2 float8 all-gather (`TrainingSpec.fp8_param_gather`, tensorwise): the dense
    linear weights arrive in fp8, so no Float8Linear casts them (`plan/fp8.py` `quantisation_bytes`)."""
    cp_fp32_merge: bool = False
    """`EngineProfile.cp_fp32_merge` (PyTorch ring SDPA merges each step's output in fp32)."""
    cp_comm_type: str = "p2p"
    """The run's `cp_comm_type`, else the engine's (`EngineProfile.cp_comm_type`)."""
    recompute_modules: tuple[str, ...] = ()
    """Megatron-core `--recompute-modules` when the run names them (ac_mode is then 'modules')."""
    recompute_method: str | None = None
    """Megatron-core `--recompute-method` under full recompute (`count.recompute_layers`)."""
    recompute_num_layers: int | None = None
    loss_parallel: bool = False
    """`EngineProfile.loss_parallel` (the eager loss over vocab-sharded DTensor logits at tp > 1)."""
    pp_microbatch_buffers: bool = False
    """`EngineProfile.pp_microbatch_buffers` (torch.distributed.pipelining's receive buffers)."""
    pp_keeps_outputs: bool = False
    """`EngineProfile.pp_keeps_outputs` (the last stage keeps every micro-batch's logits)."""
    sdpa_repeats_kv: bool = False
    """`EngineProfile.sdpa_repeats_kv` (GQA's K, V repeated to the query heads before attention)."""
    scale_mask_softmax: str = "fused"
    """`EngineProfile.scale_mask_softmax` (Megatron's fused softmax and its fp32 PyTorch fallback)."""
    head_stays_gathered: bool = False
    """`EngineProfile.head_stays_gathered` (ZeRO-3 keeps the output head gathered to its backward)."""
    loss_upcast: bool = True
    """`TrainingSpec.loss_upcast` (the eager loss casts the logits to fp32 first)."""
    sac_saves_attention: bool = True
    """`TrainingSpec.sac_saves_attention` (per-op SAC keeps attention's output)."""
    rope_fusion: bool = True
    """`TrainingSpec.rope_fusion` (Megatron-core's fused rotary; `plan/rotary_fusion.py`)."""
    fsdp_ends_in_root: bool = False
    """`TrainingSpec.fsdp_ends_in_root` (embedding, norm and head in FSDP2's root group)."""
    loss_kernel: str = "megatron"
    """The cross-entropy kernels the loss runs (`count.loss_kernels`): the run's, else the engine's;
    the one setting both the loss's time (`plan.kernels.head_kernels`) and the bytes it holds on
    the last stage (`plan.memory.edge_activations`) read."""


def engine_settings(training: TrainingSpec, profile: EngineProfile) -> EngineSettings:
    """The run's settings where it gives them (`ac_mode`, `fp8_recipe`, `compile`, `elementwise`),
    else the engine's (`EngineProfile`)."""
    elementwise = "fused" if training.compile else training.elementwise or profile.elementwise
    fp8 = (training.fp8_recipe or profile.fp8_recipe) if training.precision == "fp8" else None
    return EngineSettings(
        framework=profile.name, elementwise=elementwise,
        norm_elementwise="fused" if training.fused_norm else elementwise,
        ac_mode="modules" if training.recompute_modules else training.ac_mode or profile.selective,
        ac_every=profile.layer_sac_every, head_stays_gathered=profile.head_stays_gathered, fp8_recipe=fp8,
        fp8_backend=profile.fp8_backend, attention_kernels=profile.attention_kernels,
        sharded_low_precision_copy=profile.sharded_low_precision_copy, reduce_in_fp32=profile.reduce_in_fp32 and training.grad_dtype == "fp32",
        grad_copy_bytes=grad_copy_bytes(training, profile), low_precision_grads=profile.low_precision_grads,
        dp_bucket_elements=profile.dp_bucket_elements, reshard_after_forward=profile.reshard_after_forward,
        reshard_after_forward_pp=profile.reshard_after_forward_pp, tp_comm_overlap=profile.tp_comm_overlap,
        param_gather_window=profile.param_gather_window, zero3_gather_copy_out=profile.zero3_gather_copy_out,
        sp_saves_gathered_inputs=profile.sp_saves_gathered_inputs,
        fp8_tp_gather=fp8 is not None and fp8 in profile.fp8_tp_gather_recipes,
        fp8_weights_gathered=training.fp8_param_gather and profile.fp8_backend == "torchao" and fp8 == "tensorwise",
        cp_fp32_merge=profile.cp_fp32_merge, cp_comm_type=training.cp_comm_type or profile.cp_comm_type,
        recompute_modules=tuple(training.recompute_modules or ()), recompute_method=training.recompute_method,
        recompute_num_layers=training.recompute_num_layers,
        loss_parallel=profile.loss_parallel, pp_microbatch_buffers=profile.pp_microbatch_buffers,
        pp_keeps_outputs=profile.pp_keeps_outputs, sdpa_repeats_kv=profile.sdpa_repeats_kv,
        scale_mask_softmax=profile.scale_mask_softmax, loss_upcast=training.loss_upcast,
        sac_saves_attention=training.sac_saves_attention, fsdp_ends_in_root=training.fsdp_ends_in_root,
        loss_kernel=_loss_kernel(training, profile), rope_fusion=training.rope_fusion,
    )


def grad_copy_bytes(training: TrainingSpec, profile: EngineProfile) -> int:
    """HBM bytes per unsharded gradient element the engine moves before a ZeRO-2/3 ReduceScatter
    (`EngineProfile.grad_copy_bytes`); FSDP2's copy-in alone reads the 16-bit gradient and writes
    it in the reduce dtype (`EngineProfile.grad_copy_in_only`)."""
    if not profile.grad_copy_in_only:
        return profile.grad_copy_bytes
    d = training.dtype_bytes
    reduce_bytes = 4 if profile.reduce_in_fp32 and training.grad_dtype == "fp32" else d
    return d + reduce_bytes


def keeps_low_precision_grads(software: EngineSettings, zero: int, precision: str, grad_bytes: int) -> bool:
    """DeepSpeed's BF16_Optimizer is in charge (bf16 parameters, fp32 gradient accumulation, ZeRO
    0/1): backward writes each parameter's bf16 `.grad`, kept beside the flat fp32 gradients
    (`EngineProfile.low_precision_grads`, deepspeed/runtime/engine.py _do_optimizer_sanity_check)."""
    return software.low_precision_grads and zero <= 1 and precision == "bf16" and grad_bytes == 4


def _loss_kernel(training: TrainingSpec, profile: EngineProfile) -> str:
    """The run's `loss_kernel` where it names one, else the engine's; an eager loss that
    torch.compile covers runs as 'compiled': under `compile`, the run's `compile_loss` where it
    says, else the engine's rule (`EngineProfile.compiles_loss`)."""
    kind = training.loss_kernel or profile.loss_kernel
    if kind != "eager" or not training.compile:
        return kind
    compiled = profile.compiles_loss if training.compile_loss is None else training.compile_loss
    return "compiled" if compiled else kind


MEGATRON_2021 = EngineSettings(
    framework="megatron", elementwise="fused", norm_elementwise="fused", ac_mode="attention_core", ac_every=2,
    fp8_recipe=None, fp8_backend="te", attention_kernels=(), sharded_low_precision_copy=True,
    reduce_in_fp32=True, grad_copy_bytes=0, low_precision_grads=False, dp_bucket_elements=0, reshard_after_forward=True, reshard_after_forward_pp=True, tp_comm_overlap=False,
)
"""The settings the kernel and layer-term functions assume when none are given (Megatron-LM)."""


def _loss_bytes(software: EngineSettings, dtype_bytes: int = 2, loss_parallel: bool = False) -> int:
    return loss_kernel_peak_bytes(software.loss_kernel, dtype_bytes, software.loss_upcast, loss_parallel)


def engine_assumptions(software: EngineSettings, attention_rates: tuple[float, float] | None,
                       fragmentation_fraction: float, runtime_reserved_bytes: int, attention: str = "flash",
                       nccl_buffer_bytes: int = 0) -> str:
    """One line stating what the step time and memory assume about the engine; `attention`: the
    run's kernel (`TrainingSpec.attention`: eager runs no fused kernel, so no fused rate applies);
    `nccl_buffer_bytes`: NCCL's buffers per communicator (`CostModel.nccl_buffer_bytes_per_group`)."""
    kernel = next(iter(software.attention_kernels), "flash")
    rates = f" {attention_rates[0]:.2f}/{attention_rates[1]:.2f} of peak" if attention_rates else ""
    parts = [
        f"engine {software.framework}: " + ("attention eager (unfused: QK^T, AV as batched GEMMs, softmax "
                                             "passes over the kept s x s scores)" if attention == "eager" else f"attention {kernel}{rates}"),
        f"element-wise {software.elementwise}" + (f" (norms {software.norm_elementwise})"
                                                  if software.norm_elementwise != software.elementwise else ""),
        f"selective = {'+'.join(software.recompute_modules) if software.recompute_modules else software.ac_mode}",
        f"loss {software.loss_kernel} cross-entropy ({_loss_bytes(software)} B/logit held"
        + (f", {_loss_bytes(software, loss_parallel=True)} under loss parallel at tp > 1"
           if software.loss_parallel and software.loss_kernel == "eager" else "") + ")",
        f"gradients reduced in {'fp32' if software.reduce_in_fp32 else '16 bits'}",
    ]
    if software.fp8_recipe:
        parts.append(f"fp8 {software.fp8_recipe} ({software.fp8_backend})")
    if software.tp_comm_overlap:
        parts.append("TP overlapped with GEMMs")
    if software.param_gather_window == "first_microbatch":
        parts.append("ZeRO-1/2 parameter AllGather hidden beside the first micro-batch's forward only")
    elif software.param_gather_window == "optimizer_step":
        parts.append("ZeRO-1/2 parameter AllGather blocking at the end of the optimizer step")
    if software.fp8_tp_gather:
        parts.append("fp8 TP all-gathers")
    if software.sp_saves_gathered_inputs:
        parts.append("SP keeps the gathered linear inputs")
    if software.cp_fp32_merge:
        parts.append("CP ring merges in fp32")
    if software.sdpa_repeats_kv:
        parts.append("GQA K, V repeated to the query heads (CP exchanges them)")
    if software.head_stays_gathered:
        parts.append("ZeRO-3 keeps the output head gathered to its backward")
    if software.fsdp_ends_in_root:
        parts.append("FSDP2 root holds embedding, norm and head (gathered all step, head gradient to the end)")
    if not software.sac_saves_attention:
        parts.append("per-op SAC recomputes attention (its kernel not in the save list)")
    if software.pp_microbatch_buffers:
        parts.append("PP receive buffers per micro-batch" + (", last stage keeps every micro-batch's logits"
                                                               if software.pp_keeps_outputs else ""))
    parts.append(f"allocator reserve {100 * fragmentation_fraction:g}% of activations and buffers (fragmentation "
                 f"row), CUDA context and cuBLAS / cuDNN workspaces {runtime_reserved_bytes / 1e9:g} GB (reserved row)"
                 + (f", NCCL {nccl_buffer_bytes / 1e6:g} MB per communicator (in comm buffers)" if nccl_buffer_bytes
                    else ""))
    return "; ".join(parts)
