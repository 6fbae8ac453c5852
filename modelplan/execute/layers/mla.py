"""Multi-head Latent Attention (DeepSeek-V2, arXiv 2405.04434, sec. 2.1, eq. 9-19), as
transformers' DeepseekV3Attention computes it (latents expanded to per-head keys and values).

Parameters (relative names, HF's module names): q/weight (h, H*(d_h + d_R)) or the query latent
q_a/weight (h, r'), q_a_norm/weight (r'), q_b/weight (r', H*(d_h + d_R)); kv_a/weight
(h, d_c + d_R), kv_a_norm/weight (d_c), kv_b/weight (d_c, H*(d_h + d_v)); out/weight (H*d_v, h);
q_a/bias and kv_a/bias with attention_bias. Each head's query columns are [nope d_h, rope d_R],
kv_b's [key d_h, value d_v]; kv_a's are [latent d_c, rotary key d_R], one rotary key for all heads.

Under tensor parallelism (Megatron-core MLASelfAttention) the heads split: q_b (or q), kv_b
columns and out rows; the latents and their norms are replicated, so their gradients, and the
rotary key's, are partial sums over the local heads (all-reduced over tp).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from modelplan.execute.layers.attention import (
    AttentionShape,
    CoreCache,
    _heads,
    _merge,
    core_backward,
    core_forward,
    restore_scores,
    rotary_backward,
    rotary_forward,
    rotary_tables,
)
from modelplan.execute.layers.linear import linear_backward, linear_forward
from modelplan.execute.layers.norm import NormCache, NormKind, norm_backward, norm_forward


@dataclass(frozen=True)
class MLAShape:
    """Local heads and the latent dims; `core` carries the score options (scale, mask, ...)."""

    heads: int
    nope_dim: int
    rope_dim: int
    v_dim: int
    kv_rank: int
    q_rank: int | None
    norm: NormKind
    eps: float
    core: AttentionShape
    rotary_base: float | None = None
    """RoPE base theta of the rotary dims (HF rope_theta); None: the attention module's default."""


@dataclass(frozen=True)
class MLACache:
    """Activations kept for backward."""

    x: np.ndarray
    q_latent: np.ndarray | None  # normalised query latent (b, s, r')
    q_norm: NormCache | None
    kv_latent: np.ndarray  # normalised kv latent (b, s, d_c)
    kv_norm: NormCache
    core: CoreCache
    context: np.ndarray  # (b, s, H*d_v)


def mla_forward(x: np.ndarray, p: Mapping[str, np.ndarray], shape: MLAShape
                ) -> tuple[np.ndarray, MLACache]:
    """MLA of x (b, s, h) up to the output projection, bias excluded."""
    H, dn, dr, dv = shape.heads, shape.nope_dim, shape.rope_dim, shape.v_dim
    seq = x.shape[1]
    q_latent = q_norm = None
    if shape.q_rank is None:
        q = linear_forward(x, p["q/weight"])  # (b, s, h) @ (h, H*(d_h + d_R))
    else:
        a = linear_forward(x, p["q_a/weight"], p.get("q_a/bias"))  # (b, s, h) @ (h, r')
        q_latent, q_norm = norm_forward(shape.norm, a, p["q_a_norm/weight"], None, shape.eps)
        q = linear_forward(q_latent, p["q_b/weight"])  # (b, s, r') @ (r', H*(d_h + d_R))
    q = _heads(q, H, dn + dr)  # (b, H, s, d_h + d_R)
    kv = linear_forward(x, p["kv_a/weight"], p.get("kv_a/bias"))  # (b, s, h) @ (h, d_c + d_R)
    kv_latent, kv_norm = norm_forward(shape.norm, kv[..., : shape.kv_rank], p["kv_a_norm/weight"], None, shape.eps)
    k_rope = kv[:, None, :, shape.kv_rank:]  # (b, 1, s, d_R): one rotary key for all heads
    kv_up = _heads(linear_forward(kv_latent, p["kv_b/weight"]), H, dn + dv)  # (b, H, s, d_h + d_v)
    cos, sin = rotary_tables(seq, dr, shape.rotary_base)
    q_rope = rotary_forward(q[..., dn:], cos, sin)
    k_rope = rotary_forward(k_rope, cos, sin)
    q = np.concatenate([q[..., :dn], q_rope], axis=-1)
    k = np.concatenate([kv_up[..., :dn], np.broadcast_to(k_rope, kv_up.shape[:3] + (dr,))], axis=-1)
    ctx, core = core_forward(q, k, kv_up[..., dn:], shape.core)
    context = _merge(ctx)  # (b, H, s, d_v) -> (b, s, H*d_v)
    out = linear_forward(context, p["out/weight"])  # (b, s, H*d_v) @ (H*d_v, h)
    return out, MLACache(x, q_latent, q_norm, kv_latent, kv_norm, core, context)


def mla_backward(c: MLACache, p: Mapping[str, np.ndarray], shape: MLAShape, dout: np.ndarray
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads) of mla_forward; grads has the keys of p except out/bias."""
    H, dn, dr, dv = shape.heads, shape.nope_dim, shape.rope_dim, shape.v_dim
    seq = c.x.shape[1]
    grads: dict[str, np.ndarray] = {}
    dcontext, grads["out/weight"], _ = linear_backward(c.context, p["out/weight"], dout, False)
    dq, dk, dvalue, _ = core_backward(restore_scores(c.core, shape.core), shape.core, _heads(dcontext, H, dv))
    cos, sin = rotary_tables(seq, dr, shape.rotary_base)
    dq = np.concatenate([dq[..., :dn], rotary_backward(dq[..., dn:], cos, sin)], axis=-1)
    dk_rope = rotary_backward(dk[..., dn:].sum(axis=1, keepdims=True), cos, sin)  # (b, 1, s, d_R): summed over heads
    dkv_up = _merge(np.concatenate([dk[..., :dn], dvalue], axis=-1))  # (b, s, H*(d_h + d_v))
    dlatent, grads["kv_b/weight"], _ = linear_backward(c.kv_latent, p["kv_b/weight"], dkv_up, False)
    dlatent, grads["kv_a_norm/weight"], _ = norm_backward(c.kv_norm, p["kv_a_norm/weight"], dlatent, False)
    dkv = np.concatenate([dlatent, dk_rope[:, 0]], axis=-1)  # (b, s, d_c + d_R)
    dx, grads["kv_a/weight"], db = linear_backward(c.x, p["kv_a/weight"], dkv, "kv_a/bias" in p)
    if db is not None:
        grads["kv_a/bias"] = db
    dq = _merge(dq)  # (b, s, H*(d_h + d_R))
    if shape.q_rank is None:
        dxq, grads["q/weight"], _ = linear_backward(c.x, p["q/weight"], dq, False)
    else:
        dqa, grads["q_b/weight"], _ = linear_backward(c.q_latent, p["q_b/weight"], dq, False)
        dqa, grads["q_a_norm/weight"], _ = norm_backward(c.q_norm, p["q_a_norm/weight"], dqa, False)
        dxq, grads["q_a/weight"], db = linear_backward(c.x, p["q_a/weight"], dqa, "q_a/bias" in p)
        if db is not None:
            grads["q_a/bias"] = db
    return dx + dxq, grads
