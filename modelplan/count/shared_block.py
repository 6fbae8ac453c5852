"""Exact parameters, forward FLOPs, kept activation bytes and cache of Zamba's shared attention +
MLP block (`modelplan.specs.shared_block`): its weights once per copy, everything else per use.

    shared_blocks/{attention/qkv, attention/out, mlp/in, mlp/out, norm, adapters}   top-level, once
    shared_block/linear                                                             in every block using it

Parameters follow transformers 5.24 `ZambaAttentionDecoderLayer` / `Zamba2AttentionDecoderLayer`
(q/k/v_proj Linear(w, heads d) / Linear(w, kv d), o_proj Linear(heads d, h), all bias-free; the
gated MLP; RMSNorm(w) and RMSNorm(h)) and the hybrid layer's Linear(h, h, bias=False). Gradients
and optimizer states follow the parameters: the shared weights' once (their gradient sums the
uses' contributions in place).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.attention import lse_bytes_per_token

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def shared_weights(spec: "TransformerSpec") -> dict[str, int]:
    """One copy's weights, keyed relative to `shared_blocks/`."""
    b, h = spec.shared_block, spec.hidden
    f, w = b.ffn_hidden, b.input_width
    return {
        "attention/qkv": w * (b.q_width + 2 * b.kv_width),  # q_proj, k_proj, v_proj: Linear(w, .), no bias
        "attention/out": b.q_width * h,  # o_proj: Linear(heads d, h, bias=False)
        # gate_proj + up_proj (Zamba2: fused gate_up_proj Linear(h, 2f)), down_proj Linear(f, h)
        "mlp/in": 2 * h * f + (2 * f if b.mlp_bias else 0),
        "mlp/out": f * h + (h if b.mlp_bias else 0),
        "norm": w + h,  # input_layernorm RMSNorm(w), pre_ff_layernorm RMSNorm(h)
    }


def shared_params(spec: "TransformerSpec") -> dict[str, int]:
    """Every copy's weights and adapters, keyed relative to `shared_blocks/` (tied uses once).

    Zamba2 builds in copy b the adapters of every use j with j % copies == b (`Zamba2MLP`,
    `Zamba2Attention`: an Identity for the others): tied, each use's adapter exists once; untied,
    each use's module holds its class's n_b adapters."""
    b = spec.shared_block
    uses = len(b.layers)
    sets = b.copies if b.tied else uses
    out = {key: sets * value for key, value in shared_weights(spec).items()}
    per_class = [len(range(c, uses, b.copies)) for c in range(b.copies)]  # n_c uses run copy c
    adapters = uses if b.tied else sum(per_class[j % b.copies] for j in range(uses))
    out["adapters"] = adapters * _adapters(spec)
    return out


def _adapters(spec: "TransformerSpec") -> int:
    """One use's adapters: gate_up Linear(h, r) + Linear(r, 2f); q, k, v Linear(w, r) + Linear(r, w)."""
    b, h = spec.shared_block, spec.hidden
    if b.adapter_rank is None:
        return 0
    r, w = b.adapter_rank, b.input_width
    return r * (h + 2 * b.ffn_hidden) + (3 * 2 * w * r if b.attention_adapters else 0)


def use_params(spec: "TransformerSpec") -> dict[str, int]:
    """What each use adds to its block (never tied): the hybrid layer's Linear(h, h, bias=False)."""
    h = spec.hidden
    return {"shared_block/linear": h * h}


def use_flops(spec: "TransformerSpec", tokens: int, keys: int) -> dict[str, int]:
    """Forward FLOPs of one use over `tokens` tokens, `keys` keys a query (2 per multiply-add)."""
    b, h = spec.shared_block, spec.hidden
    return {
        "shared_block/attention/qkv": 2 * tokens * b.input_width * (b.q_width + 2 * b.kv_width),  # (t, w) @ (w, q + 2kv)
        # QK^T and AV per head: 2 * 2 * t * keys * heads * d
        "shared_block/attention/score": 4 * tokens * keys * b.q_width,
        "shared_block/attention/out": 2 * tokens * b.q_width * h,  # (t, heads d) @ (heads d, h)
        "shared_block/mlp/in": 2 * tokens * h * 2 * b.ffn_hidden,  # (t, h) @ (h, 2f)
        "shared_block/mlp/out": 2 * tokens * b.ffn_hidden * h,  # (t, f) @ (f, h)
        "shared_block/adapters": 2 * tokens * _adapters(spec),  # each adapter weight once a token
        "shared_block/linear": 2 * tokens * h * h,  # (t, h) @ (h, h)
    }


def use_kept_bytes(spec: "TransformerSpec", d: int, attention_fused: bool) -> tuple[int, int, int]:
    """(replicated, tp-sharded, score-per-key) bytes per token one use keeps for backward, with
    16-bit values of `d` bytes (Korthikanti et al. 2022 sec. 4's accounting applied to the block):
    replicated: the concatenated input and its norm output (w each), the MLP norm's input and
    output and the linear's input (h each), the adapters' rank-r middles; sharded: Q, K, V, the
    o_proj input, the gated MLP's 2f + f; scores: eager softmax output (heads d per key) or
    flash attention's fp32 log-sum-exp per head."""
    b, h = spec.shared_block, spec.hidden
    middles = 0 if b.adapter_rank is None else b.adapter_rank * (4 if b.attention_adapters else 1)
    replicated = d * (2 * b.input_width + 3 * h + middles)
    sharded = d * (2 * b.q_width + 2 * b.kv_width + 3 * b.ffn_hidden)
    if attention_fused:
        return replicated, sharded + lse_bytes_per_token(b.heads), 0
    return replicated, sharded, b.heads * (2 * d + 1 if spec.dropout else d)


def use_cache_elements(spec: "TransformerSpec", seq_len: int) -> int:
    """K and V each use caches for one sequence (transformers' cache holds a layer per use)."""
    return 2 * spec.shared_block.kv_width * seq_len
