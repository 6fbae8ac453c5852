"""Compute time: one kernel on one accelerator (a roofline with a per-kernel overhead), and one
block's, the embedding's and the head's kernels for one micro-batch on one TP rank.

GEMM: t = overhead + max(FLOPs / (peak * matmul_efficiency), bytes / (HBM * hbm_efficiency)),
all divided by the sustained fraction. The roofline makes the efficiency depend on shape:
large square GEMMs saturate at the accelerator's measured matmul efficiency (MAMF / peak,
comm_hw.md section 4.3); skinny ones (attention's K = head_dim) hit the memory roof; tiny ones
pay the fixed overhead (Williams et al. 2009 roofline; Calculon's size-dependent efficiency).
Elementwise kernels are memory-bound: bytes / (HBM * hbm_efficiency). A backward GEMM is the
dgrad + wgrad pair of its forward (`Gemm.backward`); a fused attention kernel runs at its own
sustained rate. The kernels and their shapes are `plan/kernels.py`'s.

Recompute (Korthikanti et al. 2022 sec. 5): full redoes a block's forward before its backward,
selective only the attention core (QK^T, softmax, dropout, context; the fused kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import NamedTuple

from modelplan.count.attention import FusedAttention
from modelplan.count.blocks import Block
from modelplan.count.checkpointing import checkpointed_share
from modelplan.plan.automodel_attention import with_automodel_attention
from modelplan.plan.engine import MEGATRON_2021, EngineSettings
from modelplan.plan.expert_bias import with_expert_bias
from modelplan.plan.expert_clamp import with_expert_clamp
from modelplan.plan.fp8 import gemm_rate_factor, is_fp8_gemm, quantisation_bytes, weight_arrives_in_fp8
from modelplan.plan.fused_softmax import with_softmax_fallback
from modelplan.plan.grouped_gemm import extra_launch_s
from modelplan.plan.kernels import Elementwise, Gemm, embedding_kernels, head_kernels, layer_kernels
from modelplan.plan.recompute import modules_forward_s
from modelplan.plan.rotary_fusion import with_engine_rotary
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.transformer import TransformerSpec

KERNEL_HEAD_DIMS: dict[str, tuple[int, ...]] = {
    # flash-attn 2.x csrc/flash_attn/src/static_switch.h HEADDIM_SWITCH: a head dim runs the
    # kernel compiled for the next of these (head dim 112 runs the 128 kernel on zero-padded tiles)
    "fa2": (32, 64, 96, 128, 160, 192, 224, 256),
}
"""Head dims each fused-attention kernel is compiled for; kernels not listed (cuDNN's fused
attention, FlashAttention-3) are taken to run any head dim at its own width."""


def kernel_head_dim(kernel: str | None, head_dim: int) -> int:
    """The head dim `kernel`'s tiles compute for `head_dim`: the smallest compiled one that holds it
    (`KERNEL_HEAD_DIMS`), else `head_dim` itself (unlisted kernel, or wider than every template)."""
    return next((d for d in KERNEL_HEAD_DIMS.get(kernel or "", ()) if d >= head_dim), head_dim)


@dataclass(frozen=True)
class Roofline:
    """The rates a kernel time needs, resolved once per (accelerator, precision, cost model)."""

    matmul_flops_per_s: float
    """peak * matmul_efficiency * sustained_fraction."""
    hbm_bytes_per_s: float
    """HBM peak * hbm_efficiency * sustained_fraction."""
    overhead_s: float
    """Fixed time per kernel."""
    peak_flops_per_s: float
    """Dense peak of the precision (the MFU / HFU denominator)."""
    flash_fwd_flops_per_s: float = 0.0
    """Fused attention forward: 16-bit peak * flash_fwd_efficiency * sustained_fraction."""
    flash_bwd_flops_per_s: float = 0.0
    """Fused attention backward: 16-bit peak * its backward efficiency * sustained_fraction."""
    fp8_matmul_flops_per_s: float = 0.0
    """fp8 GEMMs (fp8 training's linear layers): fp8 peak * fp8 matmul efficiency *
    sustained_fraction (0 when the precision is not fp8: every GEMM is 16-bit)."""
    attention_kernel: str | None = None
    """The fused-attention kernel the rates are of (`Accelerator.attention_kernel`); its compiled
    head dims (`KERNEL_HEAD_DIMS`) set the FLOPs its tiles run."""

    @classmethod
    def of(cls, accelerator: Accelerator, precision: str, cost: CostModel,
           attention_kernels: tuple[str, ...] = (), tensor_rate: float = 1.0) -> "Roofline":
        """Rates for one accelerator running one precision under one cost model. The fused
        attention rates are those of the first of `attention_kernels` (the engine's preference)
        the accelerator lists, else the cost model's flash efficiencies. Under fp8 training only
        the linear layers' GEMMs run at the fp8 rate (`plan/fp8.py`); the other GEMMs and
        attention stay 16-bit (Transformer Engine / torchao). `tensor_rate` scales the tensor-core
        rates (GEMMs, fused attention) for the engine on this part (`plan/tensor_rate.py`)."""
        fp8 = precision == "fp8"
        peak = accelerator.peak_flops(precision)
        half = accelerator.peak_flops("bf16") if fp8 else peak
        kernel = accelerator.attention_kernel(attention_kernels)
        rates = accelerator.attention_rates(attention_kernels) or (cost.flash_fwd_efficiency, cost.flash_bwd_efficiency)
        fp8_eff = accelerator.matmul_efficiency_fp8 or accelerator.matmul_efficiency
        # tensor-core work: the fitted step fraction, the part's clock, the engine on this part
        sustained = cost.sustained_fraction * accelerator.sustained_clock_fraction * tensor_rate
        return cls(
            matmul_flops_per_s=half * accelerator.matmul_efficiency * sustained,
            hbm_bytes_per_s=accelerator.memory_bw_tbps * 1e12 * cost.hbm_efficiency * cost.sustained_fraction,
            overhead_s=cost.kernel_overhead_us * 1e-6,
            peak_flops_per_s=peak,
            flash_fwd_flops_per_s=half * rates[0] * sustained,
            flash_bwd_flops_per_s=half * rates[1] * sustained,
            fp8_matmul_flops_per_s=peak * fp8_eff * sustained if fp8 else 0.0,
            attention_kernel=kernel,
        )

    def gemm_time_s(self, gemm: Gemm, dtype_bytes: int, fp8_factor: float = 0.0) -> float:
        """Roofline time of one GEMM (Williams et al. 2009) plus the per-kernel overhead;
        `fp8_factor` > 0: an fp8 GEMM at that fraction of the fp8 rate, 1-byte operands."""
        if fp8_factor and self.fp8_matmul_flops_per_s:
            compute_s = gemm.flops / (self.fp8_matmul_flops_per_s * fp8_factor)
            memory_s = gemm.bytes_moved(1) / self.hbm_bytes_per_s
        else:
            compute_s = gemm.flops / self.matmul_flops_per_s
            memory_s = gemm.bytes_moved(dtype_bytes) / self.hbm_bytes_per_s
        return self.overhead_s + max(compute_s, memory_s)

    def gemm_efficiency(self, gemm: Gemm, dtype_bytes: int) -> float:
        """Achieved fraction of the dense peak for this shape."""
        return gemm.flops / (self.gemm_time_s(gemm, dtype_bytes) * self.peak_flops_per_s)

    def _tile_factor(self, op: FusedAttention) -> float:
        """FLOPs the kernel's tiles run per FLOP of `op`: both of its matmuls (Q K^T over the head
        dim, P V into it) run at the kernel's compiled head dim (`kernel_head_dim`)."""
        return kernel_head_dim(self.attention_kernel, op.head_dim) / op.head_dim if op.head_dim else 1.0

    def fused_fwd_s(self, op: FusedAttention) -> float:
        """Forward of a fused attention kernel at its own sustained rate on the FLOPs of its
        (head-dim padded) tiles, plus the overhead."""
        return self.overhead_s + op.fwd_flops * self._tile_factor(op) / self.flash_fwd_flops_per_s

    def fused_bwd_s(self, op: FusedAttention) -> float:
        """Backward of a fused attention kernel (recomputes the scores) at its own rate, on the
        FLOPs of its padded tiles."""
        return self.overhead_s + op.bwd_flops * self._tile_factor(op) / self.flash_bwd_flops_per_s

    def memory_time_s(self, nbytes: float) -> float:
        """Time to stream `nbytes` through HBM (memory-bound kernels, optimizer step)."""
        return nbytes / self.hbm_bytes_per_s

    def elementwise_fwd_s(self, op: Elementwise) -> float:
        """Forward time of a memory-bound op (each of its kernels pays the overhead)."""
        return op.kernels[0] * self.overhead_s + op.fwd_bytes / self.hbm_bytes_per_s

    def elementwise_bwd_s(self, op: Elementwise) -> float:
        """Backward time of a memory-bound op."""
        return op.kernels[1] * self.overhead_s + op.bwd_bytes / self.hbm_bytes_per_s


class KernelTimes(NamedTuple):
    """Kernel seconds of one micro-batch on one TP rank that do not depend on recompute."""

    fwd_gemm_s: float
    bwd_gemm_s: float
    fwd_elementwise_s: float
    bwd_elementwise_s: float
    core_fwd_s: float
    """Attention core (what selective recompute redoes): QK^T, softmax, dropout, context."""
    core_bwd_s: float
    head_fwd_s: float
    head_bwd_s: float
    embedding_fwd_s: float
    embedding_bwd_s: float
    linear_fwd_s: float = 0.0
    """The block's linear-layer GEMMs of the forward (no attention core), fp8 casts included."""
    modules_fwd_s: float = 0.0
    """The forward of the Megatron-core `--recompute-modules` the run names (`plan/recompute.py`)."""

    def recompute_s(self, recompute: str, ac_mode: str = "attention_core", op_sac_fraction: float = 0.0,
                    ac_every: int = 2, sac_saves_attention: bool = True) -> float:
        """The recomputed forward of one block (module docstring). `ac_mode` says what selective
        recompute redoes (`modelplan.count.checkpointing`): the attention core; under torchtitan's
        per-op SAC the unsaved matmuls (`op_sac_fraction` of the linear FLOPs) and every
        element-wise op (attention is saved, unless `sac_saves_attention` is False: then its core
        runs again too); layer-level modes one whole block in `ac_every`."""
        if recompute == "full":
            return self.fwd_gemm_s + self.fwd_elementwise_s
        if recompute == "selective":
            if ac_mode in ("layer_sac", "every_nth_block"):
                return checkpointed_share(ac_every) * (self.fwd_gemm_s + self.fwd_elementwise_s)
            if ac_mode == "modules":
                return self.modules_fwd_s
            if ac_mode == "op_sac":
                attention = 0.0 if sac_saves_attention else self.core_fwd_s
                return op_sac_fraction * self.linear_fwd_s + self.fwd_elementwise_s + attention
            return self.core_fwd_s
        return 0.0


def kernel_times(
    spec: TransformerSpec, tp: int, sequence_parallel: bool, micro_batch: int, seq_len: int, dtype_bytes: int,
    vocab_padded: int, roofline: Roofline, *, moe_layer: bool = False, ep: int = 1, capacity: int | None = None,
    cp: int = 1, attention: str = "eager", software: EngineSettings = MEGATRON_2021, scaled_gemm_factor: float = 1.0,
    block: Block | None = None,
    etp: int | None = None,
    memory_len: int | None = None,
    head_seq_len: int | None = None,
    embedding_seq_len: int | None = None,
) -> KernelTimes:
    """Roofline times of one block's, the head's and the embedding's kernels (`plan/kernels.py`);
    a backward GEMM is the dgrad + wgrad pair of its forward. A fused attention kernel (flash /
    sdpa) runs at its own sustained rate (`Roofline.fused_fwd_s`) and is the attention core.
    `software`: the engine's element-wise mode and, under fp8, its recipe: the linear layers'
    GEMMs at the fp8 rate (times `scaled_gemm_factor` for row- / block-scaled recipes) and their
    operands' quantisation passes as memory-bound time (`plan/fp8.py`). `block`: the block's kind
    (`plan/block_kernels.py`), `seq_len` the tokens per sequence it runs on; an encoder-decoder's
    cross-attention reads `memory_len` encoder tokens, its head runs on `head_seq_len` target tokens
    and its embedding on `embedding_seq_len` source tokens (each None: seq_len; `plan/stack_lengths.py`)."""
    d, s_local = dtype_bytes, seq_len // cp
    head_local = (seq_len if head_seq_len is None else head_seq_len) // cp
    embedding_local = (seq_len if embedding_seq_len is None else embedding_seq_len) // cp
    k = layer_kernels(spec, tp, micro_batch, seq_len, d, sequence_parallel, moe_layer=moe_layer, ep=ep,
                      capacity=capacity, cp=cp, attention=attention, elementwise=software.elementwise, block=block,
                      memory_len=seq_len if memory_len is None else memory_len, etp=etp,
                      norm_elementwise=software.norm_elementwise,
                      cp_fp32_merge=software.cp_fp32_merge)
    # Megatron's FusedScaleMaskSoftmax falls back to the fp32 PyTorch softmax for some shapes
    k = with_softmax_fallback(k, software.scale_mask_softmax, micro_batch, spec.heads // tp, s_local, seq_len, d,
                              spec.causal)
    k = with_engine_rotary(k, spec, software.framework, d, software.rope_fusion)  # Megatron's unfused rotary
    k = with_automodel_attention(k, spec, software.framework, d)  # AutoModel's eager rotary etc. (`automodel_attention.py`)
    k = with_expert_bias(k, spec, software.framework, d)  # Megatron's per-expert fc2 bias (`expert_bias.py`)
    k = with_expert_clamp(k, spec, software.framework, d)  # and its eager clamp before the activation
    recipe = software.fp8_recipe
    factor = gemm_rate_factor(recipe, scaled_gemm_factor) if recipe else 0.0

    def gemm_s(g) -> float:
        return roofline.gemm_time_s(g, d, factor if factor and is_fp8_gemm(g.name) else 0.0)

    fused_f = sum(roofline.fused_fwd_s(a) for a in k.fused)
    fused_b = sum(roofline.fused_bwd_s(a) for a in k.fused)
    linear_f = sum(gemm_s(g) for g in k.gemms if g not in k.attention_core_gemms)
    gemm_f = sum(gemm_s(g) for g in k.gemms) + fused_f
    gemm_b = sum(gemm_s(x) for g in k.gemms for x in g.backward()) + fused_b
    ew_f = sum(roofline.elementwise_fwd_s(e) for e in k.elementwise)
    ew_b = sum(roofline.elementwise_bwd_s(e) for e in k.elementwise)
    if recipe:  # quantise each fp8 GEMM's input (fwd) and output gradient (bwd)
        for g in k.gemms:
            if is_fp8_gemm(g.name):
                q_f, q_b = quantisation_bytes(recipe, d, g.m * g.batch, g.k, g.n, software.fp8_backend,
                                              weight_arrives_in_fp8(g.name, software.fp8_weights_gathered))
                ew_f += roofline.overhead_s + roofline.memory_time_s(q_f)
                ew_b += roofline.overhead_s + roofline.memory_time_s(q_b)
                linear_f += roofline.memory_time_s(q_f)
    # the routed experts launch one GEMM (and fp8 quantisation) per local expert (`grouped_gemm.py`)
    expert_f, expert_b = extra_launch_s(k.gemms, software.framework, bool(recipe), roofline.overhead_s)
    gemm_f, gemm_b, linear_f = gemm_f + expert_f, gemm_b + expert_b, linear_f + expert_f
    core_f = sum(roofline.gemm_time_s(g, d) for g in k.attention_core_gemms)
    core_f += sum(roofline.elementwise_fwd_s(e) for e in k.attention_core_elementwise)
    core_b = sum(roofline.gemm_time_s(x, d) for g in k.attention_core_gemms for x in g.backward())
    core_b += sum(roofline.elementwise_bwd_s(e) for e in k.attention_core_elementwise)
    core_f, core_b = core_f + fused_f, core_b + fused_b
    head_gemms, head_ew = head_kernels(spec, tp, micro_batch, head_local, d, vocab_padded, software.elementwise,
                                       software.norm_elementwise, software.loss_upcast, software.loss_kernel)
    emb_ew = embedding_kernels(spec, micro_batch, embedding_local, d)
    head_f = sum(roofline.gemm_time_s(g, d) for g in head_gemms) + sum(roofline.elementwise_fwd_s(e) for e in head_ew)
    head_b = sum(roofline.gemm_time_s(x, d) for g in head_gemms for x in g.backward())
    head_b += sum(roofline.elementwise_bwd_s(e) for e in head_ew)
    modules_f = modules_forward_s(spec, block, moe_layer, software.recompute_modules, k, gemm_s,
                                  roofline.elementwise_fwd_s, core_f)
    return KernelTimes(gemm_f, gemm_b, ew_f, ew_b, core_f, core_b, head_f, head_b,
                       sum(roofline.elementwise_fwd_s(e) for e in emb_ew),
                       sum(roofline.elementwise_bwd_s(e) for e in emb_ew), linear_f, modules_f)
