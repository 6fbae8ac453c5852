"""The kernels one tensor-parallel rank runs for one transformer block, the embedding and the head.

GEMMs with their shapes (so their efficiency can depend on shape) and memory-bound elementwise
kernels with the bytes they move, for one micro-batch, following Megatron-LM's fused kernels
(fused scale-mask-softmax, fused bias-GeLU, fused bias-dropout-add, apex LayerNorm) and its
unfused attention (the s x s score matrix goes through HBM). Shapes are per tensor-parallel
rank: column-parallel GEMMs split N, row-parallel GEMMs split K (Shoeybi et al. 2019).
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.count.attention import FusedAttention, is_fused
from modelplan.count.eager import RMSNORM_KERNELS, SWIGLU_KERNELS, rmsnorm_bytes, swiglu_bytes
from modelplan.count.loss_kernels import loss_kernel_bytes, loss_kernel_launches
from modelplan.count.blocks import Block, block_of
from modelplan.count.seq2seq import cross_memory_len, separate_cross
from modelplan.count.cca import router_mlp_gemms
from modelplan.count.hyperconn import hc_gemm_shapes
from modelplan.plan.block_kernels import cross_kernels, mixer_kernels
from modelplan.plan.extras import head_transform_kernels, layer_extra_kernels
from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.plan.relative_kernels import relative_gemms
from modelplan.plan.parallel.tp import local_kv_heads
from modelplan.specs.extras import decoder_width
from modelplan.specs.attention_shape import for_block
from modelplan.specs.tp_kv_heads import attention_kv_heads
from modelplan.specs.transformer import TransformerSpec

__all__ = ["Elementwise", "Gemm", "LayerKernels", "embedding_kernels", "head_kernels", "layer_kernels",
           "moe_mlp_kernels", "norm_kernel"]


@dataclass(frozen=True)
class LayerKernels:
    """One block's kernels on one TP rank; `attention_core` is what selective recompute redoes
    (eager: the score and context GEMMs and the softmax / dropout kernels, which are also in
    `gemms` and `elementwise`; flash: the one fused kernel, in `fused` only)."""

    gemms: tuple[Gemm, ...]
    elementwise: tuple[Elementwise, ...]
    attention_core_gemms: tuple[Gemm, ...]
    attention_core_elementwise: tuple[Elementwise, ...]
    fused: tuple[FusedAttention, ...] = ()


def moe_mlp_kernels(
    spec: TransformerSpec, tp: int, ep: int, tokens: int, dtype_bytes: int, capacity: int, etp: int | None = None,
    routed: int | None = None,
) -> tuple[list[Gemm], list[Elementwise]]:
    """The MoE MLP of one block on one TP rank of one expert-parallel rank (Megatron-core
    grouped GEMM experts, all-to-all dispatcher): the router on every token (replicated over tp),
    permute into the (E, capacity, h) dispatch buffer, the E/ep local experts each on the
    ep * capacity slots received (column/row split over tp like a dense MLP), unpermute with the
    combine weights, and the shared experts on every token. `capacity`: `plan/experts.py`. `etp`
    (Megatron-core expert tensor parallelism, None: tp): the routed experts split over etp ranks
    instead of tp, and each rank routes `routed` tokens (its sequence shard times etp, Megatron's
    dispatcher gathering over the expert-TP group only); the shared experts stay a tp-split dense
    MLP on every token."""
    moe, d, h = spec.moe, dtype_bytes, spec.hidden
    E, local, rows = moe.num_experts, moe.num_experts // ep, ep * capacity
    f = moe.expert_ffn_hidden // (etp or tp)
    routed = tokens if routed is None else routed
    inputs = 2 if spec.gated_mlp else 1
    router = [Gemm("mlp/router", routed, E, h)] if moe.router_mlp is None else [  # (T, h) @ (h, E), every tp rank
        Gemm(*shape) for shape in router_mlp_gemms(spec, routed)]  # ZAYA's router MLP (count/cca.py)
    gemms = [
        *router,
        Gemm("mlp/experts/in", rows, inputs * f, h, local),  # column-parallel, one per local expert
        Gemm("mlp/experts/out", rows, h, f, local),  # row-parallel
    ]
    buffer = E * capacity * h  # values of one dispatch buffer
    act_bytes = (3 * d, 5 * d) if spec.gated_mlp else (2 * d, 3 * d)
    ew = [
        Elementwise("mlp/router/softmax_topk", routed * E, 2 * d, 3 * d),
        Elementwise("mlp/permute", buffer, 2 * d, 2 * d),  # gather tokens into slots (bwd: scatter-add)
        Elementwise("mlp/unpermute", buffer, 2 * d, 3 * d),  # weighted combine (bwd: also dweights)
        Elementwise("mlp/experts/act", local * rows * f, *act_bytes),
    ]
    if moe.shared_experts:
        fs = moe.shared_experts * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden) // tp
        gemms += [Gemm("mlp/shared/in", tokens, inputs * fs, h), Gemm("mlp/shared/out", tokens, h, fs)]
        if moe.shared_expert_gate:  # Qwen2-MoE: sigmoid(x W_g), (T, h) @ (h, 1), every tp rank
            gemms.append(Gemm("mlp/shared_gate", tokens, 1, h))
        ew.append(Elementwise("mlp/shared/act", tokens * fs, *act_bytes))
    return gemms, ew


def layer_kernels(
    spec: TransformerSpec,
    tp: int,
    micro_batch: int,
    seq_len: int,
    dtype_bytes: int,
    sequence_parallel: bool = False,
    *,
    moe_layer: bool = False,
    ep: int = 1,
    capacity: int | None = None,
    cp: int = 1,
    attention: str = "eager",
    elementwise: str = "fused",
    block: Block | None = None,
    memory_len: int = 0,
    etp: int | None = None,
    norm_elementwise: str | None = None,
    cp_fp32_merge: bool = False,
) -> LayerKernels:
    """Kernels of one block for one micro-batch on one TP rank (Megatron-LM layout); with
    `moe_layer` the MLP is the mixture of experts of `moe_mlp_kernels` (capacity: token slots per
    expert, default one per token). With context parallelism a rank holds s/cp tokens of each
    sequence and scores its s/cp queries against all s keys (ring attention: cp blocks of
    (s/cp)^2, priced as one (s/cp) x s product; Liu et al. 2023). `attention` 'flash' / 'sdpa'
    replaces the score GEMM, softmax, dropout and context GEMM by one fused kernel
    (`modelplan.count.attention.FusedAttention`), causal for decoders. `elementwise` 'eager':
    RMSNorm, SwiGLU and rotary run as eager PyTorch composites (`modelplan.count.eager`). `block`:
    the kind of block (`count.blocks.Block`; default: the model's first dense or MoE block), whose
    mixer is `block_kernels.py`'s; a decoder block of an encoder-decoder cross-attends to
    `memory_len` encoder tokens per sequence, a decoder built alone to its `seq2seq.cross_memory`
    image tokens (BLIP, VisionEncoderDecoder, Pix2Struct: `count.seq2seq.memory_cross_flops`). `cp_fp32_merge`: the ring's per-step fp32 merges
    of PyTorch's context-parallel SDPA join the attention core (`cp_merge_kernel`)."""
    d, b, s, h = dtype_bytes, micro_batch, seq_len, spec.hidden
    s_q = s // cp  # this rank's queries (and tokens) of each sequence
    tokens = b * s_q
    if block is None:
        kind = next((i for i in range(spec.layers) if spec.is_moe_layer(i) == moe_layer), 0)
        block = block_of(spec, kind)
    spec = for_block(spec, block)  # its layer type's sizes, its MLP width (specs/attention_shape.py)
    ffn_local = spec.ffn_hidden // tp
    # LayerNorm, dropout and residual run on all b*s*h values unless sequence parallel shards them
    # (Korthikanti et al. 2022, sec. 4.2.2).
    hidden_values = tokens * h // tp if sequence_parallel else tokens * h
    mask = 1 if spec.dropout else 0  # 1-byte dropout mask (Korthikanti et al. 2022, sec. 4.1)
    fused = is_fused(attention)
    eager = elementwise == "eager"
    mixer = mixer_kernels(spec, block, tp, b, s_q, s, d, fused, eager)
    gemms = mixer.gemms + ([mixer.out] if mixer.out is not None else [])  # none: a mixer-free block
    core, flash = list(mixer.core), list(mixer.fused)
    if cp_fp32_merge and cp > 1:
        kv_share = local_kv_heads(attention_kv_heads(spec), tp) / max(1, spec.heads // tp)
        core += [cp_merge_kernel(a, cp, kv_share) for a in flash]
    image_memory = cross_memory_len(spec)  # a decoder built alone whose encoder_attn reads image tokens
    if block.cross or image_memory:
        kv_in = (spec.seq2seq.cross_input or h) if image_memory else h  # VisionEncoderDecoder: Linear(kdim, h)
        cross = cross_kernels(spec, tp, b, s_q, memory_len if block.cross else image_memory, d, fused, kv_in)
        # T5Gemma 2's merged attention: only k/v of the encoder output and the scores over it are extra
        own = separate_cross(spec, block) or bool(image_memory)
        gemms += cross.gemms + [cross.out] if own else cross.gemms[1:]  # [q, kv, scores]
        core += cross.core
        flash += cross.fused
    if block.mlp and not moe_layer:
        gemms += [
            Gemm("mlp/in", tokens, (2 if spec.gated_mlp else 1) * ffn_local, h),  # column-parallel
            Gemm("mlp/out", tokens, h, ffn_local),  # row-parallel
        ]
    gemms += side_path_gemms(spec, tokens)  # Gemma 3n / 4 per-layer input and LAuReL (replicated)
    gemms += relative_gemms(spec, block, tp, b, s_q)  # DeBERTa, LongT5 (plan/relative_kernels.py)
    pk = spec.product_key_experts
    if block.mlp and not moe_layer and pk is not None:  # Doge's product-key experts (count/product_key.py), replicated
        gemms += [Gemm("mlp/pk_router", tokens, 2 * pk.num_keys, h),
                  Gemm("mlp/pk_experts/down", 1, pk.top_k, h, tokens), Gemm("mlp/pk_experts/up", 1, h, pk.top_k, tokens)]
    norm = norm_kernel("norm", spec, hidden_values, d, (norm_elementwise or elementwise) == "eager")
    # fused bias-dropout-add after each row-parallel GEMM: reads out and residual, writes sum
    # (+ mask); bwd reads dy (+ mask), writes dx and reads dy again for the bias gradient.
    bda = Elementwise("bias_dropout_add", hidden_values, 3 * d + mask, 3 * d + mask)
    # fused bias-activation on the MLP input projection output(s): gated reads 2, writes 1.
    if spec.gated_mlp:
        act = (Elementwise("mlp/act", tokens * ffn_local, *swiglu_bytes(d), SWIGLU_KERNELS) if eager
               else Elementwise("mlp/act", tokens * ffn_local, 3 * d, 5 * d))
    else:
        act = Elementwise("mlp/act", tokens * ffn_local, 2 * d, 3 * d)
    separate = separate_cross(spec, block) or bool(image_memory)  # encoder_attn_layer_norm and its residual add
    sublayers = (block.mixer != "mlp") + separate + block.mlp
    other = [norm] * (spec.num_norms_per_layer - block.no_input_norm + separate) + [bda] * sublayers
    extra_gemms, extra_ew = layer_extra_kernels(spec, block, tp, tokens, hidden_values, d)  # plan/extras.py
    gemms += extra_gemms
    other += extra_ew
    if block.mlp and moe_layer:
        routed = tokens * etp // tp if etp else tokens  # etp < tp: each rank routes its sequence shard
        moe_gemms, moe_ew = moe_mlp_kernels(spec, tp, ep, tokens, d, capacity if capacity is not None else routed,
                                            etp, routed)
        gemms += moe_gemms
        other += moe_ew
    elif block.mlp:
        other.append(act)
    other += mixer.elementwise
    if spec.parallel_block:
        other.remove(bda)  # one residual sum of attention + MLP
    core_gemms = tuple(g for g in gemms if g.name.endswith(("/scores", "/context")))
    return LayerKernels(tuple(gemms), tuple(other) + tuple(core), core_gemms, tuple(core), tuple(flash))


def side_path_gemms(spec: TransformerSpec, tokens: int) -> list[Gemm]:
    """The per-layer input's gate Linear(h, w) and projection Linear(w, h), LAuReL's Linear(h, r)
    and Linear(r, h) (count/side_paths.py), every rank whole; AltUp's tiny mixes are not priced."""
    h, out = spec.hidden, []
    if spec.per_layer_input is not None:
        w = spec.per_layer_input.width
        out += [Gemm("per_layer_input/gate", tokens, w, h), Gemm("per_layer_input/proj", tokens, h, w)]
    if spec.laurel_rank is not None:
        r = spec.laurel_rank
        out += [Gemm("laurel/left", tokens, r, h), Gemm("laurel/right", tokens, h, r)]
    return out + [Gemm(*shape) for shape in hc_gemm_shapes(spec, tokens)]  # DeepSeek-V4's hyper-connections


PYTORCH_CP_MERGE_FWD_BYTES = 38
"""HBM bytes per output element of one forward ring-step merge in PyTorch's context-parallel SDPA
(torch/distributed/tensor/experimental/_attention.py `_SDPAMerger.step`, convert_to_f32 True):
the step's bf16 output cast to fp32 (read 2, write 4), out - block_out (4 + 4, 4), times
sigmoid(block_lse - lse) (4, 4), out minus that (4 + 4, 4); the lse terms are per row, not per
element. The rank holding the sequence's last chunk merges whole outputs at every step (the
round-robin load balance gives the others half-size merges on some steps): 6 + 12 + 8 + 12."""
PYTORCH_CP_MERGE_BWD_Q_BYTES = 14
"""Per query-side element, per backward ring step (`_templated_ring_attention_backward`): the
step's bf16 dQ added into the fp32 accumulator (read 4 + 2, write 4) and the SDPA backward's
own rowsum(dO * O) pre-pass over this step's output and its gradient (read 2 + 2)."""
PYTORCH_CP_MERGE_BWD_KV_BYTES = 36
"""Per K and V element (each), per backward ring step: the step's dK / dV added into the fp32
accumulators travelling the ring (read 4 + 2, write 4) and their torch.cat into the send buffer
(read 4, write 4): 2 x 18."""
PYTORCH_CP_MERGE_KERNELS = (6, 4)
"""Kernels per ring step: cast, sub, sigmoid, mul, sub, logsigmoid (forward); dQ add, dK add, dV
add, cat (backward)."""


def cp_merge_kernel(attention: FusedAttention, cp: int, kv_share: float) -> Elementwise:
    """The cp - 1 ring steps' merges of PyTorch's context-parallel SDPA for one fused attention
    call: memory-bound passes over its output (batch x s_q x head_dim values), plus the backward's
    K and V accumulators (`kv_share` = local kv heads / local query heads of them) (constants above)."""
    steps = cp - 1
    values = attention.batch * attention.s_q * attention.head_dim
    bwd = PYTORCH_CP_MERGE_BWD_Q_BYTES + PYTORCH_CP_MERGE_BWD_KV_BYTES * kv_share
    kernels = (steps * PYTORCH_CP_MERGE_KERNELS[0], steps * PYTORCH_CP_MERGE_KERNELS[1])
    return Elementwise(f"{attention.name}/cp_merge", values, steps * PYTORCH_CP_MERGE_FWD_BYTES, steps * bwd, kernels)


def norm_kernel(name: str, spec: TransformerSpec, values: int, d: int, eager: bool) -> Elementwise:
    """One norm over `values` elements: fused (fwd reads x, writes y; bwd reads x, dy, writes
    dx) or, for RMSNorm in eager PyTorch, its composite (`count.eager.rmsnorm_bytes`; LayerNorm
    is one native kernel either way)."""
    if eager and spec.norm == "rmsnorm":
        return Elementwise(name, values, *rmsnorm_bytes(d), RMSNORM_KERNELS)
    return Elementwise(name, values, 2 * d, 3 * d)


def head_kernels(
    spec: TransformerSpec, tp: int, micro_batch: int, seq_len: int, dtype_bytes: int, vocab_padded: int,
    elementwise: str = "fused", norm_elementwise: str | None = None, loss_upcast: bool = True,
    loss_kernel: str | None = None,
) -> tuple[tuple[Gemm, ...], tuple[Elementwise, ...]]:
    """Output projection and the cross-entropy over the vocab-parallel logits on the last stage,
    as the engine's loss kernels run it (`count.loss_kernels`; None: eager
    `F.cross_entropy(logits.float())` for eager element-wise ops, on the d-byte logits when
    `loss_upcast` is False, else Megatron's unfused `vocab_parallel_cross_entropy`)."""
    tokens = micro_batch * seq_len
    vocab_local = vocab_padded // tp
    transform_gemms, transform_ew = head_transform_kernels(spec, tokens, dtype_bytes)  # BERT MLM transform
    gemms = tuple(transform_gemms) + ((Gemm("head/logits", tokens, vocab_local, decoder_width(spec)),)
                                      if spec.lm_head else ())
    d = dtype_bytes
    kind = loss_kernel or ("eager" if elementwise == "eager" else "megatron")
    loss = Elementwise("head/cross_entropy", tokens * vocab_local, *loss_kernel_bytes(kind, d, loss_upcast),
                       loss_kernel_launches(kind))
    final_norm = norm_kernel("final_norm", spec, tokens * spec.hidden, d, (norm_elementwise or elementwise) == "eager")
    out = ((loss, final_norm) if spec.final_norm else (loss,)) + tuple(transform_ew)
    if spec.final_logit_softcap is not None:  # Gemma 2: c tanh(z / c) over the logits, read and write
        out += (Elementwise("head/logit_softcap", tokens * vocab_local, 2 * d, 3 * d),)
    return gemms, out


def embedding_kernels(spec: TransformerSpec, micro_batch: int, seq_len: int, dtype_bytes: int) -> tuple[Elementwise, ...]:
    """Token (+ position) lookup and embedding dropout on the first stage: write b*s*h values."""
    values = micro_batch * seq_len * spec.hidden
    d = dtype_bytes
    reads = 2 if spec.position == "learned" else 1
    return (Elementwise("embedding", values, (reads + 1) * d, (reads + 1) * d),)
