"""Forward FLOPs of one block by its kind (count.blocks.Block), 2 per multiply-add, matmuls and
the few other multiply-add contractions only (the convention count.flops states).

Keys are relative to the block; `attention/score` (and `cross_attention/score`) is the part that
grows with the keys each query sees, every other key is a weight matmul.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.attention_extras import attention_calls, extra_attention_flops
from modelplan.count.blocks import Block, real_experts_per_token
from modelplan.count.conv_relative import block_passes, loop_message_flops
from modelplan.count.extras import block_extra_flops
from modelplan.count.mixers import LINEAR_MIXERS, PARALLEL_MAMBA2, mamba2_flops, mixer_flops
from modelplan.count.seq2seq import encoder_keys, memory_cross_flops, separate_cross

from modelplan.count.product_key import pk_flops
from modelplan.count.shared_block import use_flops
from modelplan.count.cca import router_mlp_flops
from modelplan.count.qsa import qsa_flops, read_keys
from modelplan.count.compressed_attention import compressed_attention_flops
from modelplan.count.mla_extras import mla_extra_flops, own_indexer
from modelplan.count.side_paths import block_side_flops
from modelplan.specs.attention_shape import for_block

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def keys_per_query(spec: "TransformerSpec", mixer: str, seq_len: int) -> int:
    """Keys one query is scored against: the whole sequence (full-square convention, also under
    a causal mask), the window (sliding_attention) or the chunk (chunked_attention)."""
    if mixer == "sliding_attention" and spec.sliding_window is not None:
        return min(seq_len, spec.sliding_window)
    if mixer == "chunked_attention" and spec.attention_chunk is not None:
        return min(seq_len, spec.attention_chunk)
    return seq_len


def _mlp_weights(spec: "TransformerSpec", ffn_hidden: int) -> int:
    """Weight elements of one MLP (biases excluded: no matmul)."""
    n_in = 2 if spec.gated_mlp else 1  # gated MLPs have gate and up projections
    return (n_in + 1) * spec.hidden * ffn_hidden


def attention_flops(spec: "TransformerSpec", tokens: int, keys: int) -> dict[str, int]:
    """q/k/v self-attention over `keys` keys per query."""
    h = spec.hidden
    gate = spec.q_width if spec.attention_output_gate else 0  # Qwen3-Next: q_proj also emits the gate
    return {
        **extra_attention_flops(spec, tokens),  # LFM3 / Laguna g_proj (count/attention_extras.py)
        "attention/qkv": 2 * tokens * h * (spec.q_width + gate + spec.kv_width + spec.v_proj_width),  # (t, h) @ (h, q [+ gate] + k + v)
        # QK^T (t, d) @ (d, keys) and AV (t, keys) @ (keys, d_v) per head: 2 * t * keys * a * (d + d_v)
        # (x 2 for differential attention's two calls, count.attention_extras.attention_calls)
        "attention/score": 2 * tokens * keys * (spec.q_width + spec.o_width) * attention_calls(spec),
        "attention/out": 2 * tokens * spec.o_width * h,  # (t, a*d_v) @ (a*d_v, h)
    }


def mla_flops(spec: "TransformerSpec", tokens: int, keys: int) -> dict[str, int]:
    """MLA as HF executes it (latents expanded to per-head keys and values, DeepSeek-V2 eq. 9-19)."""
    mla, h, a = spec.mla, spec.hidden, spec.heads
    assert mla is not None
    q_out = a * mla.qk_head_dim
    if mla.q_lora_rank is None:
        q = {"attention/q": 2 * tokens * h * q_out}
    else:
        r = mla.q_lora_rank
        q = {"attention/q/down": 2 * tokens * h * r, "attention/q/up": 2 * tokens * r * q_out}
    return {
        **q,
        "attention/kv/down": 0 if mla.kv_reused else 2 * tokens * h * (mla.kv_lora_rank + mla.qk_rope_head_dim),
        "attention/kv/up": 2 * tokens * mla.kv_lora_rank * a * (mla.qk_nope_head_dim + mla.v_head_dim),
        # QK^T over d_h + d_h^R dims, AV over d_v dims, per head (DSA: over the top-k keys only)
        "attention/score": 2 * tokens * _sparse_keys(spec, keys) * a * (mla.qk_head_dim + mla.v_head_dim),
        "attention/out": 2 * tokens * a * mla.v_head_dim * h,
        **indexer_flops(spec, tokens, keys),
        **mla_extra_flops(spec, tokens),  # HY-V4's gate_proj (count/mla_extras.py)
    }


def _sparse_keys(spec: "TransformerSpec", keys: int) -> int:
    """Keys DeepSeek Sparse Attention's main attention reads a query: the indexer's top-k."""
    ix = spec.mla.indexer
    if ix is None:
        return keys
    tail = ix.kpool - 1 if ix.kpool and ix.kpool_tail else 0  # GLM-5-Next: the incomplete pool's tokens too
    return min(keys, ix.topk + tail)


def indexer_flops(spec: "TransformerSpec", tokens: int, keys: int) -> dict[str, int]:
    """The lightning indexer (DeepSeek-V3.2-Exp sec. 2.1, eq. 1; DeepseekV32Indexer.forward):
    wq_b, wk, weights_proj GEMMs, q . k for every key a query may see (H^I x d^I) and the
    weighted sum over heads (H^I); relu and top-k are element-wise (not counted)."""
    mla, h = spec.mla, spec.hidden
    ix = own_indexer(spec)  # None on blocks reusing an earlier top-k (count/mla_extras.py)
    if ix is None:
        return {}
    pools = -(-keys // ix.kpool) if ix.kpool else keys  # GLM-5-Next scores one pooled key per kpool tokens
    gate = h * ix.head_dim if ix.kpool else 0  # its pool gate (t, h) @ (h, d)
    q_in = h if ix.query_from_hidden else mla.q_lora_rank  # Mistral Large 4: wq_b over the block input
    return {
        "attention/indexer/proj": 2 * tokens * (q_in * ix.heads * ix.head_dim + h * ix.head_dim + h * ix.heads + gate),
        "attention/indexer/score": 2 * tokens * pools * ix.heads * (ix.head_dim + 1),
    }


def mamba_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Mamba mixer (Gu & Dao 2023, Algorithm 2): projections, the depthwise causal conv (k
    multiply-adds per channel and token) and the scan's output contraction y = C h (N per channel
    and token); the state update dA * h + dB * x is elementwise (not counted)."""
    ssm, h = spec.ssm, spec.hidden
    assert ssm is not None
    d, n, r = ssm.inner, ssm.state_size, ssm.dt_rank
    return {
        "mamba/in_proj": 2 * tokens * h * 2 * d,
        "mamba/conv": 2 * tokens * d * ssm.conv_kernel,
        "mamba/x_proj": 2 * tokens * d * (r + 2 * n),
        "mamba/dt_proj": 2 * tokens * r * d,
        "mamba/scan": 2 * tokens * d * n,
        "mamba/out_proj": 2 * tokens * d * h,
    }


def mlp_flops(spec: "TransformerSpec", tokens: int, moe_layer: bool) -> dict[str, int]:
    """Dense MLP, or router + top_k routed experts (dropless) + shared experts (+ gate)."""
    h, moe = spec.hidden, spec.moe
    if not moe_layer or moe is None:
        n_in = 2 if spec.gated_mlp else 1
        return {"mlp/in": 2 * tokens * n_in * h * spec.ffn_hidden,  # (t, h) @ (h, f) [x2 if gated]
                "mlp/out": 2 * tokens * spec.ffn_hidden * h,  # (t, f) @ (f, h)
                **pk_flops(spec, tokens)}  # Doge's product-key experts (count/product_key.py)
    shared_hidden = moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden
    num, den = real_experts_per_token(moe)
    return {
        "mlp/router": 2 * tokens * h * (moe.num_experts + moe.zero_experts),  # (t, h) @ (h, E [+ Z])
        # top_k experts a token (zero experts: the expected real ones, count.blocks.real_experts_per_token)
        "mlp/experts": 2 * tokens * num * _mlp_weights(spec, moe.expert_ffn_hidden) // den,
        "mlp/shared_experts": 2 * tokens * moe.shared_experts * _mlp_weights(spec, shared_hidden),
        "mlp/shared_gate": 2 * tokens * h if moe.shared_expert_gate else 0,  # (t, h) @ (h, 1)
    }


def block_forward_flops(spec: "TransformerSpec", block: Block, tokens: int, seq_len: int,
                        memory_tokens: int = 0, memory_len: int = 0) -> dict[str, int]:
    """Forward FLOPs of one block for `tokens` tokens in sequences of `seq_len`; a decoder block
    of an encoder-decoder cross-attends to `memory_tokens` encoder tokens (`memory_len` a sequence)."""
    spec = for_block(spec, block)  # its layer type's attention sizes, its MLP width (specs/attention_shape.py)
    keys = encoder_keys(spec, block, keys_per_query(spec, block.mixer, seq_len))  # BigBird-Pegasus' sparse encoder
    if block.mixer == "mamba":
        out = mamba_flops(spec, tokens)
    elif block.mixer in LINEAR_MIXERS:
        out = mixer_flops(spec, block.mixer, tokens, seq_len)
    elif block.mixer == "mlp":
        out = {}
    elif block.mixer == PARALLEL_MAMBA2:
        out = {**attention_flops(spec, tokens, keys), **mamba2_flops(spec, tokens, seq_len)}
    elif spec.compressed_attention is not None:  # DeepSeek-V4 (count/compressed_attention.py)
        out = compressed_attention_flops(spec, block.compressor, tokens, seq_len)
    elif spec.mla is not None:
        out = mla_flops(spec, tokens, keys)
    else:  # (Qwen4-Exp's token indexer: its own FLOPs, the top keys read; count/qsa.py)
        out = {**attention_flops(spec, tokens, read_keys(spec, keys)), **qsa_flops(spec, tokens, seq_len)}
    if block.cross:
        h = spec.hidden
        merged = not separate_cross(spec, block)  # T5Gemma 2: the self-attention's q and o serve both
        out["cross_attention/q"] = 0 if merged else 2 * tokens * h * spec.q_width  # from the decoder stream
        out["cross_attention/kv"] = 2 * memory_tokens * h * 2 * spec.kv_width  # from the encoder output
        out["cross_attention/score"] = 4 * tokens * memory_len * spec.q_width
        out["cross_attention/out"] = 0 if merged else 2 * tokens * spec.q_width * h
    else:  # a decoder built alone whose encoder_attn reads image tokens (BLIP, VisionEncoderDecoder)
        out.update(memory_cross_flops(spec, tokens, seq_len))
    if block.mlp:
        out.update(mlp_flops(spec, tokens, block.moe))
        if block.moe and spec.moe.router_mlp is not None:  # ZAYA's router MLP (count/cca.py)
            out["mlp/router"] = router_mlp_flops(spec, tokens)
    if block.shared:  # Zamba: the shared attention + MLP block at this use, full-sequence keys
        out.update(use_flops(spec, tokens, seq_len))
    if block.kv_shared:  # Gemma 3n: K and V come from an earlier block
        out["attention/qkv"] -= 2 * tokens * spec.hidden * (spec.kv_width + spec.v_proj_width)
    out.update(block_side_flops(spec, tokens))  # Gemma 3n's side paths (count/side_paths.py)
    out.update(block_extra_flops(spec, block, tokens, seq_len))  # X-MOD's adapter, XLNet's positions (count/extras.py)
    if block.looped:  # Inkling 2 Loop: every pass, and the later passes' messages (count/conv_relative.py)
        out = {**{k: v * block_passes(spec, block) for k, v in out.items()}, **loop_message_flops(spec, block, tokens)}
    return out
