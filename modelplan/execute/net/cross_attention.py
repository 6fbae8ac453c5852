"""The attention combine of a residual block (`specs.layers.Attend`; PVT's spatial-reduction
attention, Wang et al. 2021 sec. 3.3) in numpy, forward and backward, batched (N, C, *positions).

Forward per head h: s = q_h^T k_h / sqrt(d) + B_h (CvT: another factor than 1 / sqrt(d)), p = softmax(s) over the keys, out_h = p v_h^T
(k the first C channels of kv, v the rest; B LeViT's bias table gathered by `index`, else 0).
Backward (the softmax Jacobian, Bridle 1990): dp = do v_h, ds = p * (dp - sum(dp * p)),
dq_h = ds k_h / sqrt(d), dk_h = ds^T q_h / sqrt(d), dv_h = p^T do, dB = ds summed into the table. With `patch` > 1 the positions
at each offset of the patch x patch patches form their own batch row (MobileViT's unfolding); with
`window` each block of the keys' grid and the queries' block at its place (Hiera's mask units).
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


def _out_shape(q: np.ndarray, kv: np.ndarray, positions: np.ndarray) -> tuple[int, ...]:
    """(N, C_v, *P): the values' channels on the queries' positions."""
    return (q.shape[0], kv.shape[1] - q.shape[1], *positions.shape[2:])


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


def blocks(x: np.ndarray, nh: int, nw: int) -> np.ndarray:
    """(N, C, H, W) -> (N nh nw, C, H / nh, W / nw): each block of the nh x nw grid of blocks as one row."""
    n, c, h, w = x.shape
    x = x.reshape(n, c, nh, h // nh, nw, w // nw).transpose(0, 2, 4, 1, 3, 5)
    return x.reshape(n * nh * nw, c, h // nh, w // nw)


def unblocks(x: np.ndarray, nh: int, nw: int) -> np.ndarray:
    """The inverse of `blocks`."""
    rows, c, h, w = x.shape
    x = x.reshape(rows // (nh * nw), nh, nw, c, h, w).transpose(0, 3, 1, 4, 2, 5)
    return x.reshape(rows // (nh * nw), c, nh * h, nw * w)


def attend_forward(q: np.ndarray, kv: np.ndarray, heads: int, patch: int = 1, table: np.ndarray | None = None,
                   index: np.ndarray | None = None, scale: float | None = None, window: int = 0
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(output (N, C_v, *P), probabilities (N p^2, heads, P, M)) of q (N, C, *P) over kv (N, C + C_v, *M);
    `table` (heads, offsets) gathered by `index` (P, M) is added to the scores; `window`: within the
    keys' window x window blocks (Hiera's mask units)."""
    if window:
        nh, nw = kv.shape[2] // window, kv.shape[3] // window
        out, probs = attend_forward(blocks(q, nh, nw), blocks(kv, nh, nw), heads, scale=scale)
        return unblocks(out, nh, nw), probs
    if patch > 1:
        out, probs = attend_forward(unfold(q, patch), unfold(kv, patch), heads, scale=scale)
        return fold(out, patch), probs
    c = q.shape[1]
    qh, kh, vh = _heads(q, heads), _heads(kv[:, :c], heads), _heads(kv[:, c:], heads)
    scores = qh @ kh.transpose(0, 1, 3, 2) * (scale or 1.0 / np.sqrt(c // heads))  # (N, h, P, d) @ (N, h, d, M)
    if table is not None:
        scores = scores + table[:, index]  # (h, P, M) over the batch
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    return _merge(probs @ vh, _out_shape(q, kv, q)), probs  # (N, h, P, M) @ (N, h, M, d_v)


def attend_backward(dy: np.ndarray, q: np.ndarray, kv: np.ndarray, probs: np.ndarray, heads: int, patch: int = 1,
                    table: np.ndarray | None = None, index: np.ndarray | None = None, scale: float | None = None,
                    window: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(dq, dkv, d table or None) of the forward above, given the output gradient dy (N, C_v, *P)."""
    if window:
        nh, nw = kv.shape[2] // window, kv.shape[3] // window
        dq, dkv, _ = attend_backward(blocks(dy, nh, nw), blocks(q, nh, nw), blocks(kv, nh, nw), probs, heads,
                                     scale=scale)
        return unblocks(dq, nh, nw), unblocks(dkv, nh, nw), None
    if patch > 1:
        dq, dkv, _ = attend_backward(unfold(dy, patch), unfold(q, patch), unfold(kv, patch), probs, heads, scale=scale)
        return fold(dq, patch), fold(dkv, patch), None
    c = q.shape[1]
    scale = scale or 1.0 / np.sqrt(c // heads)
    qh, kh, vh, do = _heads(q, heads), _heads(kv[:, :c], heads), _heads(kv[:, c:], heads), _heads(dy, heads)
    dp = do @ vh.transpose(0, 1, 3, 2)  # (N, h, P, d) @ (N, h, d, M)
    ds = probs * (dp - (dp * probs).sum(axis=-1, keepdims=True))
    dq = ds @ kh * scale  # (N, h, P, M) @ (N, h, M, d)
    dk = ds.transpose(0, 1, 3, 2) @ qh * scale  # (N, h, M, P) @ (N, h, P, d)
    dv = probs.transpose(0, 1, 3, 2) @ do  # (N, h, M, P) @ (N, h, P, d_v)
    keys = (kv.shape[0], c, *kv.shape[2:])
    values = (kv.shape[0], kv.shape[1] - c, *kv.shape[2:])
    dtable = None
    if table is not None:
        dtable = np.zeros_like(table)
        np.add.at(dtable, (slice(None), index), ds.sum(axis=0))  # each score's gradient into its offset's entry
    return _merge(dq, q.shape), np.concatenate([_merge(dk, keys), _merge(dv, values)], axis=1), dtable
