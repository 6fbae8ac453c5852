"""Per-micro-batch quantities of one block, the embedding and the head on one TP rank, for one
(tp, sequence_parallel, micro_batch, recompute) choice: compute times, exposed TP collectives,
activation bytes. The search computes each once and reuses it for every pp / dp / vpp /
zero / schedule around it (plain floats, no pydantic in the hot loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from modelplan.count.checkpointing import checkpointed_share, op_sac_recomputed_fraction
from modelplan.plan.compute import Roofline
from modelplan.plan.engine import MEGATRON_2021, EngineSettings
from modelplan.plan.fp8 import gemm_rate_factor, is_fp8_gemm, quantisation_bytes
from modelplan.plan.kernels import embedding_kernels, head_kernels, layer_kernels
from modelplan.plan.listprice import TpPrices
from modelplan.count.memory import (
    activation_bytes_per_layer,
    embedding_activation_bytes,
    output_activation_bytes,
)
from modelplan.specs.costmodel import CostModel
from modelplan.specs.transformer import TransformerSpec


@dataclass(frozen=True)
class LayerTerms:
    """Seconds and bytes per micro-batch on one TP rank (block terms are per block)."""

    fwd_gemm_s: float
    fwd_elementwise_s: float
    bwd_gemm_s: float
    bwd_elementwise_s: float
    recompute_s: float
    """Compute of the recomputed forward (full: the whole block; selective: attention core)."""
    tp_fwd_s: float
    """Exposed TP collectives of the forward (2 AllReduce, or 2 AllGather + 2 ReduceScatter)."""
    tp_bwd_s: float
    tp_recompute_s: float
    tp_hidden_s: float
    """TP traffic overlapped with compute (when tp_exposed_fraction < 1)."""
    embedding_fwd_s: float
    embedding_bwd_s: float
    head_fwd_s: float
    head_bwd_s: float
    embedding_tp_s: float
    """Exposed TP collective of the vocab-parallel embedding (first stage)."""
    head_tp_s: float
    """Exposed TP collectives of the head and the vocab-parallel loss (last stage)."""
    activation_bytes: int
    """Bytes one block keeps per in-flight micro-batch (Korthikanti et al. 2022)."""
    working_bytes: int
    """Transient bytes of the block being recomputed / back-propagated (full: a whole block)."""
    embedding_activation_bytes: int
    head_activation_bytes: int
    boundary_bytes: int
    """Bytes of one stage-boundary send per micro-batch (b*s*h*dtype, /tp with SP)."""
    ep_fwd_s: float = 0.0
    """Expert-parallel AllToAll of the forward (dispatch + combine; MoE blocks only), exposed."""
    ep_bwd_s: float = 0.0
    ep_recompute_s: float = 0.0
    cp_fwd_s: float = 0.0
    """Context-parallel K, V ring of the forward not hidden behind the attention core, exposed."""
    cp_bwd_s: float = 0.0
    """K, V and dK, dV ring of the backward, exposed, plus the interference of the hidden part."""
    cp_recompute_s: float = 0.0
    cp_hidden_s: float = 0.0
    """Ring traffic hidden behind the attention core (for reference)."""

    @property
    def layer_fwd_s(self) -> float:
        """Forward of one block, with its exposed TP and EP collectives."""
        return self.fwd_gemm_s + self.fwd_elementwise_s + self.tp_fwd_s + self.ep_fwd_s + self.cp_fwd_s

    @property
    def layer_bwd_s(self) -> float:
        """Backward of one block with recompute and exposed TP and EP collectives."""
        return (self.bwd_gemm_s + self.bwd_elementwise_s + self.recompute_s + self.tp_bwd_s + self.tp_recompute_s
                + self.ep_bwd_s + self.ep_recompute_s + self.cp_bwd_s + self.cp_recompute_s)

    @property
    def compute_s(self) -> float:
        """Kernels of one block's forward and backward (no recompute, no communication)."""
        return self.fwd_gemm_s + self.fwd_elementwise_s + self.bwd_gemm_s + self.bwd_elementwise_s

    @property
    def tp_s(self) -> float:
        """Exposed TP collectives of one block, recompute included."""
        return self.tp_fwd_s + self.tp_bwd_s + self.tp_recompute_s

    @property
    def ep_s(self) -> float:
        """Exposed EP AllToAlls of one block, recompute included."""
        return self.ep_fwd_s + self.ep_bwd_s + self.ep_recompute_s

    @property
    def cp_s(self) -> float:
        """Exposed context-parallel ring traffic of one block, recompute included."""
        return self.cp_fwd_s + self.cp_bwd_s + self.cp_recompute_s


def cp_ring_exposure(cp: int, kv_send_s: float, core_fwd_s: float, core_bwd_s: float) -> tuple[float, float, float]:
    """(forward exposed, backward exposed, hidden) seconds of one block's ring attention.

    Each of the cp - 1 ring steps sends one K, V block (forward) or K, V and dK, dV (backward) to
    the next rank while computing attention on the block it holds, 1/cp of the attention core
    (Liu et al. 2023, ring attention: 'overlapping the communication of key-value blocks with
    the computation of blockwise attention'); a step is exposed by what its send outlasts it."""
    steps = cp - 1
    fwd = steps * max(0.0, kv_send_s - core_fwd_s / cp)
    bwd = steps * max(0.0, 2 * kv_send_s - core_bwd_s / cp)
    return fwd, bwd, steps * 3 * kv_send_s - fwd - bwd


def tp_exposure(tp_s: float, gemm_s: float, tp: int) -> float:
    """Exposed fraction of a block's TP collectives when they overlap the GEMMs (Transformer
    Engine userbuffers ring-exchange / torchtitan async TP: each AllGather / ReduceScatter is cut
    into tp chunks that move while the GEMM works on the previous one, so the first chunk waits and
    traffic beyond the GEMMs' time is exposed): max(tp_s - gemm_s, tp_s / tp) / tp_s."""
    if tp_s <= 0.0:
        return 1.0
    return max(tp_s - gemm_s, tp_s / tp) / tp_s


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


def kernel_times(
    spec: TransformerSpec, tp: int, sequence_parallel: bool, micro_batch: int, seq_len: int, dtype_bytes: int,
    vocab_padded: int, roofline: Roofline, *, moe_layer: bool = False, ep: int = 1, capacity: int | None = None,
    cp: int = 1, attention: str = "eager", software: EngineSettings = MEGATRON_2021, scaled_gemm_factor: float = 1.0,
) -> KernelTimes:
    """Roofline times of one block's, the head's and the embedding's kernels (`plan/kernels.py`);
    a backward GEMM is the dgrad + wgrad pair of its forward. A fused attention kernel (flash /
    sdpa) runs at its own sustained rate (`Roofline.fused_fwd_s`) and is the attention core.
    `software`: the engine's element-wise mode and, under fp8, its recipe: the linear layers'
    GEMMs at the fp8 rate (times `scaled_gemm_factor` for row- / block-scaled recipes) and their
    operands' quantisation passes as memory-bound time (`plan/fp8.py`)."""
    d, s_local = dtype_bytes, seq_len // cp
    k = layer_kernels(spec, tp, micro_batch, seq_len, d, sequence_parallel, moe_layer=moe_layer, ep=ep,
                      capacity=capacity, cp=cp, attention=attention, elementwise=software.elementwise)
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
                q_f, q_b = quantisation_bytes(recipe, d, g.m * g.batch, g.k, g.n, software.fp8_backend)
                ew_f += roofline.overhead_s + roofline.memory_time_s(q_f)
                ew_b += roofline.overhead_s + roofline.memory_time_s(q_b)
                linear_f += roofline.memory_time_s(q_f)
    core_f = sum(roofline.gemm_time_s(g, d) for g in k.attention_core_gemms)
    core_f += sum(roofline.elementwise_fwd_s(e) for e in k.attention_core_elementwise)
    core_b = sum(roofline.gemm_time_s(x, d) for g in k.attention_core_gemms for x in g.backward())
    core_b += sum(roofline.elementwise_bwd_s(e) for e in k.attention_core_elementwise)
    core_f, core_b = core_f + fused_f, core_b + fused_b
    head_gemms, head_ew = head_kernels(spec, tp, micro_batch, s_local, d, vocab_padded, software.elementwise)
    emb_ew = embedding_kernels(spec, micro_batch, s_local, d)
    head_f = sum(roofline.gemm_time_s(g, d) for g in head_gemms) + sum(roofline.elementwise_fwd_s(e) for e in head_ew)
    head_b = sum(roofline.gemm_time_s(x, d) for g in head_gemms for x in g.backward())
    head_b += sum(roofline.elementwise_bwd_s(e) for e in head_ew)
    return KernelTimes(gemm_f, gemm_b, ew_f, ew_b, core_f, core_b, head_f, head_b,
                       sum(roofline.elementwise_fwd_s(e) for e in emb_ew),
                       sum(roofline.elementwise_bwd_s(e) for e in emb_ew), linear_f)


def build_layer_terms(
    spec: TransformerSpec,
    tp: int,
    sequence_parallel: bool,
    micro_batch: int,
    recompute: str,
    seq_len: int,
    dtype_bytes: int,
    vocab_padded: int,
    roofline: Roofline,
    tp_priced: TpPrices,
    tp_priced_no_recompute: TpPrices,
    cost: CostModel,
    *,
    moe_layer: bool = False,
    ep: int = 1,
    capacity: int | None = None,
    ep_priced: tuple[float, float] = (0.0, 0.0),
    cp: int = 1,
    cp_kv_send_s: float = 0.0,
    times: KernelTimes | None = None,
    attention: str = "eager",
    software: EngineSettings = MEGATRON_2021,
) -> LayerTerms:
    """Price one block, the embedding and the head for one micro-batch on one TP rank; the TP
    collectives come from the priced communication list (with and without recompute).

    `moe_layer`: the block's MLP is a mixture of experts over `ep` ranks with `capacity` token
    slots per expert; `ep_priced` is its AllToAll time per micro-batch from the list (without,
    with recompute), all on the critical path (comm_hw.md section 5.6: EP all-to-all 100 %
    exposed unless overlap is enabled).

    `cp`: context parallelism, the rank holds seq_len/cp tokens of each sequence; one K, V block
    takes `cp_kv_send_s` to the next rank of the ring (`cp_ring_exposure`).

    `times`: the `kernel_times` of the same block (the evaluator shares them between recompute
    choices); computed here when not given. `attention`: the kernel (`TrainingSpec.attention`).
    `software`: the engine (`plan/engine.py`): what 'selective' recomputes (`ac_mode`), element-wise
    mode, loss, fp8 recipe and whether TP collectives overlap the GEMMs (`tp_exposure`)."""
    d = dtype_bytes
    s_local = seq_len // cp
    if times is None:
        times = kernel_times(spec, tp, sequence_parallel, micro_batch, seq_len, d, vocab_padded, roofline,
                             moe_layer=moe_layer, ep=ep, capacity=capacity, cp=cp, attention=attention,
                             software=software)
    gemm_f, gemm_b, ew_f, ew_b, core_f, core_b = times[:6]
    head_f, head_b, emb_f, emb_b = times.head_fwd_s, times.head_bwd_s, times.embedding_fwd_s, times.embedding_bwd_s
    mode = software.ac_mode if not moe_layer or software.ac_mode != "op_sac" else "attention_core"
    layer_level = recompute == "selective" and mode in ("layer_sac", "every_nth_block")
    if recompute == "full":
        recompute_s = gemm_f + ew_f
    elif layer_level:  # one block in ac_every recomputed whole
        recompute_s = checkpointed_share(software.ac_every) * (gemm_f + ew_f)
    elif recompute == "selective" and mode == "op_sac" and attention != "eager":
        # torchtitan per-op SAC: the unsaved matmuls and every element-wise op (attention saved)
        recompute_s = op_sac_recomputed_fraction(spec) * times.linear_fwd_s + ew_f
    elif recompute == "selective":
        # Korthikanti et al. 2022 sec. 5: redo QK^T, softmax, dropout and the context matmul
        recompute_s = core_f
    else:
        recompute_s = 0.0

    # Tensor-parallel collectives (Shoeybi et al. 2019 f/g operators; Korthikanti et al. 2022
    # sec. 4.2.2 for sequence parallelism): forward and backward move the same volume.
    block = tp_priced_no_recompute.block_s
    tp_rec = tp_priced.block_s - block
    if layer_level:  # the checkpointed blocks' forward collectives run again
        tp_rec = checkpointed_share(software.ac_every) * block / 2
    total_tp = block + tp_rec
    linear_s = times.linear_fwd_s * 3  # forward, dgrad and wgrad GEMMs of the linear layers
    exposed = tp_exposure(total_tp, linear_s, tp) if software.tp_comm_overlap else cost.tp_exposed_fraction
    hidden = (1 - exposed) * total_tp

    cp_f, cp_b, ring_hidden = cp_ring_exposure(cp, cp_kv_send_s, core_f, core_b) if cp > 1 else (0.0, 0.0, 0.0)
    rec_f = rec_hidden = 0.0
    if recompute == "full" and cp > 1:  # the recomputed forward runs the ring again
        rec_f, rec_hidden = cp_f, (cp - 1) * cp_kv_send_s - cp_f

    kind = next((i for i in range(spec.layers) if spec.is_moe_layer(i) == moe_layer), None)

    fp8_inputs = software.fp8_recipe is not None and software.fp8_backend == "te"

    def acts(rc: str, ac_mode: str = "attention_core") -> int:
        kept = activation_bytes_per_layer(spec, micro_batch, s_local, d, tp, sequence_parallel, rc, kind, attention,
                                          ac_mode, software.elementwise, software.ac_every, fp8_inputs)
        if cp > 1 and rc == "none":  # s/cp queries against all s keys: cp x the (s/cp)^2 score term
            score = kept - activation_bytes_per_layer(spec, micro_batch, s_local, d, tp, sequence_parallel,
                                                      "selective", kind, attention, elementwise=software.elementwise)
            kept += (cp - 1) * score
        return kept

    stored = acts(recompute, mode)
    if recompute == "full" or layer_level:
        working = acts("none")
    elif recompute == "selective":
        working = acts("none") - stored
    else:
        working = 0
    # Korthikanti et al. 2022 sec. 4.3: token ids and embedding-dropout mask (first stage);
    # output layer + cross-entropy 4sbh(1 + V/h)/t (last stage).
    emb_act = embedding_activation_bytes(spec, micro_batch, s_local, tp, sequence_parallel)
    head_act = output_activation_bytes(spec, micro_batch, s_local, d, tp, software.fused_cross_entropy)
    return LayerTerms(
        fwd_gemm_s=gemm_f,
        fwd_elementwise_s=ew_f,
        bwd_gemm_s=gemm_b,
        bwd_elementwise_s=ew_b,
        recompute_s=recompute_s,
        tp_fwd_s=exposed * block / 2,
        tp_bwd_s=exposed * block / 2 + cost.overlap_interference * hidden,
        tp_recompute_s=exposed * tp_rec,
        tp_hidden_s=hidden,
        embedding_fwd_s=emb_f,
        embedding_bwd_s=emb_b,
        head_fwd_s=head_f,
        head_bwd_s=head_b,
        embedding_tp_s=exposed * tp_priced.embedding_s,
        head_tp_s=exposed * tp_priced.head_s,
        activation_bytes=stored,
        working_bytes=working,
        embedding_activation_bytes=emb_act,
        head_activation_bytes=head_act,
        boundary_bytes=tp_priced.boundary_bytes,
        ep_fwd_s=ep_priced[0] / 2,
        ep_bwd_s=ep_priced[0] / 2,
        ep_recompute_s=ep_priced[1] - ep_priced[0],
        cp_fwd_s=cp_f,
        cp_bwd_s=cp_b + cost.overlap_interference * ring_hidden,
        cp_recompute_s=rec_f + cost.overlap_interference * rec_hidden,
        cp_hidden_s=ring_hidden + rec_hidden,
    )
