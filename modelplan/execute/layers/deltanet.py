"""The gated DeltaNet mixer (Yang, Kautz & Hatamizadeh 2024, arXiv 2412.06464, eq. 10) as
transformers' Qwen3NextGatedDeltaNet computes it without fused kernels (its torch fallback), with
its backward. The delta rule runs sequentially (the chunked kernel is the same sum).

Parameters (relative names): in_q|in_k (h, Hk dk), in_v|in_z (h, Hv dv), in_b|in_a (h, Hv)
/weight (HF in_proj_qkvz and in_proj_ba, de-interleaved), conv_q|conv_k|conv_v /weight
(width, k) (the depthwise causal conv1d over [q, k, v], no bias), dt_bias and A_log (Hv),
gate_norm/weight (dv, shared by the heads) and out/weight (Hv dv, h). Forward on x (b, s, h),
value head j reading key head j // (Hv / Hk):

    q, k, v = silu(conv(x W_q)), silu(conv(x W_k)), silu(conv(x W_v))
    q = l2norm(q) / sqrt(dk),  k = l2norm(k),  beta = sigmoid(x W_b)
    g = -exp(A_log) softplus(x W_a + dt_bias)
    S' = exp(g_t) S_{t-1},  S_t = S' + k_t (beta_t (v_t - S'^T k_t))^T,  o_t = S_t^T q_t   (dk x dv)
    out = (rmsnorm(o) * w * silu(z)) W_out        (per value head; norm before gate)

Not wired into verify yet: `modelplan verify` still refuses layer_types=gated_deltanet by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from modelplan.execute.layers.linear import linear_backward, linear_forward
from modelplan.execute.layers.mamba import _silu, _silu_grad, _softplus, causal_conv, causal_conv_backward
from modelplan.execute.layers.norm import norm_backward, norm_forward

PARTS = ("q", "k", "v")
L2_EPS = 1e-6  # fla / HF l2norm eps


@dataclass(frozen=True)
class DeltaNetShape:
    """The mixer's sizes on one rank."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    eps: float


def _l2norm(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = 1.0 / np.sqrt((x * x).sum(axis=-1, keepdims=True) + L2_EPS)
    return x * r, r


def _l2norm_backward(y: np.ndarray, r: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return r * (dy - y * (dy * y).sum(axis=-1, keepdims=True))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _to_value_heads(a: np.ndarray, shape: DeltaNetShape) -> np.ndarray:
    """(b, s, Hk dk) -> (b, s, Hv, dk), each key head repeated to its value heads."""
    a = a.reshape(a.shape[:2] + (shape.key_heads, shape.key_dim))
    return np.repeat(a, shape.value_heads // shape.key_heads, axis=2)


def _to_key_heads(d: np.ndarray, shape: DeltaNetShape) -> np.ndarray:
    b, s = d.shape[:2]
    return d.reshape(b, s, shape.key_heads, -1, shape.key_dim).sum(axis=3).reshape(b, s, -1)


def _forward_core(shape, conv, p, x):
    """Everything up to the recurrence's inputs."""
    u = {k: _silu(conv[k]) for k in PARTS}
    qh, rq = _l2norm(_to_value_heads(u["q"], shape))
    kh, rk = _l2norm(_to_value_heads(u["k"], shape))
    v = u["v"].reshape(u["v"].shape[:2] + (shape.value_heads, shape.value_dim))
    beta = _sigmoid(x @ p["in_b/weight"])
    a_raw = x @ p["in_a/weight"] + p["dt_bias"]
    g = -np.exp(p["A_log"]) * _softplus(a_raw)
    return u, qh, rq, kh, rk, v, beta, a_raw, g


def _recurrence(qs, k, v, beta, g):
    """(o (b, s, Hv, dv), S_{t-1} before each step (b, s, Hv, dk, dv))."""
    b, s, H, dk = k.shape
    S = np.zeros((b, H, dk, v.shape[-1]))
    prev = np.empty((b, s, H, dk, v.shape[-1]))
    o = np.empty_like(v)
    for t in range(s):
        prev[:, t] = S
        Sd = S * np.exp(g[:, t])[..., None, None]
        kv = np.einsum("bhkv,bhk->bhv", Sd, k[:, t])
        delta = beta[:, t, :, None] * (v[:, t] - kv)
        S = Sd + k[:, t, :, :, None] * delta[:, :, None, :]
        o[:, t] = np.einsum("bhkv,bhk->bhv", S, qs[:, t])
    return o, prev


@dataclass(frozen=True)
class DeltaNetCache:
    x: np.ndarray
    pre: dict  # conv inputs
    z: np.ndarray


def deltanet_forward(x: np.ndarray, p: Mapping[str, np.ndarray], shape: DeltaNetShape
                     ) -> tuple[np.ndarray, DeltaNetCache]:
    """The mixer of x (b, s, h) up to out_proj (partial over tp when heads are split)."""
    pre = {k: x @ p[f"in_{k}/weight"] for k in PARTS}
    conv = {k: causal_conv(pre[k], p[f"conv_{k}/weight"], None) for k in PARTS}
    z = linear_forward(x, p["in_z/weight"])
    _, qh, _, kh, _, v, beta, _, g = _forward_core(shape, conv, p, x)
    o, _ = _recurrence(qh / np.sqrt(shape.key_dim), kh, v, beta, g)
    normed, _ = norm_forward("rmsnorm", o, p["gate_norm/weight"], None, shape.eps)
    zh = z.reshape(o.shape)
    out = (normed * _silu(zh)).reshape(x.shape[:2] + (-1,)) @ p["out/weight"]
    return out, DeltaNetCache(x, pre, z)


def deltanet_backward(c: DeltaNetCache, p: Mapping[str, np.ndarray], shape: DeltaNetShape, dout: np.ndarray
                      ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads) of deltanet_forward (everything recomputed from the cache)."""
    x, grads = c.x, {}
    conv = {k: causal_conv(c.pre[k], p[f"conv_{k}/weight"], None) for k in PARTS}
    u, qh, rq, kh, rk, v, beta, a_raw, g = _forward_core(shape, conv, p, x)
    scale = 1.0 / np.sqrt(shape.key_dim)
    qs = qh * scale
    o, prev = _recurrence(qs, kh, v, beta, g)
    normed, ncache = norm_forward("rmsnorm", o, p["gate_norm/weight"], None, shape.eps)
    zh = c.z.reshape(o.shape)
    gated = (normed * _silu(zh)).reshape(x.shape[:2] + (-1,))
    dgated, grads["out/weight"], _ = linear_backward(gated, p["out/weight"], dout, False)
    dgated = dgated.reshape(o.shape)
    dz = dgated * normed * _silu_grad(zh)
    do, grads["gate_norm/weight"], _ = norm_backward(ncache, p["gate_norm/weight"], dgated * _silu(zh), False)
    dqs, dk, dv = np.zeros_like(qs), np.zeros_like(kh), np.zeros_like(v)
    dbeta, dg = np.zeros_like(beta), np.zeros_like(g)
    G = np.zeros(prev.shape[:1] + prev.shape[2:])  # dL/dS_t (b, H, dk, dv)
    for t in reversed(range(o.shape[1])):
        decay = np.exp(g[:, t])[..., None, None]
        Sd = prev[:, t] * decay
        kt = kh[:, t]
        kv = np.einsum("bhkv,bhk->bhv", Sd, kt)
        delta = beta[:, t, :, None] * (v[:, t] - kv)
        S = Sd + kt[..., None] * delta[:, :, None, :]
        dqs[:, t] = np.einsum("bhkv,bhv->bhk", S, do[:, t])
        G = G + qs[:, t, :, :, None] * do[:, t, :, None, :]
        ddelta = np.einsum("bhkv,bhk->bhv", G, kt)
        dk[:, t] = np.einsum("bhkv,bhv->bhk", G, delta)
        dv[:, t] = beta[:, t, :, None] * ddelta
        dbeta[:, t] = (ddelta * (v[:, t] - kv)).sum(axis=-1)
        dkv = -beta[:, t, :, None] * ddelta
        dSd = G + kt[..., None] * dkv[:, :, None, :]
        dk[:, t] += np.einsum("bhkv,bhv->bhk", Sd, dkv)
        dg[:, t] = (dSd * Sd).sum(axis=(-1, -2))  # d exp(g) * exp(g) S_{t-1} = dSd . Sd
        G = dSd * decay
    grads["A_log"] = (dg * g).sum(axis=(0, 1))  # g = -exp(A_log) softplus(.): dg/dA_log = g
    da = dg * -np.exp(p["A_log"]) * _sigmoid(a_raw)
    grads["dt_bias"] = da.sum(axis=(0, 1))
    db = dbeta * beta * (1.0 - beta)
    du = {"q": _to_key_heads(_l2norm_backward(qh, rq, dqs * scale), shape),
          "k": _to_key_heads(_l2norm_backward(kh, rk, dk), shape),
          "v": dv.reshape(u["v"].shape)}
    dx = np.zeros_like(x)
    for k in PARTS:
        dconv = du[k] * _silu_grad(conv[k])
        dpre, grads[f"conv_{k}/weight"] = causal_conv_backward(c.pre[k], p[f"conv_{k}/weight"], dconv)
        du[k] = dpre
    du["z"], du["b"], du["a"] = dz.reshape(c.z.shape), db, da
    for k, d in du.items():
        dxi, grads[f"in_{k}/weight"], _ = linear_backward(x, p[f"in_{k}/weight"], d, False)
        dx += dxi
    return dx, grads
