"""Exact parameters of one block, by the kind of block it is (a `Block`), following PyTorch /
HuggingFace module conventions. Leaves are keyed relative to the block:

    attention/{qkv, out, qk_norm, sinks, relative_bias}     q/k/v attention (any layer type)
    attention/{q/down, q/norm, q/up, q, kv/down, kv/norm, kv/up, out}   MLA (DeepSeek-V2)
    mamba/{in_proj, conv, x_proj, dt_proj, ssm, norms, out_proj}        Mamba mixer
    mamba2/..., deltanet/...                                 Mamba-2 / gated DeltaNet (count/mixers.py)
    cross_attention/{qkv, out}                               decoder blocks of an encoder-decoder
    mlp/{in, out} or mlp/{router, experts, shared_experts, shared_gate}
    norm                                                     every norm of the block
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from modelplan.count.extras import block_extra_params
from modelplan.specs.relative_attention import encoder_sliding
from modelplan.count.seq2seq import idle_cross_params, key_bias_saving, separate_cross

from modelplan.count.conv_relative import in_loop, pooled_residuals
from modelplan.count.attention_extras import extra_attention_params, moa_params, unused_attention_expert_params
from modelplan.count.cca import residual_affine_params, router_mlp_params
from modelplan.count.compressed_attention import compressed_attention_params
from modelplan.count.mla_extras import mla_extra_params, own_indexer
from modelplan.count.mixers import LINEAR_MIXERS, PARALLEL_MAMBA2, mamba2_params, mixer_params
from modelplan.count.product_key import pk_params, pk_unused_params
from modelplan.count.shared_block import use_params
from modelplan.count.side_paths import block_side_params, kv_shared_saving
from modelplan.specs.attention_shape import for_block

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


class Block(NamedTuple):
    """What one block is made of (the same block kind has the same parameters and FLOPs)."""

    mixer: str
    """full_attention, sliding_attention, chunked_attention or mamba."""
    moe: bool
    """The MLP is a mixture of experts."""
    cross: bool
    """A decoder block of an encoder-decoder: cross-attention over the encoder output."""
    relative_bias: bool
    """Holds T5's relative attention bias table (first block of each stack)."""
    mlp: bool = True
    """Has an MLP after the mixer."""
    shared: bool = False
    """Runs the model's shared attention + MLP block first (Zamba hybrid layers)."""
    kv_shared: bool = False
    """Reads an earlier block's K/V instead of projecting its own (Gemma 3n's last blocks)."""
    no_input_norm: bool = False
    """Its attention input norm is an identity (extras.no_input_norm_blocks: ModernBERT-decoder)."""
    out_bias: bool = False
    """Its attention output projection has a bias (extras.out_bias_blocks: GPT-NeoX-Japanese)."""
    indexer_reused: bool = False
    """Reuses an earlier block's indexer top-k, holds no indexer (mla.indexer.layers: HY-V4)."""
    compressor: str = "none"
    """DeepSeek-V4's KV compressor of the block: none, csa or hca (compressed_attention.compressors)."""
    mla_nope: bool = False
    """Its MLA has no rotary dims (mla.nope_layers: Mistral Large 4)."""
    mla_kv_reused: bool = False
    """Its MLA reads an earlier block's latent (mla.kv_source: Mistral Large 4)."""
    router_state: bool = False
    """Its router MLP adds the previous block's router state (moe.router_mlp: every block but the first)."""
    no_input_pool: bool = False
    """Block 0 of an attention-residual stack: no pooled attention input (count/conv_relative.py)."""
    looped: bool = False
    """Runs several passes per forward, with message gates (Inkling 2 Loop: count/conv_relative.py)."""


def block_of(spec: "TransformerSpec", index: int) -> Block:
    """The kind of block `index` (0-based over all blocks, encoder first for encoder_decoder)."""
    return Block(
        mixer=spec.layer_type(index if index < spec.layers else index - spec.layers)  # each stack from its first block
        if not encoder_sliding(spec, index) else "sliding_attention",  # LED / LongT5 encoders (specs/relative_attention.py)
        moe=spec.is_moe_layer(index),
        cross=spec.is_decoder_block(index),
        relative_bias=spec.position == "relative" and spec.is_first_in_stack(index),
        mlp=spec.has_mlp(index) if spec.arch != "encoder_decoder" else spec.mlp,
        shared=spec.shared_block is not None and index in spec.shared_block.layers,
        kv_shared=spec.kv_shared_layers > 0 and index >= spec.layers - spec.kv_shared_layers,
        no_input_norm=spec.extras is not None and index in spec.extras.no_input_norm_blocks,
        out_bias=spec.extras is not None and index in spec.extras.out_bias_blocks,
        indexer_reused=_indexer_reused(spec, index),
        compressor=spec.compressed_attention.compressors[index] if spec.compressed_attention is not None else "none",
        router_state=spec.moe is not None and spec.moe.router_mlp is not None and index > 0,
        mla_nope=spec.mla is not None and spec.mla.nope_layers is not None and index in spec.mla.nope_layers,
        mla_kv_reused=spec.mla is not None and spec.mla.kv_source is not None and spec.mla.kv_source[index] != index,
        no_input_pool=index == 0 and pooled_residuals(spec),
        looped=in_loop(spec, index),
    )


def _indexer_reused(spec: "TransformerSpec", index: int) -> bool:
    ix = spec.mla.indexer if spec.mla is not None else None
    return ix is not None and ix.layers is not None and index not in ix.layers


def mtp_block(spec: "TransformerSpec") -> Block:
    """The block inside a multi-token-prediction module: full attention, MoE when the model has
    experts (DeepSeek-V3 sec. 2.2; transformers' MtpModel builds it with first_k_dense_replace 0)."""
    return Block(mixer="full_attention", moe=spec.moe is not None, cross=False, relative_bias=False,
                 mlp=spec.mlp)


def norm_params(spec: "TransformerSpec", width: int) -> int:
    """One LayerNorm/RMSNorm over `width` features: gamma, plus beta when norm_bias."""
    # torch.nn.LayerNorm(width, bias=...) / HF LlamaRMSNorm(width): weight (+ bias);
    # OLMo's LayerNorm has neither (norm_affine false)
    if not spec.norm_affine:
        return 0
    return width * (2 if spec.norm_bias else 1)


def mlp_params(spec: "TransformerSpec", ffn_hidden: int, bias: bool | None = None) -> tuple[int, int]:
    """(in, out) parameters of one MLP of inner width `ffn_hidden` (gated: gate + up projections);
    biases when `bias` (None: the model's mlp_bias)."""
    bias = spec.mlp_bias if bias is None else bias
    n_in = 2 if spec.gated_mlp else 1  # SwiGLU/GeGLU: gate_proj and up_proj (Shazeer 2020)
    w_in = n_in * spec.hidden * ffn_hidden + (n_in * ffn_hidden if bias else 0)
    w_out = ffn_hidden * spec.hidden + (spec.hidden if bias else 0)
    return w_in, w_out


def expert_params(spec: "TransformerSpec") -> int:
    """One routed expert's MLP (expert_bias, else mlp_bias, decides its biases)."""
    moe = spec.moe
    return sum(mlp_params(spec, moe.expert_ffn_hidden, moe.expert_bias)) if moe is not None else 0


def qk_norm_params(spec: "TransformerSpec") -> int:
    """Weights of the query and key norms (Qwen3 q_norm/k_norm over head_dim, shared by heads;
    Cohere one weight per head, (heads, head_dim); OLMo-2 over the whole projection)."""
    if not spec.qk_norm or spec.qk_norm_weight == "none":
        return 0
    if spec.qk_norm_scope == "head" and spec.qk_norm_weight == "shared":
        return 2 * norm_params(spec, spec.dim_head)
    return norm_params(spec, spec.q_width) + norm_params(spec, spec.kv_width)


def attention_params(spec: "TransformerSpec", relative_bias: bool) -> dict[str, int]:
    """q/k/v self-attention: projections, qk norms, sinks and T5's relative bias."""
    if spec.attention_experts is not None:  # JetMoE's mixture of attention experts (count/attention_extras.py)
        return moa_params(spec)
    h = spec.hidden
    qkv_width = spec.q_width + spec.kv_width + spec.v_proj_width  # fused or separate q, k, v projections
    gate = {}
    if spec.attention_output_gate:  # Qwen3-Next: q_proj is Linear(h, 2 heads head_dim), half of it the gate
        gate = {"attention/gate": h * spec.q_width + (spec.q_width if spec.qkv_bias else 0)}
    gate.update(extra_attention_params(spec))  # LFM3 / Laguna g_proj, DiffLlama lambdas (count/attention_extras.py)
    return {**gate,
        # HF q_proj/k_proj/v_proj (or fused c_attn / query_key_value): Linear(h, qkv_width)
        "attention/qkv": h * qkv_width + (qkv_width if spec.qkv_bias else 0),
        # HF o_proj / c_proj / dense: Linear(heads * head_dim, h) (value heads' width: v_head_dim)
        "attention/out": spec.o_width * h + (h if spec.attn_out_bias else 0),
        "attention/qk_norm": qk_norm_params(spec),
        "attention/sinks": spec.heads if spec.attention_sinks else 0,  # gpt-oss sinks: (heads,)
        # T5 relative_attention_bias: Embedding(num_buckets, heads), first block of a stack
        "attention/relative_bias": spec.relative_buckets * spec.heads if relative_bias else 0,
    }


def mla_params(spec: "TransformerSpec") -> dict[str, int]:
    """Multi-head Latent Attention as HF DeepseekV2/V3Attention (DeepSeek-V2 paper eq. 9-19)."""
    mla, h, a = spec.mla, spec.hidden, spec.heads
    assert mla is not None
    q_out = a * mla.qk_head_dim
    out: dict[str, int] = {}
    if mla.q_lora_rank is None:
        out["attention/q"] = h * q_out  # q_proj: Linear(h, a * (d_h + d_h^R), bias=False)
    else:
        r = mla.q_lora_rank
        out["attention/q/down"] = h * r + (r if spec.qkv_bias else 0)  # q_a_proj (bias=attention_bias)
        out["attention/q/norm"] = r  # q_a_layernorm: RMSNorm(q_lora_rank)
        out["attention/q/up"] = r * q_out  # q_b_proj: Linear(r, a * (d_h + d_h^R), bias=False)
    kv_a = mla.kv_lora_rank + mla.qk_rope_head_dim
    # kv_a_proj_with_mqa: Linear(h, d_c + d_h^R, bias=attention_bias): latent + shared rope key
    # (none where the block reads an earlier block's latent: Mistral Large 4's kv_source)
    out["attention/kv/down"] = 0 if mla.kv_reused else h * kv_a + (kv_a if spec.qkv_bias else 0)
    out["attention/kv/norm"] = 0 if mla.kv_reused else mla.kv_lora_rank  # kv_a_layernorm: RMSNorm(kv_lora_rank)
    # kv_b_proj: Linear(d_c, a * (d_h + d_v), bias=False): per-head keys (no rope) and values
    out["attention/kv/up"] = mla.kv_lora_rank * a * (mla.qk_nope_head_dim + mla.v_head_dim)
    out["attention/out"] = a * mla.v_head_dim * h + (h if spec.attn_out_bias else 0)  # o_proj
    if own_indexer(spec) is not None:
        out["attention/indexer"] = indexer_params(spec)
    out.update(mla_extra_params(spec))  # HY-V4's gate_proj and sinks (count/mla_extras.py)
    return out


def indexer_params(spec: "TransformerSpec") -> int:
    """DeepseekV32Indexer: wq_b Linear(r, H d), wk Linear(h, d), k_norm LayerNorm(d) (weight and
    bias), weights_proj Linear(h, H), all bias-free linears."""
    mla, h = spec.mla, spec.hidden
    ix = mla.indexer
    pool = ix.kpool * ix.head_dim + ix.head_dim * h if ix.kpool else 0  # GLM-5-Next's pool ape and gate
    # Mistral Large 4: q_input_norm LayerNorm(h), wq_b Linear(h, H d), softmax scale and bias (H each)
    query = h * ix.heads * ix.head_dim + 2 * h + 2 * ix.heads if ix.query_from_hidden else mla.q_lora_rank * ix.heads * ix.head_dim
    return query + h * ix.head_dim + 2 * ix.head_dim + h * ix.heads + pool


def mamba_params(spec: "TransformerSpec") -> dict[str, int]:
    """HF MambaMixer / JambaMambaMixer (Gu & Dao 2023, Algorithm 2)."""
    ssm, h = spec.ssm, spec.hidden
    assert ssm is not None
    d, n, r = ssm.inner, ssm.state_size, ssm.dt_rank
    return {
        "mamba/in_proj": h * 2 * d + (2 * d if ssm.proj_bias else 0),  # Linear(h, 2 d_inner): x and z
        # depthwise Conv1d(d, d, kernel, groups=d): weight (d, 1, k) + bias
        "mamba/conv": d * ssm.conv_kernel + (d if ssm.conv_bias else 0),
        "mamba/x_proj": d * (r + 2 * n),  # Linear(d, dt_rank + 2N, bias=False): dt, B, C
        "mamba/dt_proj": r * d + d,  # Linear(dt_rank, d) with bias
        "mamba/ssm": d * n + d,  # A_log (d, N) and D (d)
        "mamba/norms": r + 2 * n if ssm.bc_dt_norm else 0,  # Jamba dt/b/c RMSNorms
        "mamba/out_proj": d * h + (h if ssm.proj_bias else 0),  # Linear(d_inner, h)
    }


def mlp_block_params(spec: "TransformerSpec", moe_layer: bool) -> dict[str, int]:
    """The MLP of a block: dense, or router + routed experts + shared experts (+ gate)."""
    h, moe = spec.hidden, spec.moe
    if not moe_layer or moe is None:
        w_in, w_out = mlp_params(spec, spec.ffn_hidden)  # (+ Doge's product-key experts, count/product_key.py)
        return {"mlp/in": w_in, "mlp/out": w_out, **pk_params(spec)}
    shared_hidden = moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden
    scored = moe.num_experts + moe.zero_experts
    return {
        # router: nn.Linear(h, num_experts, bias=router_bias) (Mixtral `gate`, gpt-oss `router`)
        # (+ LongCat-Flash's zero experts: the router scores them too)
        "mlp/router": h * scored + (scored if moe.router_bias else 0)
        + (moe.num_experts if moe.score_correction_param else 0),  # AFMoE's expert_bias parameter
        "mlp/experts": moe.num_experts * expert_params(spec),
        "mlp/zero_expert_padding": _zero_padding(spec),
        "mlp/shared_experts": moe.shared_experts * sum(mlp_params(spec, shared_hidden)),
        # Qwen2-MoE shared_expert_gate: nn.Linear(h, 1, bias=False)
        "mlp/shared_gate": h if moe.shared_expert_gate else 0,
        "mlp/output_bias": h if moe.output_bias else 0,  # JetMoeMoE.bias: (h,)
        # Gemma4TextRouter scale (h,) and per_expert_scale (E,); the branches' RMSNorms (h each)
        "mlp/router_scales": h + moe.num_experts if moe.router_scales else 0,
        "mlp/norms": moe.branch_norms * norm_params(spec, h),
    }


def block_params(spec: "TransformerSpec", block: Block) -> dict[str, int]:
    """Leaf parameters of one block of kind `block`."""
    spec = for_block(spec, block)  # its layer type's attention sizes, its MLP width (specs/attention_shape.py)
    h = spec.hidden
    if block.mixer == "mamba":
        out = mamba_params(spec)
    elif block.mixer in LINEAR_MIXERS:
        out = mixer_params(spec, block.mixer)
    elif block.mixer == "mlp":  # a mixer-free MLP block (Nemotron-H)
        out = {}
    elif block.mixer == PARALLEL_MAMBA2:  # Falcon-H1: attention and Mamba-2 side by side
        out = {**attention_params(spec, block.relative_bias), **mamba2_params(spec)}
    elif spec.compressed_attention is not None:  # DeepSeek-V4 (count/compressed_attention.py)
        out = compressed_attention_params(spec, block.compressor)
    elif spec.mla is not None:
        out = mla_params(spec)
    else:
        out = attention_params(spec, block.relative_bias)
    norms = spec.num_norms_per_layer
    if separate_cross(spec, block):
        # T5 EncDecAttention: q from the decoder, k and v from the encoder output, o; own norm
        qkv_width = spec.q_width + 2 * spec.kv_width
        out["cross_attention/qkv"] = h * qkv_width + (qkv_width if spec.qkv_bias else 0)
        out["cross_attention/out"] = spec.q_width * h + (h if spec.attn_out_bias else 0)
        norms += 1
    elif idle := idle_cross_params(spec):  # a decoder built alone keeps unused encoder_attn weights
        out.update(idle)
        norms += 1
    if (saving := key_bias_saving(spec)) and "attention/qkv" in out:  # Whisper: k_proj without bias
        out["attention/qkv"] -= saving
        if separate_cross(spec, block):
            out["cross_attention/qkv"] -= saving
    if block.mlp:
        out.update(mlp_block_params(spec, block.moe))
        if block.moe and spec.moe.router_mlp is not None:  # ZAYA's router MLP (count/cca.py)
            out["mlp/router"] = router_mlp_params(spec, block.router_state)
    if block.shared:  # Zamba: the per-use linear and adapters (the shared weights: count.params)
        out.update(use_params(spec))
    if block.kv_shared:  # Gemma 3n: no k_proj, v_proj, k_norm
        qkv, k_norm = kv_shared_saving(spec)
        out["attention/qkv"] -= qkv
        out["attention/qk_norm"] -= k_norm
    out.update(block_side_params(spec))  # Gemma 3n's AltUp, LAuReL, per-layer input (count/side_paths.py)
    out.update(block_extra_params(spec, block))  # sub-norms, adapters, ... (count/extras.py)
    norms -= block.no_input_norm  # ModernBertDecoderLayer: attn_norm is nn.Identity() on block 0
    out["norm"] = norms * norm_params(spec, h)  # input/post-attention (and sandwich) norms
    if spec.residual_weights:  # Doge input_residual and post_attention_residual: (h,) each
        out["residual"] = 2 * h
    if spec.residual_affine:  # ZAYA's residual scales and biases (count/cca.py)
        out["residual"] = residual_affine_params(spec)
    return out


def _zero_padding(spec: "TransformerSpec") -> int:
    """gate_up rows transformers allocates for LongCat-Flash's zero experts (never read): 2 f h each."""
    moe = spec.moe
    return moe.zero_experts * 2 * spec.hidden * moe.expert_ffn_hidden if moe.zero_expert_padding else 0


def real_experts_per_token(moe) -> tuple[int, int]:
    """(numerator, denominator) of the real experts a token runs: top_k, or with zero experts
    top_k E / (E + Z) under a load balanced over all of them (LongCat-Flash, arXiv 2509.01322 sec. 2.1)."""
    return moe.top_k * moe.num_experts, moe.num_experts + moe.zero_experts


def unused_expert_params(spec: "TransformerSpec", block: Block) -> int:
    """Routed-expert parameters of a block that one token does not touch (num_experts - top_k;
    with zero experts the expected real ones, and the never-read padding)."""
    moe, moa = spec.moe, unused_attention_expert_params(spec, block)  # + JetMoE's idle attention experts
    if moe is None or not block.moe:  # (Doge: the expert vectors a token does not read)
        return moa + (pk_unused_params(spec) if block.mlp else 0)
    num, den = real_experts_per_token(moe)
    return (moe.num_experts * den - num) * expert_params(spec) // den + _zero_padding(spec) + moa
