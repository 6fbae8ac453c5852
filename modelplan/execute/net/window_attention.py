"""Shifted-window attention and space-to-depth on (N, C, H, W) maps, forward and backward
(`specs.layers.WindowAttention`, `SpaceToDepth`; Swin Transformer, Liu et al. 2021 sec. 3.2, as
transformers modeling_swin.py computes it: pad, cyclic shift, window partition, scores with the
relative position bias and the shift mask, softmax, values, window reverse, shift back, crop).

Forward keeps the q / k / v input and the softmax probabilities (eager attention); backward
recomputes the windows of q / k / v from the input.
"""

from __future__ import annotations

import numpy as np

from modelplan.execute.net.saved import Saved
from modelplan.specs.layers import WindowAttention

MASKED = -100.0  # SwinLayer.get_attn_mask's fill for pairs the shift joined from different regions


def relative_index(w: int) -> np.ndarray:
    """(w^2, w^2) rows of the bias table each (query, key) pair reads (SwinRelativePositionBias)."""
    coords = np.stack(np.meshgrid(np.arange(w), np.arange(w), indexing="ij")).reshape(2, -1)  # (2, w^2)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0) + (w - 1)  # (w^2, w^2, 2)
    return rel[..., 0] * (2 * w - 1) + rel[..., 1]


def _windows(t: np.ndarray, w: int, shift: int) -> np.ndarray:
    """(N, C, Hp, Wp) -> (N, windows, w^2, C), rolled up-left by `shift` first."""
    if shift:
        t = np.roll(t, (-shift, -shift), axis=(2, 3))
    n, c, hp, wp = t.shape
    t = t.reshape(n, c, hp // w, w, wp // w, w).transpose(0, 2, 4, 3, 5, 1)  # (N, Hp/w, Wp/w, w, w, C)
    return t.reshape(n, (hp // w) * (wp // w), w * w, c)


def _unwindows(t: np.ndarray, w: int, shift: int, hp: int, wp: int) -> np.ndarray:
    """The inverse of `_windows`: (N, windows, w^2, C) -> (N, C, Hp, Wp)."""
    n, _, _, c = t.shape
    t = t.reshape(n, hp // w, wp // w, w, w, c).transpose(0, 5, 1, 3, 2, 4).reshape(n, c, hp, wp)
    return np.roll(t, (shift, shift), axis=(2, 3)) if shift else t


def shift_mask(w: int, shift: int, hp: int, wp: int) -> np.ndarray:
    """(windows, w^2, w^2) additive mask: MASKED where query and key come from different regions
    of the shifted grid (3 per axis: [0, H - w), [H - w, H - shift), [H - shift, H))."""
    rows = (np.arange(hp) >= hp - w).astype(int) + (np.arange(hp) >= hp - shift)
    cols = (np.arange(wp) >= wp - w).astype(int) + (np.arange(wp) >= wp - shift)
    label = (rows[:, None] * 3 + cols[None, :]).astype(float)[None, None]  # (1, 1, Hp, Wp)
    windows = _windows(label, w, 0)[0, :, :, 0]  # (windows, w^2)
    return np.where(windows[:, None, :] != windows[:, :, None], MASKED, 0.0)


def _heads(t: np.ndarray, heads: int) -> np.ndarray:
    """(N, windows, T, C) -> (N, windows, heads, T, d)."""
    n, nw, tokens, c = t.shape
    return t.reshape(n, nw, tokens, heads, c // heads).transpose(0, 1, 3, 2, 4)


def _merge(t: np.ndarray) -> np.ndarray:
    """(N, windows, heads, T, d) -> (N, windows, T, heads d)."""
    n, nw, heads, tokens, d = t.shape
    return t.transpose(0, 1, 3, 2, 4).reshape(n, nw, tokens, heads * d)


def _pad(x: np.ndarray, hp: int, wp: int) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, 0), (0, hp - x.shape[2]), (0, wp - x.shape[3])))


MAX_LOGIT = np.log(100.0)  # Swinv2SelfAttention: torch.clamp(logit_scale, max=log(1 / 0.01))
NORM_EPS = 1e-12  # F.normalize's eps


def log_coordinates(w: int, pretrained: int) -> np.ndarray:
    """((2 w - 1)^2, 2) relative coordinates, normalised to [-8, 8] and log-spaced
    (Swinv2SelfAttention.create_coords_table_and_index)."""
    rel = np.arange(-(w - 1), w, dtype=float)
    table = np.stack(np.meshgrid(rel, rel, indexing="ij"), axis=-1).reshape(-1, 2)
    if pretrained > 0:
        table = table / (pretrained - 1)
    elif w > 1:
        table = table / (w - 1)
    table = table * 8
    return np.sign(table) * np.log2(np.abs(table) + 1.0) / np.log2(8)


def _qkv(layer: WindowAttention, p: dict, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """q, k, v as (N, windows, heads, T, d) of the padded, shifted grid (q and v biased with qv_bias)."""
    w = layer.window_size
    hp, wp = -(-x.shape[2] // w) * w, -(-x.shape[3] // w) * w
    q, k, v = np.split(x, 3, axis=1)
    if layer.qv_bias:
        q, v = q + p["q_bias"][None, :, None, None], v + p["v_bias"][None, :, None, None]
    return tuple(_heads(_windows(_pad(t, hp, wp), w, layer.shift), layer.heads) for t in (q, k, v))


def _table(layer: WindowAttention, p: dict) -> tuple[np.ndarray, tuple | None]:
    """((2 w - 1)^2, heads) bias table, and the continuous bias MLP's intermediates (or None)."""
    if not layer.bias_mlp:
        return p["relative_position_bias_table"], None
    coords = log_coordinates(layer.window_size, layer.pretrained_window)
    pre = coords @ p["cpb_fc1_weight"].T + p["cpb_fc1_bias"]  # (R, 2) @ (2, m)
    hidden = np.maximum(pre, 0.0)
    sig = 1.0 / (1.0 + np.exp(-(hidden @ p["cpb_fc2_weight"].T)))  # (R, m) @ (m, heads)
    return 16.0 * sig, (coords, pre, hidden, sig)


def _bias(layer: WindowAttention, p: dict, hp: int, wp: int) -> np.ndarray:
    """Relative bias (heads, T, T) plus the shift mask (windows, 1, T, T), broadcastable to the scores."""
    w, out = layer.window_size, 0.0
    if layer.relative_bias:
        out = _table(layer, p)[0][relative_index(w)].transpose(2, 0, 1)  # (heads, T, T)
    if layer.shift:
        out = out + shift_mask(w, layer.shift, hp, wp)[:, None]
    return out


def _scores(layer: WindowAttention, p: dict, q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, ...]:
    """(q k^T scaled, the q and k it multiplied, their norms, the scale): 1 / sqrt(d), or Swin V2's
    cosine with exp(min(logit_scale, log 100)) per head."""
    if not layer.cosine:
        scale = q.shape[-1] ** -0.5
        return q @ k.swapaxes(-1, -2) * scale, q, k, None, None, scale  # (.., T, d) @ (.., d, T)
    nq = np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), NORM_EPS)
    nk = np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), NORM_EPS)
    scale = np.exp(np.minimum(p["logit_scale"], MAX_LOGIT))  # (heads, 1, 1)
    qn, kn = q / nq, k / nk
    return qn @ kn.swapaxes(-1, -2) * scale, qn, kn, nq, nk, scale


def window_attention_forward(layer: WindowAttention, p: dict, x: np.ndarray) -> tuple[np.ndarray, Saved]:
    """(N, 3C, H, W) stacked q, k, v -> (N, C, H, W)."""
    n, _, h, width = x.shape
    w = layer.window_size
    hp, wp = -(-h // w) * w, -(-width // w) * w
    q, k, v = _qkv(layer, p, x)
    s = _scores(layer, p, q, k)[0] + _bias(layer, p, hp, wp)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    probs = s / s.sum(axis=-1, keepdims=True)
    out = _unwindows(_merge(probs @ v), w, layer.shift, hp, wp)  # (N, nW, h, T, T) @ (N, nW, h, T, d)
    return out[:, :, :h, :width], Saved(floats=(x, probs))


def window_attention_backward(layer: WindowAttention, p: dict, saved: Saved, dy: np.ndarray
                              ) -> tuple[np.ndarray, dict]:
    """(dx, grads): softmax backward dS = P (dP - sum(dP P)), dq = dS k / sqrt(d), dk = dS^T q / sqrt(d)."""
    x, probs = saved.floats
    w, h, width = layer.window_size, x.shape[2], x.shape[3]
    hp, wp = -(-h // w) * w, -(-width // w) * w
    q, k, v = _qkv(layer, p, x)
    _, qs, ks, nq, nk, scale = _scores(layer, p, q, k)
    do = _heads(_windows(_pad(dy, hp, wp), w, layer.shift), layer.heads)
    dv = probs.swapaxes(-1, -2) @ do  # (.., T, T).T @ (.., T, d)
    dp = do @ v.swapaxes(-1, -2)  # (.., T, d) @ (.., d, T)
    ds = probs * (dp - (dp * probs).sum(axis=-1, keepdims=True))
    dq, dk = ds @ ks * scale, ds.swapaxes(-1, -2) @ qs * scale
    grads = {}
    if layer.cosine:  # d logit_scale = scale * sum(dS * cos) where unclamped; d(q / |q|) -> dq
        cos = qs @ ks.swapaxes(-1, -2)
        per_head = (ds * cos).sum(axis=(0, 1, 3, 4)).reshape(-1, 1, 1)
        grads["logit_scale"] = per_head * scale * (p["logit_scale"] < MAX_LOGIT)
        dq = (dq - qs * (dq * qs).sum(axis=-1, keepdims=True)) / nq
        dk = (dk - ks * (dk * ks).sum(axis=-1, keepdims=True)) / nk
    if layer.relative_bias:
        table, mlp = _table(layer, p)
        per_pair = ds.sum(axis=(0, 1)).transpose(1, 2, 0).reshape(-1, table.shape[1])  # (T^2, heads)
        dtable = np.zeros_like(table)
        np.add.at(dtable, relative_index(w).reshape(-1), per_pair)
        if mlp is None:
            grads["relative_position_bias_table"] = dtable
        else:  # back through 16 sigmoid(hidden @ W2^T), ReLU, coords @ W1^T + b1
            coords, pre, hidden, sig = mlp
            dm = dtable * 16.0 * sig * (1.0 - sig)  # (R, heads)
            dhidden = dm @ p["cpb_fc2_weight"] * (pre > 0)  # (R, heads) @ (heads, m)
            grads.update(cpb_fc2_weight=dm.T @ hidden, cpb_fc1_weight=dhidden.T @ coords,
                         cpb_fc1_bias=dhidden.sum(axis=0))
    parts = [_unwindows(_merge(t), w, layer.shift, hp, wp)[:, :, :h, :width] for t in (dq, dk, dv)]
    if layer.qv_bias:
        grads.update(q_bias=parts[0].sum(axis=(0, 2, 3)), v_bias=parts[2].sum(axis=(0, 2, 3)))
    return np.concatenate(parts, axis=1), grads


def space_to_depth_forward(block: int, x: np.ndarray) -> tuple[np.ndarray, Saved]:
    """(N, C, H, W) -> (N, C b^2, ceil(H / b), ceil(W / b)), channel c b^2 + i b + j (nn.PixelUnshuffle)."""
    n, c, h, w = x.shape
    hp, wp = -(-h // block) * block, -(-w // block) * block
    t = _pad(x, hp, wp).reshape(n, c, hp // block, block, wp // block, block).transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * block * block, hp // block, wp // block), Saved(extra=(h, w))


def space_to_depth_backward(block: int, saved: Saved, dy: np.ndarray) -> np.ndarray:
    """The inverse gather, the padding cropped off."""
    h, w = saved.extra
    n, cb, hb, wb = dy.shape
    c = cb // (block * block)
    t = dy.reshape(n, c, block, block, hb, wb).transpose(0, 1, 4, 2, 5, 3).reshape(n, c, hb * block, wb * block)
    return t[:, :, :h, :w]
