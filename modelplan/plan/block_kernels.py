"""The mixer kernels of one block by its kind (`count.blocks.Block`) on one tensor-parallel rank:
q/k/v attention (full, sliding-window or chunked keys), Multi-head Latent Attention, the Mamba
mixer and T5's cross-attention. `plan/kernels.py` adds the norms, residuals and the MLP.

- attention: the baseline Megatron layout (column-parallel q/k/v, row-parallel out); an eager
  kernel scores every query against all s keys and masks (HF eager, Megatron's unfused softmax),
  a fused kernel computes only the visible tiles: s_k = min(s, window) keys a query for a sliding
  block, its chunk for a chunked one (`count.attention.visible_fraction`). q/k norms add a norm
  pass over Q and K; a soft-cap a tanh pass over the eager scores; partial rotary rotates only its
  share of each head; NoPE blocks rotate nothing.
- MLA (DeepSeek-V2 eq. 9-19; Megatron-core MLASelfAttention under tp): the latent projections
  q_a and kv_a run whole on every tp rank (latents replicated), q_b / kv_b are column-parallel
  over the heads, out row-parallel; the core scores d_h + d_R dims and mixes d_v values.
- Mamba (Gu & Dao 2023, Algorithm 2) with d_inner split over tp as Megatron-core's Mamba mixer
  splits its channels: in_proj column-parallel, x_proj row-parallel (its dt, B, C output is
  all-reduced over tp: `parallel/tp.py`), dt_proj column-parallel, out_proj row-parallel; the
  depthwise conv and the selective scan are memory-bound passes over the local channels.
- cross-attention (T5): q from the decoder tokens, k and v from the encoder's, scores against
  the encoder length.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from modelplan.count.attention import FusedAttention
from modelplan.count.attention_extras import attention_calls, gate_width
from modelplan.count.blocks import Block
from modelplan.count.eager import ROTARY_KERNELS, rotary_bytes
from modelplan.count.mixers import LINEAR_MIXERS, PARALLEL_MAMBA2
from modelplan.plan.extras import PRICED_EXTRAS
from modelplan.plan.compressed_attention import compressed_attention_kernels
from modelplan.count.qsa import read_keys
from modelplan.count.mla_extras import mla_gate_width, own_indexer
from modelplan.plan.dsa import indexer_elementwise, indexer_gemms, sparse_core
from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.plan.linear_mixers import linear_mixer_kernels
from modelplan.plan.parallel.tp import local_kv_heads
from modelplan.specs.attention_shape import for_block
from modelplan.specs.transformer import TransformerSpec


PRICED: frozenset[str] = frozenset({
    # kernels of their own here or in kernels.py, shards in shard.py, calls in parallel/tp.py
    "mla", "layer_types=sliding_attention", "layer_types=chunked_attention", "layer_types=mamba", "mlp=false",
    "layer_types=mamba2", "layer_types=gated_deltanet", "layer_types=mlp", "layer_types=parallel_mamba2",
    "layer_types=short_conv", "layer_types=rglru", "layer_types=lightning", "layer_types=rwkv",
    "layer_types=mlstm",
    "attention_output_gate", "deltanet.kda", "deltanet.kda_full_rank_gates",  # plan/linear_mixers.py
    # attention_kernels below (count/attention_extras.py, specs/attention_shape.py)
    "head_gate", "differential_attention", "v_head_dim", "attention_by_type", "value_is_key",
    "attention_experts", "dynamic_mask", "kv_shared_ffn_hidden", "product_key_experts",
    "moe.output_bias", "residual_weights", "moe.router_scales",  # shards only (element-wise adds / scales)
    "moe.branch_norms",  # its norms' passes are not priced (the block's own are)
    "mla.indexer",  # plan/dsa.py
    "compressed_attention",  # plan/compressed_attention.py
    "cca", "moe.router_mlp", "residual_affine", "token_indexer",  # attention_kernels here, plan/kernels.py; shards (element-wise adds)
    "mla.rope_key_norm",  # its norm's pass: not priced (the latent norms are)
    "mla.softmax_scales", "mla.nope_layers", "mla.kv_source", "mla.indexer.query_from_hidden",  # for_block sizes
    "hyper_connections",  # plan/kernels.py side_path_gemms (count/hyperconn.py); shards replicated
    "qk_norm", "attn_logit_softcap", "final_logit_softcap", "rotary_fraction", "nope_full_attention",
    "moe.shared_expert_gate", "mtp_layers",
    # shards only (their compute is a per-head value or a scalar fused into a neighbour kernel)
    "attention_sinks", "attention_scale", "qkv_clip", "embedding_scale", "residual_scale", "logit_scale",
    "norm_affine=false", "head_bias_copy", "moe.expert_bias", "moe.score_correction_param",
    # the same kernels as the baseline block (norm count, activation pass, router GEMM and top-k)
    "norm_placement=sandwich", "norm_placement=output", "norm_placement=post", "activation=swiglu_clamp",
    "moe.router=sigmoid", "moe.norm_topk_prob=false", "moe.router_score_correction", "moe.routed_scaling",
    "moe.router_groups", "moe.weights_on_input", "lm_head=false",
    # every block of both stacks, cross_kernels in decoder blocks, shards of both (pp 1 only: validate.py)
    "arch=encoder_decoder",
    "seq2seq.idle_cross_attention",  # shards in shard.py; cross_kernels over seq2seq.cross_memory in kernels.py
}) | PRICED_EXTRAS  # plan/extras.py
"""`specs.features` names the planner prices (the others are noted as priced as baseline blocks)."""


class MixerKernels(NamedTuple):
    """A block mixer's kernels, in forward order."""

    gemms: list[Gemm]
    """Linear layers, with the eager score and context GEMMs after the input projections."""
    elementwise: list[Elementwise]
    """Memory-bound passes outside the attention core (rotary, q/k norms, conv, scan)."""
    core: list[Elementwise]
    """Eager softmax (and dropout, soft-cap): what selective recompute redoes with the scores."""
    fused: list[FusedAttention]
    out: Gemm | None
    """The row-parallel output projection (kept apart: the MLP's GEMMs follow it in order)."""


def _core(name: str, spec: TransformerSpec, block: Block, b: int, heads: int, s_q: int, s: int, d_qk: int,
          d_v: int, d: int, fused: bool) -> tuple[list[Gemm], list[Elementwise], list[FusedAttention]]:
    """Scores, softmax and context of `heads` local heads (s_q queries, s keys)."""
    if fused:
        window = spec.sliding_window if block.mixer == "sliding_attention" else None
        chunk = spec.attention_chunk if block.mixer == "chunked_attention" else None
        # one kernel of head dim (d_qk + d_v) / 2: 2 s_q s_k (d_qk + d_v) FLOPs forward, as Q K^T + P V
        return [], [], [FusedAttention(f"{name}/core", b * heads, s_q, s, (d_qk + d_v) // 2, spec.causal and not
                                       block.cross, window, chunk)]
    gemms = [Gemm(f"{name}/scores", s_q, s, d_qk, b * heads),  # Q K^T per head, full s_q x s
             Gemm(f"{name}/context", s_q, d_v, s, b * heads)]  # softmax(QK^T) V per head
    scores = b * heads * s_q * s
    mask = 1 if spec.dropout else 0
    # Fused scale-mask-softmax: fwd reads scores, writes probs; bwd reads probs and dprobs, writes dscores
    core = [Elementwise(f"{name}/softmax", scores, 2 * d, 3 * d)]
    if spec.attn_logit_softcap is not None and name == "attention":  # c tanh(s / c): read, write
        core.insert(0, Elementwise(f"{name}/softcap", scores, 2 * d, 3 * d))
    if spec.dropout:
        # attention dropout: fwd reads probs, writes output and mask; bwd reads grad and mask
        core.append(Elementwise(f"{name}/dropout", scores, 2 * d + mask, 2 * d + mask))
    return gemms, core, []


def _rotary(spec: TransformerSpec, block: Block, values: int, d: int, eager: bool) -> list[Elementwise]:
    if not spec.rotary_in(block.mixer):
        return []
    rot = (*rotary_bytes(d), ROTARY_KERNELS) if eager else (2 * d, 2 * d)  # read and write q, k (fwd and bwd)
    return [Elementwise("attention/rotary", values, *rot)]


def attention_kernels(spec: TransformerSpec, block: Block, tp: int, b: int, s_q: int, s: int, d: int,
                      fused: bool, eager: bool) -> MixerKernels:
    """q/k/v self-attention of one block."""
    h, dh, tokens = spec.hidden, spec.dim_head, b * s_q
    heads, kv = spec.heads // tp, local_kv_heads(spec.num_kv_heads, tp)
    gate = heads if spec.attention_output_gate else 0  # Qwen3-Next: q_proj also emits a gate per head
    dv = spec.dim_value  # value heads' width (MiMo-V2-Flash v_head_dim)
    v_proj = 0 if spec.value_is_key else kv * dv  # Gemma 4 attention_k_eq_v: no v_proj
    kv_proj = 0 if block.kv_shared else kv * dh + v_proj  # Gemma 3n / 4 K/V-sharing blocks: q only
    gemms = [Gemm("attention/qkv", tokens, (heads + gate) * dh + kv_proj, h)]  # column-parallel
    g, core, flash = _core("attention", spec, block, b, heads, s_q, s, dh, dv, d, fused)
    if attention_calls(spec) == 2:  # DiffLlama: a second call over the same Q, K (count/attention_extras.py)
        g2, core2, flash2 = _core("attention/second", spec, block, b, heads, s_q, s, dh, dv, d, fused)
        g, core, flash = g + g2, core + core2, flash + flash2
    if spec.head_gate is not None:  # LFM3 / Laguna g_proj, column-parallel with the heads
        gemms.append(Gemm("attention/head_gate", tokens, gate_width(spec, heads), h))
    if spec.attention_experts is not None:  # JetMoE MoA router (replicated), before its top_k q projections
        gemms.append(Gemm("attention/router", tokens, spec.attention_experts, h))
    if spec.dynamic_mask:  # Doge dt_proj over the local values
        gemms.append(Gemm("attention/dynamic_mask", tokens, kv, kv * dv))
    if spec.token_indexer is not None:  # Qwen4-Exp's QSA (count/qsa.py): its projection and pooled-key scores
        ix = spec.token_indexer
        gemms += [Gemm("attention/indexer/proj", tokens, (ix.heads + 1) * ix.head_dim, h),
                  Gemm("attention/indexer/scores", s_q, s // ix.compress_ratio, ix.head_dim, b * ix.heads)]
        flash = [dataclasses.replace(f, window=read_keys(spec, s) if f.window is None else min(f.window, read_keys(spec, s)))
                 for f in flash]
    if spec.cca is not None:  # ZAYA's convs (count/cca.py): the grouped one a GEMM per head, the depthwise one a pass
        gemms.append(Gemm("attention/cca/grouped", tokens, dh, dh * spec.cca.grouped_kernel, heads + kv))
        conv = tokens * (heads + kv) * dh
        extra_ew = [Elementwise("attention/cca/depthwise", conv, 2 * d, 3 * d)]
    else:
        extra_ew = []
    rotated = int(dh * spec.rotary_fraction) if spec.rotary_fraction != 1.0 else dh
    ew = _rotary(spec, block, tokens * (heads + kv) * rotated, d, eager) + extra_ew
    if spec.qk_norm_in(block.mixer):  # a norm pass over Q and K
        ew.append(Elementwise("attention/qk_norm", tokens * (heads + kv) * dh, 2 * d, 3 * d))
    if gate or spec.head_gate is not None:  # attn * sigmoid(gate): read both, write; bwd reads them and dy, writes both grads
        ew.append(Elementwise("attention/gate", tokens * heads * dh, 3 * d, 5 * d))
    return MixerKernels(gemms + g, ew, core, flash, Gemm("attention/out", tokens, h, heads * dv))  # row-parallel


def mla_kernels(spec: TransformerSpec, block: Block, tp: int, b: int, s_q: int, s: int, d: int,
                fused: bool, eager: bool) -> MixerKernels:
    """Multi-head Latent Attention: replicated latents, heads split over tp."""
    mla, h, tokens = spec.mla, spec.hidden, b * s_q
    heads = spec.heads // tp
    if mla.q_lora_rank is None:
        gemms = [Gemm("attention/q", tokens, heads * mla.qk_head_dim, h)]  # column-parallel
        latents = 0
    else:
        r = mla.q_lora_rank
        gemms = [Gemm("attention/q_a", tokens, r, h),  # replicated latent
                 Gemm("attention/q_b", tokens, heads * mla.qk_head_dim, r)]  # column-parallel
        latents = r
    if not mla.kv_reused:  # Mistral Large 4's kv_source blocks read an earlier latent
        gemms.append(Gemm("attention/kv_a", tokens, mla.kv_lora_rank + mla.qk_rope_head_dim, h))  # replicated
    gemms.append(Gemm("attention/kv_b", tokens, heads * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank))
    g, core, flash = _core("attention", spec, block, b, heads, s_q, s, mla.qk_head_dim, mla.v_head_dim, d, fused)
    ew = [Elementwise("attention/latent_norms", tokens * (latents + mla.kv_lora_rank), 2 * d, 3 * d)]
    ew += _rotary(spec, block, tokens * (heads + 1) * mla.qk_rope_head_dim, d, eager)  # q rope dims, shared key
    if mla.indexer is not None:  # DeepSeek-V3.2 (plan/dsa.py): the core over the top-k keys, its own indexer
        flash = sparse_core(spec, flash)
        if own_indexer(spec) is not None:  # HY-V4's 'shared' blocks reuse an earlier top-k
            g, ew = g + indexer_gemms(spec, b, s_q, s), ew + indexer_elementwise(spec, b, s_q, s)
    if spec.head_gate is not None:  # HY-V4's gate_proj, column-parallel with the heads (count/mla_extras.py)
        gemms.append(Gemm("attention/head_gate", tokens, mla_gate_width(spec, heads), h))
    return MixerKernels(gemms + g, ew, core, flash, Gemm("attention/out", tokens, h, heads * mla.v_head_dim))


def mamba_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, d: int) -> MixerKernels:
    """The Mamba mixer with its d_inner channels split over tp."""
    ssm, h, tokens = spec.ssm, spec.hidden, b * s_q
    inner = ssm.inner // tp
    gemms = [Gemm("mamba/in_proj", tokens, 2 * inner, h),  # column-parallel: x and z
             Gemm("mamba/x_proj", tokens, ssm.dt_rank + 2 * ssm.state_size, inner),  # row-parallel (+ AllReduce)
             Gemm("mamba/dt_proj", tokens, inner, ssm.dt_rank)]  # column-parallel
    values = tokens * inner
    ew = [
        # depthwise causal conv: read x (and the kernel's k taps from cache), write its output; SiLU fused
        Elementwise("mamba/conv", values, 2 * d, 3 * d),
        # selective scan (fused kernel, sec. 3.3.2): per channel reads x, dt, z, writes y, and each
        # token's B, C (2N, shared by the channels); backward reads those and dy, writes dx, ddt, dz
        # and its share of dB, dC, recomputing the states in SRAM
        Elementwise("mamba/scan", values, (4 + 2 * ssm.state_size / inner) * d, (8 + 4 * ssm.state_size / inner) * d),
    ]
    return MixerKernels(gemms, ew, [], [], Gemm("mamba/out_proj", tokens, h, inner))  # row-parallel


def cross_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, memory_len: int, d: int,
                  fused: bool, kv_in: int | None = None) -> MixerKernels:
    """T5 cross-attention (Vaswani et al. 2017 sec. 3.2.3): decoder queries against the keys and values
    of `memory_len` encoder tokens per sequence, projected from `kv_in`-wide features (None: hidden):
    q 2 t h q, k / v 2 b m kv_in 2 kv, QK^T and AV 2 x 2 t m q, out 2 t q h FLOPs (whole model)."""
    h, dh, tokens = spec.hidden, spec.dim_head, b * s_q
    heads, kv = spec.heads // tp, local_kv_heads(spec.num_kv_heads, tp)
    block = Block("full_attention", False, True, False)
    gemms = [Gemm("cross_attention/q", tokens, heads * dh, h),  # column-parallel
             Gemm("cross_attention/kv", b * memory_len, 2 * kv * dh, kv_in or h)]  # from the encoder output
    g, core, flash = _core("cross_attention", spec, block, b, heads, s_q, memory_len, dh, dh, d, fused)
    return MixerKernels(gemms + g, [], core, flash, Gemm("cross_attention/out", tokens, h, heads * dh))


def mixer_kernels(spec: TransformerSpec, block: Block, tp: int, b: int, s_q: int, s: int, d: int,
                  fused: bool, eager: bool) -> MixerKernels:
    """The mixer of a block of kind `block`."""
    spec = for_block(spec, block)  # its layer type's attention sizes, its MLP width (specs/attention_shape.py)
    if block.mixer == "mamba":
        return mamba_kernels(spec, tp, b, s_q, d)
    if block.mixer in LINEAR_MIXERS:
        gemms, ew, out = linear_mixer_kernels(spec, block.mixer, tp, b, s_q, d)
        return MixerKernels(gemms, ew, [], [], out)
    if block.mixer == "mlp":  # a mixer-free MLP block (Nemotron-H)
        return MixerKernels([], [], [], [], None)
    if block.mixer == PARALLEL_MAMBA2:  # Falcon-H1: attention's kernels, then the Mamba-2 mixer's
        attn = attention_kernels(spec, block, tp, b, s_q, s, d, fused, eager)
        gemms, ew, out = linear_mixer_kernels(spec, "mamba2", tp, b, s_q, d)
        return MixerKernels(attn.gemms + gemms + [out], attn.elementwise + ew, attn.core, attn.fused, attn.out)
    if spec.compressed_attention is not None:  # DeepSeek-V4 (plan/compressed_attention.py)
        return MixerKernels(*compressed_attention_kernels(spec, block.compressor, tp, b, s_q, s, d, fused))
    if spec.mla is not None:
        return mla_kernels(spec, block, tp, b, s_q, s, d, fused, eager)
    return attention_kernels(spec, block, tp, b, s_q, s, d, fused, eager)
