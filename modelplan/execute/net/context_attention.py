"""The context-vector attention leaves (`specs.context_attention`) in numpy, forward and backward,
batched (N, C_in, H, W).

Separable (MobileViT V2, Mehta & Rastegari 2022b eq. 1-3), per sequence (the positions at one patch
offset, `cross_attention.unfold`): s = softmax(q), c = sum s k, y = relu(v) c. Backward: dv = dy c
[v > 0], dc = sum dy relu(v), dk = dc s, ds = sum_channels dc k, dq = s (ds - sum s ds).

Additive (SwiftFormer, Shaker et al. 2023 eq. 4-6): q^ = q / max(||q||, eps) (F.normalize), k^ alike,
G = sum_positions q^ (the softmax over the size-1 weight axis is 1, so w_g's gradient is 0),
z = G k^, y = W z + b + q^. Backward: dz = W^T dy, dq^ = dy + sum_positions dz k^, dk^ = dz G, and
through F.normalize dr = (du - u sum_channels(du u)) / ||r|| (du / eps where ||r|| <= eps).
"""

from __future__ import annotations

import numpy as np

from modelplan.execute.net.cross_attention import fold, unfold
from modelplan.execute.net.saved import Saved

NORMALIZE_EPS = 1e-12  # torch.nn.functional.normalize's default eps


def _rows(x: np.ndarray, patch: int) -> np.ndarray:
    """(N, C, H, W) -> (N p^2, C, H W / p^2): one row per sequence."""
    u = unfold(x, patch) if patch > 1 else x
    return u.reshape(u.shape[0], u.shape[1], -1)


def _maps(rows: np.ndarray, like: tuple[int, ...], patch: int) -> np.ndarray:
    """The inverse of `_rows` for a (N, C', H, W) result."""
    n, _, h, w = like
    u = rows.reshape(rows.shape[0], rows.shape[1], h // patch, w // patch)
    return fold(u, patch) if patch > 1 else u


def separable_forward(patch: int, x: np.ndarray) -> tuple[np.ndarray, Saved]:
    """relu(v) * sum(softmax(q) k) per sequence; keeps the input and the scores."""
    r = _rows(x, patch)
    c = (r.shape[1] - 1) // 2
    q, k, v = r[:, :1], r[:, 1:1 + c], r[:, 1 + c:]
    s = np.exp(q - q.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)  # (R, 1, M)
    ctx = (k * s).sum(axis=-1, keepdims=True)  # (R, C, 1)
    y = np.maximum(v, 0.0) * ctx
    return _maps(y, (x.shape[0], c, *x.shape[2:]), patch), Saved(floats=(x, s), extra=ctx)


def separable_backward(patch: int, saved: Saved, dy: np.ndarray) -> np.ndarray:
    """dx of the forward above (module docstring)."""
    x, s = saved.floats
    ctx, r, g = saved.extra, _rows(x, patch), _rows(dy, patch)
    c = (r.shape[1] - 1) // 2
    k, v = r[:, 1:1 + c], r[:, 1 + c:]
    dv = g * ctx * (v > 0)
    dctx = (g * np.maximum(v, 0.0)).sum(axis=-1, keepdims=True)  # (R, C, 1)
    dk = dctx * s
    ds = (dctx * k).sum(axis=1, keepdims=True)  # (R, 1, M)
    dq = s * (ds - (ds * s).sum(axis=-1, keepdims=True))
    return _maps(np.concatenate([dq, dk, dv], axis=1), x.shape, patch)


def _normalize(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(r / max(||r||, eps), ||r||) over the channels of (N, C, P)."""
    norm = np.sqrt((r * r).sum(axis=1, keepdims=True))
    return r / np.maximum(norm, NORMALIZE_EPS), norm


def _normalize_backward(u: np.ndarray, norm: np.ndarray, du: np.ndarray) -> np.ndarray:
    big = norm > NORMALIZE_EPS
    return np.where(big, (du - u * (du * u).sum(axis=1, keepdims=True)) / np.where(big, norm, 1.0),
                    du / NORMALIZE_EPS)


def additive_forward(p: dict, x: np.ndarray) -> tuple[np.ndarray, Saved]:
    """proj(G * k^) + q^ of stacked (N, 2C, H, W) q and k; keeps the input and proj's input z."""
    r = x.reshape(x.shape[0], x.shape[1], -1)
    c = r.shape[1] // 2
    q, nq = _normalize(r[:, :c])
    k, nk = _normalize(r[:, c:])
    g = q.sum(axis=-1, keepdims=True)  # (N, C, 1): every weight softmax(q^ w_g / sqrt(C)) over a size-1 axis is 1
    z = g * k
    y = np.einsum("oc,ncp->nop", p["proj_weight"], z) + p["proj_bias"][None, :, None] + q  # (C, C) @ (N, C, P)
    return y.reshape(x.shape[0], c, *x.shape[2:]), Saved(floats=(x, z), extra=(nq, nk))


def additive_backward(p: dict, saved: Saved, dy: np.ndarray) -> tuple[np.ndarray, dict]:
    """(dx, grads) of the forward above (module docstring)."""
    x, z = saved.floats
    nq, nk = saved.extra
    r, d = x.reshape(x.shape[0], x.shape[1], -1), dy.reshape(dy.shape[0], dy.shape[1], -1)
    c = r.shape[1] // 2
    q, k = r[:, :c] / np.maximum(nq, NORMALIZE_EPS), r[:, c:] / np.maximum(nk, NORMALIZE_EPS)
    g = q.sum(axis=-1, keepdims=True)
    dz = np.einsum("oc,nop->ncp", p["proj_weight"], d)  # (C, C).T @ (N, C, P)
    dq = d + (dz * k).sum(axis=-1, keepdims=True)
    dk = dz * g
    dx = np.concatenate([_normalize_backward(q, nq, dq), _normalize_backward(k, nk, dk)], axis=1)
    grads = {"w_g": np.zeros_like(p["w_g"]), "proj_weight": np.einsum("nop,ncp->oc", d, z),
             "proj_bias": d.sum(axis=(0, 2))}
    return dx.reshape(x.shape), grads
