"""Multi-head / grouped-query self-attention with optional causal mask and rotary positions.

Parameters (relative names): q|k|v|out /weight and /bias. Query heads are laid out head-major
along the output columns (column j of q/weight belongs to head j // head_dim), so a contiguous
column block is a contiguous group of heads: the split tensor parallelism uses. The output
projection is returned *without* its bias; the caller adds it once (after the tensor-parallel
reduce). Query head i reads key/value head i // (heads // kv_heads) (GQA, Ainslie et al. 2023).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from modelplan.execute.layers.linear import linear_backward, linear_forward

ROTARY_BASE = 10000.0  # RoFormer (Su et al. 2021) and Llama default theta


@dataclass(frozen=True)
class AttentionShape:
    """Head counts of the heads this call computes (local to a tensor-parallel rank)."""

    heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    rotary: bool


@dataclass(frozen=True)
class AttentionCache:
    """Activations kept for backward."""

    x: np.ndarray
    q: np.ndarray  # (b, H, s, d), after rotary
    k: np.ndarray  # (b, H, s, d), after rotary, repeated to H heads
    v: np.ndarray  # (b, H, s, d), repeated to H heads
    probs: np.ndarray  # (b, H, s, s)
    context: np.ndarray  # (b, s, H*d)


def rotary_tables(seq: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin of shape (seq, head_dim), HF's rotate_half layout: theta_i = base^(-2i/d)."""
    inv_freq = 1.0 / ROTARY_BASE ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(seq, dtype=np.float64), inv_freq)  # (s, d/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (s, d)
    return np.cos(angles), np.sin(angles)


def _rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def _rotate_half_transposed(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([x[..., half:], -x[..., :half]], axis=-1)


def rotary_forward(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x * cos + rotate_half(x) * sin; x is (b, heads, s, d)."""
    return x * cos + _rotate_half(x) * sin


def rotary_backward(dy: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Transpose of the rotation: dy * cos + rotate_half^T(dy * sin)."""
    return dy * cos + _rotate_half_transposed(dy * sin)


def _heads(t: np.ndarray, n: int, d: int) -> np.ndarray:
    b, s, _ = t.shape
    return t.reshape(b, s, n, d).transpose(0, 2, 1, 3)  # (b, s, n*d) -> (b, n, s, d)


def _merge(t: np.ndarray) -> np.ndarray:
    b, n, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, n * d)  # (b, n, s, d) -> (b, s, n*d)


def attention_forward(
    x: np.ndarray, p: Mapping[str, np.ndarray], shape: AttentionShape
) -> tuple[np.ndarray, AttentionCache]:
    """Self-attention of x (b, s, h) up to the output projection, bias excluded."""
    H, KV, d = shape.heads, shape.kv_heads, shape.head_dim
    group = H // KV
    seq = x.shape[1]
    q = _heads(linear_forward(x, p["q/weight"], p.get("q/bias")), H, d)
    k = _heads(linear_forward(x, p["k/weight"], p.get("k/bias")), KV, d)
    v = _heads(linear_forward(x, p["v/weight"], p.get("v/bias")), KV, d)
    if shape.rotary:
        cos, sin = rotary_tables(seq, d)
        q, k = rotary_forward(q, cos, sin), rotary_forward(k, cos, sin)
    k = np.repeat(k, group, axis=1)  # (b, KV, s, d) -> (b, H, s, d)
    v = np.repeat(v, group, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)  # (b, H, s, d) @ (b, H, d, s)
    if shape.causal:
        scores = np.where(np.triu(np.ones((seq, seq), dtype=bool), 1), -np.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    context = _merge(probs @ v)  # (b, H, s, s) @ (b, H, s, d) -> (b, s, H*d)
    out = linear_forward(context, p["out/weight"])  # (b, s, H*d) @ (H*d, h)
    return out, AttentionCache(x, q, k, v, probs, context)


def attention_backward(
    cache: AttentionCache, p: Mapping[str, np.ndarray], shape: AttentionShape, dout: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads) of attention_forward; grads has the keys of p except out/bias."""
    H, KV, d = shape.heads, shape.kv_heads, shape.head_dim
    group = H // KV
    b, seq, _ = cache.x.shape
    grads: dict[str, np.ndarray] = {}
    dcontext, grads["out/weight"], _ = linear_backward(cache.context, p["out/weight"], dout, False)
    dctx = _heads(dcontext, H, d)
    dprobs = dctx @ cache.v.transpose(0, 1, 3, 2)  # (b, H, s, d) @ (b, H, d, s)
    dv = cache.probs.transpose(0, 1, 3, 2) @ dctx  # (b, H, s, s).T @ (b, H, s, d)
    # softmax backward: p * (dp - sum(dp * p))
    dscores = cache.probs * (dprobs - (dprobs * cache.probs).sum(axis=-1, keepdims=True))
    dscores /= math.sqrt(d)
    dq = dscores @ cache.k  # (b, H, s, s) @ (b, H, s, d)
    dk = dscores.transpose(0, 1, 3, 2) @ cache.q  # (b, H, s, s).T @ (b, H, s, d)
    dk = dk.reshape(b, KV, group, seq, d).sum(axis=2)  # fold the GQA repeats back
    dv = dv.reshape(b, KV, group, seq, d).sum(axis=2)
    if shape.rotary:
        cos, sin = rotary_tables(seq, d)
        dq, dk = rotary_backward(dq, cos, sin), rotary_backward(dk, cos, sin)
    dx = np.zeros_like(cache.x)
    for name, dt in (("q", dq), ("k", dk), ("v", dv)):
        dxi, grads[f"{name}/weight"], db = linear_backward(
            cache.x, p[f"{name}/weight"], _merge(dt), f"{name}/bias" in p
        )
        dx += dxi
        if db is not None:
            grads[f"{name}/bias"] = db
    return dx, grads
