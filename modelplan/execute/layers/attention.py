"""Multi-head / grouped-query self-attention: projections, q/k norms, clipping, (partial) rotary
positions, and the score core (scale, soft-cap, causal / sliding-window / chunked masks, sinks).

Parameters (relative names): q|k|v|out /weight and /bias, q_norm|k_norm /weight and /bias,
sinks. Query heads are laid out head-major along the output columns (column j of q/weight
belongs to head j // head_dim), so a contiguous column block is a contiguous group of heads: the
split tensor parallelism uses. The output projection is returned *without* its bias; the caller
adds it once (after the tensor-parallel reduce). Query head i reads key/value head
i // (heads // kv_heads) (GQA, Ainslie et al. 2023).

Order, as transformers' modules run it: q/k/v projections; a q/k norm over the whole projection
(OLMo-2, OLMoE) or per head (Qwen3, Gemma 3, Cohere, Llama 4's weight-free L2 norm); clip to
[-c, c] (OLMo clip_qkv); rotary on the first `rotary_dims` dims of each head (partial rotary:
Phi, GLM-4); scores q k^T * scale; soft-cap c * tanh(scores / c) (Gemma 2); mask; softmax with
a learned per-head sink logit in the denominator (gpt-oss); probabilities @ v.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal, Mapping

import numpy as np

from modelplan.comm.regions import Region
from modelplan.execute.context_parallel import ContextParallel
from modelplan.execute.layers.linear import linear_backward, linear_forward
from modelplan.execute.layers.norm import NormCache, NormKind, Reduce, norm_backward, norm_forward
from modelplan.execute.layers.ring_attention import ring_backward, ring_forward

ROTARY_BASE = 10000.0  # RoFormer (Su et al. 2021) and Llama default theta


@dataclass(frozen=True)
class QKNorm:
    """A norm on queries and keys before the scores."""

    kind: NormKind
    eps: float
    scope: Literal["head", "all_heads"]
    """head: over head_dim of each head; all_heads: over the whole projection (all heads)."""
    weight: Literal["shared", "per_head", "none"]
    """A head_dim weight for all heads, one per head, or none (per-head scope); all_heads: per feature."""
    bias: bool
    q_width: int
    """Features of the whole q projection (all ranks' heads): the all_heads norm's width."""
    kv_width: int


@dataclass(frozen=True)
class AttentionShape:
    """Head counts of the heads this call computes (local to a tensor-parallel rank) and the
    attention options (defaults: the baseline full-sequence softmax attention)."""

    heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    rotary: bool
    rotary_dims: int | None = None
    """Leading dims of each head that rotary rotates (partial rotary); None: all of them."""
    rotary_base: float | None = None
    """RoPE base theta (HF rope_theta); None: ROTARY_BASE."""
    scale: float | None = None
    """Factor on q k^T; None: 1 / sqrt(head_dim)."""
    softcap: float | None = None
    window: int | None = None
    """Sliding window: a query sees the `window` latest keys, itself included."""
    chunk: int | None = None
    """Chunked attention: a query sees the keys of its own chunk only."""
    sinks: bool = False
    clip: float | None = None
    qk_norm: QKNorm | None = None


@dataclass(frozen=True)
class CoreCache:
    """Activations of the score core kept for backward."""

    q: np.ndarray  # (b, H, s, d_qk), after rotary
    k: np.ndarray  # (b, H, s, d_qk), repeated to H heads
    v: np.ndarray  # (b, H, s, d_v), repeated to H heads
    probs: np.ndarray  # (b, H, s, s)
    sink_probs: np.ndarray | None  # (b, H, s, 1): the sink's share of each softmax
    capped: np.ndarray | None  # (b, H, s, s): tanh(scores / cap) when soft-capped


@dataclass(frozen=True)
class AttentionCache:
    """Activations kept for backward."""

    x: np.ndarray
    norms: dict  # name -> NormCache of the q / k norms
    clip_masks: dict  # name -> where the clip let the gradient through
    core: CoreCache
    context: np.ndarray  # (b, s, H*d)
    local_kv: tuple[np.ndarray, np.ndarray] | None = None
    """Context parallel all_gather / p2p: this rank's K, V (b, KV, s/cp, d), exchanged again in
    backward; the core cache then holds no keys and values (p2p: a `RingCache`)."""
    gate: np.ndarray | None = None
    """Qwen3-Next's output gate logits (b, s, H*d): out_proj reads context * sigmoid(gate)."""


def rotary_tables(seq: int, head_dim: int, base: float | None = None, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin of shape (seq, head_dim) for positions offset .. offset + seq - 1, HF's
    rotate_half layout: theta_i = base^(-2i/d)."""
    inv_freq = 1.0 / (base or ROTARY_BASE) ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(offset, offset + seq, dtype=np.float64), inv_freq)  # (s, d/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (s, d)
    return np.cos(angles), np.sin(angles)


def _rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def _rotate_half_transposed(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([x[..., half:], -x[..., :half]], axis=-1)


def rotary_forward(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x * cos + rotate_half(x) * sin on the first cos.shape[-1] dims of x (b, heads, s, d);
    the rest pass through (HF partial_rotary_factor)."""
    r = cos.shape[-1]
    if r == x.shape[-1]:
        return x * cos + _rotate_half(x) * sin
    rot = x[..., :r]
    return np.concatenate([rot * cos + _rotate_half(rot) * sin, x[..., r:]], axis=-1)


def rotary_backward(dy: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Transpose of the rotation: dy * cos + rotate_half^T(dy * sin) on the rotated dims."""
    r = cos.shape[-1]
    if r == dy.shape[-1]:
        return dy * cos + _rotate_half_transposed(dy * sin)
    rot = dy[..., :r]
    return np.concatenate([rot * cos + _rotate_half_transposed(rot * sin), dy[..., r:]], axis=-1)


def attention_mask(seq: int, causal: bool, window: int | None = None, chunk: int | None = None,
                   queries: int | None = None, q_offset: int = 0) -> np.ndarray:
    """(queries, s) True where query i must not see key j: later keys (causal), keys `window` or
    more positions away (sliding window, HF `q - k < sliding_window`), keys of another chunk. The
    queries sit at positions q_offset .. q_offset + queries - 1 (context parallelism); default:
    all s."""
    queries = seq if queries is None else queries
    i = q_offset + np.arange(queries)[:, None]
    j = np.arange(seq)[None, :]
    masked = (j > i) if causal else np.zeros((queries, seq), dtype=bool)
    if window is not None:
        masked |= (i - j >= window) if causal else (np.abs(i - j) >= window)
    if chunk is not None:
        masked |= (i // chunk) != (j // chunk)
    return masked


def _heads(t: np.ndarray, n: int, d: int) -> np.ndarray:
    b, s, _ = t.shape
    return t.reshape(b, s, n, d).transpose(0, 2, 1, 3)  # (b, s, n*d) -> (b, n, s, d)


def _merge(t: np.ndarray) -> np.ndarray:
    b, n, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, n * d)  # (b, n, s, d) -> (b, s, n*d)


def core_forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, shape: AttentionShape,
                 sinks: np.ndarray | None = None, q_offset: int = 0) -> tuple[np.ndarray, CoreCache]:
    """softmax(mask(cap(q k^T * scale)) [, sink]) @ v over (b, H, s, d) heads -> (b, H, s, d_v);
    the queries may be a slice of the keys' sequence starting at `q_offset` (context parallel)."""
    seq = k.shape[2]
    scale = shape.scale if shape.scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(0, 1, 3, 2) * scale  # (b, H, s, d) @ (b, H, d, s)
    capped = None
    if shape.softcap is not None:  # Gemma 2: cap * tanh(scores / cap)
        capped = np.tanh(scores / shape.softcap)
        scores = shape.softcap * capped
    masked = attention_mask(seq, shape.causal, shape.window, shape.chunk, q.shape[2], q_offset)
    scores = np.where(masked, -np.inf, scores)
    if sinks is not None:  # gpt-oss: the sink logit joins every row's softmax, then is dropped
        sink = np.broadcast_to(sinks[None, :, None, None], scores.shape[:3] + (1,))
        scores = np.concatenate([scores, sink], axis=-1)
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    sink_probs = None
    if sinks is not None:
        probs, sink_probs = probs[..., :seq], probs[..., seq:]
    context = probs @ v  # (b, H, s, s) @ (b, H, s, d_v)
    return context, CoreCache(q, k, v, probs, sink_probs, capped)


def core_backward(c: CoreCache, shape: AttentionShape, dctx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(dq, dk, dv over the H repeated heads, dsinks (H,) or None) of core_forward."""
    scale = shape.scale if shape.scale is not None else 1.0 / math.sqrt(c.q.shape[-1])
    dprobs = dctx @ c.v.transpose(0, 1, 3, 2)  # (b, H, s, d_v) @ (b, H, d_v, s)
    dv = c.probs.transpose(0, 1, 3, 2) @ dctx  # (b, H, s, s).T @ (b, H, s, d_v)
    inner = (dprobs * c.probs).sum(axis=-1, keepdims=True)  # the sink's output gradient is 0
    dscores = c.probs * (dprobs - inner)  # softmax backward: p * (dp - sum(dp * p))
    dsinks = None if c.sink_probs is None else -(c.sink_probs * inner).sum(axis=(0, 2, 3))  # (H,)
    if c.capped is not None:
        dscores = dscores * (1.0 - c.capped * c.capped)  # d/dx cap * tanh(x / cap)
    dscores = dscores * scale
    dq = dscores @ c.k  # (b, H, s, s) @ (b, H, s, d)
    dk = dscores.transpose(0, 1, 3, 2) @ c.q  # (b, H, s, s).T @ (b, H, s, d)
    return dq, dk, dv, dsinks


def _norm_heads(qk: QKNorm, t: np.ndarray, p: Mapping[str, np.ndarray], name: str, reduce: Reduce | None
                ) -> tuple[np.ndarray, NormCache]:
    """One q (or k) norm: over the (b, s, n*d) projection (all_heads) or (b, n, s, d) heads."""
    weight, bias = p.get(f"{name}/weight"), p.get(f"{name}/bias")
    if qk.scope == "all_heads":
        width = qk.q_width if name == "q_norm" else qk.kv_width
        return norm_forward(qk.kind, t, weight, bias, qk.eps, reduce, width, f"tp/attention/{name}")
    if qk.weight == "per_head":  # (n, d) -> (n, 1, d): broadcast over positions
        weight = None if weight is None else weight[:, None, :]
        bias = None if bias is None else bias[:, None, :]
    return norm_forward(qk.kind, t, weight, bias, qk.eps)


def _norm_heads_backward(qk: QKNorm, cache: NormCache, p: Mapping[str, np.ndarray], name: str, dy: np.ndarray,
                         grads: dict, reduce: Reduce | None) -> np.ndarray:
    weight = p.get(f"{name}/weight")
    if qk.scope == "all_heads":
        dx, dw, db = norm_backward(cache, weight, dy, f"{name}/bias" in p, reduce, f"tp/attention/{name}")
    else:
        w = None if weight is None else (weight[:, None, :] if qk.weight == "per_head" else weight)
        dx, _, _ = norm_backward(cache, w, dy, False)
        axes = (0, 2) if qk.weight == "per_head" else (0, 1, 2)  # per head: sum over (b, s)
        dw = None if weight is None else (dy * cache.x_hat).sum(axis=axes)
        db = dy.sum(axis=axes) if f"{name}/bias" in p else None
    if dw is not None:
        grads[f"{name}/weight"] = dw
    if db is not None:
        grads[f"{name}/bias"] = db
    return dx


def _scale(shape: AttentionShape, q: np.ndarray) -> float:
    return shape.scale if shape.scale is not None else 1.0 / math.sqrt(q.shape[-1])


def _core(q: np.ndarray, k: np.ndarray, v: np.ndarray, shape: AttentionShape, sinks: np.ndarray | None,
          offset: int, cp: ContextParallel | None):
    """(context (b, H, s, d_v), core cache, local K, V or None) of the score core, K, V (b, KV, s, d)
    exchanged over cp as `cp.kind` says (`execute/context_parallel.py`)."""
    group = shape.heads // shape.kv_heads
    if cp is not None and cp.kind == "p2p":  # ring: this rank's rows of the whole sequence's mask
        seq = q.shape[2]
        masked = attention_mask(seq * cp.size, shape.causal, shape.window, shape.chunk, seq, offset)
        ctx, core = ring_forward(cp, q, k, v, group, _scale(shape, q), shape.softcap, masked, sinks)
        return ctx, core, (k, v)
    if cp is not None and cp.kind == "a2a":  # Ulysses: all s tokens of heads/cp heads, one AllToAll each
        q, k, v = (cp.seq_to_heads(t, Region.CP_QKV) for t in (q, k, v))  # (b, n, s/cp, d) -> (b, n/cp, s, d)
        sinks = None if sinks is None else sinks[cp.local_heads(shape.heads)]
        ctx, core = core_forward(q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1), shape, sinks)
        return cp.heads_to_seq(ctx, Region.CP_OUT), core, None  # (b, H/cp, s, d) -> (b, H, s/cp, d)
    local_kv = None
    if cp is not None:
        local_kv = (k, v)
        k, v = cp.gather_kv(k, v)  # (b, KV, s/cp, d) -> (b, KV, s, d)
    k = np.repeat(k, group, axis=1)  # (b, KV, s, d) -> (b, H, s, d)
    v = np.repeat(v, group, axis=1)
    ctx, core = core_forward(q, k, v, shape, sinks, offset)
    if cp is not None:  # keep the local K, V only (TE's all_gather gathers them again in backward)
        core = replace(core, k=None, v=None)
    return ctx, core, local_kv


def _fold(t: np.ndarray, kv_heads: int) -> np.ndarray:
    """(b, H, s, d) gradients of the repeated K or V heads -> (b, KV, s, d) (GQA sum)."""
    b, heads, s, d = t.shape
    return t.reshape(b, kv_heads, heads // kv_heads, s, d).sum(axis=2)


def discard_scores(cache):
    """`cache` (an attention or MLA cache) without its core's probabilities: Megatron-core's
    `core_attn` recompute keeps Q, K, V and re-runs the core before its backward (`restore_scores`).
    A ring's blocks (`RingCache`) are kept: re-running them would be communication."""
    if not isinstance(cache.core, CoreCache):
        return cache
    return replace(cache, core=replace(cache.core, probs=None, sink_probs=None, capped=None))


def restore_scores(core: CoreCache, shape: AttentionShape, sinks: np.ndarray | None = None,
                   q_offset: int = 0) -> CoreCache:
    """The core cache with the probabilities `discard_scores` dropped, recomputed from its Q, K, V."""
    if core.probs is not None:
        return core
    fresh = core_forward(core.q, core.k, core.v, shape, sinks, q_offset)[1]
    return replace(core, probs=fresh.probs, sink_probs=fresh.sink_probs, capped=fresh.capped)


def _core_backward(cache: AttentionCache, shape: AttentionShape, dctx: np.ndarray, cp: ContextParallel | None,
                   sinks: np.ndarray | None = None):
    """(dq (b, H, s, d), dk, dv (b, KV, s, d) of this rank's tokens, dsinks or None) of `_core`."""
    H, KV = shape.heads, shape.kv_heads
    core = cache.core
    if cp is not None and cp.kind == "p2p":
        ctx = _heads(cache.context, H, shape.head_dim)  # O, for D = rowsum(dO * O)
        return ring_backward(cp, core, *cache.local_kv, H // KV, _scale(shape, core.q), ctx, dctx)
    if cp is not None and cp.kind == "a2a":
        core = restore_scores(core, shape, None if sinks is None else sinks[cp.local_heads(H)])
        dq, dk, dv, part = core_backward(core, shape, cp.seq_to_heads(dctx, Region.CP_OUT))  # dO to head shards
        dsinks = None
        if part is not None:  # this rank's heads' share; the dp x cp average adds the others'
            dsinks = np.zeros(H)
            dsinks[cp.local_heads(H)] = part
        dk, dv = _fold(dk, KV // cp.size), _fold(dv, KV // cp.size)
        dq, dk, dv = (cp.heads_to_seq(t, Region.CP_DKV) for t in (dq, dk, dv))  # back to sequence shards
        return dq, dk, dv, dsinks
    if cp is not None:  # gather K, V again: (b, KV, s/cp, d) -> (b, H, s, d)
        k, v = cp.gather_kv(*cache.local_kv)
        core = replace(core, k=np.repeat(k, H // KV, axis=1), v=np.repeat(v, H // KV, axis=1))
    core = restore_scores(core, shape, sinks, 0 if cp is None else cp.offset(core.q.shape[2]))
    dq, dk, dv, dsinks = core_backward(core, shape, dctx)
    dk, dv = _fold(dk, KV), _fold(dv, KV)  # s (all keys) under cp
    if cp is not None:  # this rank's slice of the summed whole-sequence dK, dV
        dk, dv = cp.scatter_dkv(dk, dv)
    return dq, dk, dv, dsinks


def attention_forward(
    x: np.ndarray, p: Mapping[str, np.ndarray], shape: AttentionShape, reduce: Reduce | None = None,
    cp: ContextParallel | None = None,
) -> tuple[np.ndarray, AttentionCache]:
    """Self-attention of x (b, s, h) up to the output projection, bias excluded. `reduce` sums
    the all-heads q/k norm statistics over tensor-parallel ranks (None: one device); `cp`: x is
    this rank's slice of the sequence and K, V are exchanged over the cp group (`_core`)."""
    H, KV, d, qk = shape.heads, shape.kv_heads, shape.head_dim, shape.qk_norm
    seq = x.shape[1]
    offset = 0 if cp is None else cp.offset(seq)
    t = {n: linear_forward(x, p[f"{n}/weight"], p.get(f"{n}/bias")) for n in "qkv"}  # (b, s, n*d)
    norms: dict[str, NormCache] = {}
    if qk is not None and qk.scope == "all_heads":
        for n in "qk":
            t[n], norms[n] = _norm_heads(qk, t[n], p, f"{n}_norm", reduce)
    t = {n: _heads(t[n], H if n == "q" else KV, d) for n in "qkv"}  # (b, n, s, d)
    if qk is not None and qk.scope == "head":
        for n in "qk":
            t[n], norms[n] = _norm_heads(qk, t[n], p, f"{n}_norm", None)
    clip_masks = {}
    if shape.clip is not None:
        for n in "qkv":
            clip_masks[n] = np.abs(t[n]) <= shape.clip  # torch clamp passes the gradient inside [-c, c]
            t[n] = np.clip(t[n], -shape.clip, shape.clip)
    q, k, v = t["q"], t["k"], t["v"]
    if shape.rotary:
        cos, sin = rotary_tables(seq, shape.rotary_dims or d, shape.rotary_base, offset)
        q, k = rotary_forward(q, cos, sin), rotary_forward(k, cos, sin)
    ctx, core, local_kv = _core(q, k, v, shape, p["sinks"] if shape.sinks else None, offset, cp)
    context = _merge(ctx)  # (b, H, s, d) -> (b, s, H*d)
    gate = None
    if "gate/weight" in p:  # Qwen3-Next attention_output_gate: attn_output * sigmoid(gate), per head
        gate = linear_forward(x, p["gate/weight"], p.get("gate/bias"))
    out = linear_forward(context if gate is None else context * _sigmoid(gate), p["out/weight"])  # (b, s, H*d) @ (H*d, h)
    return out, AttentionCache(x, norms, clip_masks, core, context, local_kv, gate)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def attention_backward(
    cache: AttentionCache, p: Mapping[str, np.ndarray], shape: AttentionShape, dout: np.ndarray,
    reduce: Reduce | None = None, cp: ContextParallel | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads) of attention_forward; grads has the keys of p except out/bias."""
    H, d, qk = shape.heads, shape.head_dim, shape.qk_norm
    seq = cache.x.shape[1]
    grads: dict[str, np.ndarray] = {}
    gated = cache.context if cache.gate is None else cache.context * _sigmoid(cache.gate)
    dcontext, grads["out/weight"], _ = linear_backward(gated, p["out/weight"], dout, False)
    dgate = None
    if cache.gate is not None:
        s = _sigmoid(cache.gate)
        dgate, dcontext = dcontext * cache.context * s * (1.0 - s), dcontext * s
    dq, dk, dv, dsinks = _core_backward(cache, shape, _heads(dcontext, H, d), cp, p["sinks"] if shape.sinks else None)
    if dsinks is not None:
        grads["sinks"] = dsinks
    if shape.rotary:
        cos, sin = rotary_tables(seq, shape.rotary_dims or d, shape.rotary_base, 0 if cp is None else cp.offset(seq))
        dq, dk = rotary_backward(dq, cos, sin), rotary_backward(dk, cos, sin)
    dt = {"q": dq, "k": dk, "v": dv}
    for n, inside in cache.clip_masks.items():
        dt[n] = dt[n] * inside
    if qk is not None and qk.scope == "head":
        for n in "qk":
            dt[n] = _norm_heads_backward(qk, cache.norms[n], p, f"{n}_norm", dt[n], grads, None)
    dt = {n: _merge(v) for n, v in dt.items()}  # (b, n, s, d) -> (b, s, n*d)
    if qk is not None and qk.scope == "all_heads":
        for n in "qk":
            dt[n] = _norm_heads_backward(qk, cache.norms[n], p, f"{n}_norm", dt[n], grads, reduce)
    dx = np.zeros_like(cache.x)
    if dgate is not None:
        dt["gate"] = dgate
    for name in dt:
        dxi, grads[f"{name}/weight"], db = linear_backward(cache.x, p[f"{name}/weight"], dt[name], f"{name}/bias" in p)
        dx += dxi
        if db is not None:
            grads[f"{name}/bias"] = db
    return dx, grads
