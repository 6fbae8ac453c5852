"""The attention combine of a residual block (`specs.network.Attend`; PVT's spatial-reduction
attention, Wang et al. 2021 sec. 3.3) in numpy, forward and backward, batched (N, C, *positions).

Forward per head h: s = q_h^T k_h / sqrt(d), p = softmax(s) over the keys, out_h = p v_h^T.
Backward (the softmax Jacobian, Bridle 1990): dp = do v_h, ds = p * (dp - sum(dp * p)),
dq_h = ds k_h / sqrt(d), dk_h = ds^T q_h / sqrt(d), dv_h = p^T do. With `patch` > 1 the positions
at each offset of the patch x patch patches form their own batch row (MobileViT's unfolding).
"""

from __future__ import annotations

import numpy as np


def _heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(N, heads x d, *pos) -> (N, heads, pos, d)."""
    n, c = x.shape[:2]
    return x.reshape(n, heads, c // heads, -1).transpose(0, 1, 3, 2)


def _merge(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """(N, heads, pos, d) -> (N, heads x d, *pos) of `shape`."""
    return x.transpose(0, 1, 3, 2).reshape(shape)


def unfold(x: np.ndarray, patch: int) -> np.ndarray:
    """(N, C, H, W) -> (N p^2, C, H / p, W / p): the positions at each patch offset as one row."""
    n, c, h, w = x.shape
    x = x.reshape(n, c, h // patch, patch, w // patch, patch).transpose(0, 3, 5, 1, 2, 4)
    return x.reshape(n * patch * patch, c, h // patch, w // patch)


def fold(x: np.ndarray, patch: int) -> np.ndarray:
    """The inverse of `unfold`."""
    rows, c, h, w = x.shape
    n = rows // (patch * patch)
    x = x.reshape(n, patch, patch, c, h, w).transpose(0, 3, 4, 1, 5, 2)
    return x.reshape(n, c, h * patch, w * patch)


def attend_forward(q: np.ndarray, kv: np.ndarray, heads: int, patch: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(output like q, probabilities (N p^2, heads, P, M)) of q (N, C, *P) over kv (N, 2C, *M)."""
    if patch > 1:
        out, probs = attend_forward(unfold(q, patch), unfold(kv, patch), heads)
        return fold(out, patch), probs
    c = q.shape[1]
    qh, kh, vh = _heads(q, heads), _heads(kv[:, :c], heads), _heads(kv[:, c:], heads)
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(c // heads)  # (N, h, P, d) @ (N, h, d, M)
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    return _merge(probs @ vh, q.shape), probs  # (N, h, P, M) @ (N, h, M, d)


def attend_backward(dy: np.ndarray, q: np.ndarray, kv: np.ndarray, probs: np.ndarray,
                    heads: int, patch: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(dq, dkv) of the forward above, given the output gradient dy (N, C, *P)."""
    if patch > 1:
        dq, dkv = attend_backward(unfold(dy, patch), unfold(q, patch), unfold(kv, patch), probs, heads)
        return fold(dq, patch), fold(dkv, patch)
    c = q.shape[1]
    scale = 1.0 / np.sqrt(c // heads)
    qh, kh, vh, do = _heads(q, heads), _heads(kv[:, :c], heads), _heads(kv[:, c:], heads), _heads(dy, heads)
    dp = do @ vh.transpose(0, 1, 3, 2)  # (N, h, P, d) @ (N, h, d, M)
    ds = probs * (dp - (dp * probs).sum(axis=-1, keepdims=True))
    dq = ds @ kh * scale  # (N, h, P, M) @ (N, h, M, d)
    dk = ds.transpose(0, 1, 3, 2) @ qh * scale  # (N, h, M, P) @ (N, h, P, d)
    dv = probs.transpose(0, 1, 3, 2) @ do  # (N, h, M, P) @ (N, h, P, d)
    half = (kv.shape[0], c, *kv.shape[2:])
    return _merge(dq, q.shape), np.concatenate([_merge(dk, half), _merge(dv, half)], axis=1)
