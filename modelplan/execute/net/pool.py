"""Max / average pooling (`nn.MaxPool2d`, `nn.AvgPool2d`) and `nn.AdaptiveAvgPool2d`.

1-d pooling runs as 2-d of height 1. Windows follow torch: output i starts at i*s - p; with
ceil_mode the last window may run past the padded input (torch keeps it when it starts inside).
MaxPool keeps int64 argmax indices per output element (torch's max_pool2d_with_indices); ties go
to the first maximum in window order. AvgPool divides by the window clipped to the padded input
(torch's default count_include_pad=True). Adaptive windows are [floor(i*L/o), ceil((i+1)*L/o)).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from modelplan.execute.net.saved import Saved

Pair = tuple[int, int]


def _pads(size: Pair, kernel: Pair, stride: Pair, pad: Pair, out: Pair) -> tuple[Pair, Pair]:
    """Padding after each axis so that every window (ceil_mode overhang too) is in bounds."""
    hi = tuple(max(p, (o - 1) * s + k - n - p) for n, k, s, p, o in zip(size, kernel, stride, pad, out))
    return pad, hi


def _windows(xp: np.ndarray, kernel: Pair, stride: Pair, out: Pair) -> np.ndarray:
    """(kh*kw, N, C, Ho, Wo): element (a, b) of every window, window-order major."""
    (kh, kw), (sh, sw), (ho, wo) = kernel, stride, out
    return np.stack([
        xp[:, :, a : a + sh * ho : sh, b : b + sw * wo : sw] for a in range(kh) for b in range(kw)
    ])


def _divisor(size: Pair, kernel: Pair, stride: Pair, pad: Pair, out: Pair) -> np.ndarray:
    """(Ho, Wo) window sizes clipped to the padded input: torch's pool_size."""
    per_axis = []
    for n, k, s, p, o in zip(size, kernel, stride, pad, out):
        start = np.arange(o) * s - p
        per_axis.append(np.minimum(start + k, n + p) - start)
    return np.outer(per_axis[0], per_axis[1]).astype(float)


def pool2d_forward(op: Literal["max", "avg"], x: np.ndarray, kernel: Pair, stride: Pair, pad: Pair,
                   out: Pair) -> tuple[np.ndarray, Saved]:
    """y (N, C, Ho, Wo) of x (N, C, H, W); `out` is the spec's output size."""
    size = x.shape[2:]
    lo, hi = _pads(size, kernel, stride, pad, out)
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (lo[0], hi[0]), (lo[1], hi[1])), constant_values=fill)
    win = _windows(xp, kernel, stride, out)  # (kh*kw, N, C, Ho, Wo)
    if op == "max":
        arg = win.argmax(axis=0).astype(np.int64)  # (N, C, Ho, Wo)
        y = np.take_along_axis(win, arg[None], axis=0)[0]
        return y, Saved(fixed=(arg,), extra=(x.shape, xp.shape))
    y = win.sum(axis=0) / _divisor(size, kernel, stride, pad, out)
    return y, Saved(extra=(x.shape, xp.shape))


def pool2d_backward(op: Literal["max", "avg"], saved: Saved, dy: np.ndarray, kernel: Pair,
                    stride: Pair, pad: Pair) -> np.ndarray:
    """dx of pool2d_forward."""
    x_shape, xp_shape = saved.extra
    size, out = x_shape[2:], dy.shape[2:]
    (kh, kw), (sh, sw), (ho, wo) = kernel, stride, out
    if op == "avg":
        dy = dy / _divisor(size, kernel, stride, pad, out)
    else:
        (arg,) = saved.fixed
    dxp = np.zeros(xp_shape)
    for a in range(kh):
        for b in range(kw):
            share = dy * (arg == a * kw + b) if op == "max" else dy
            dxp[:, :, a : a + sh * ho : sh, b : b + sw * wo : sw] += share
    return dxp[:, :, pad[0] : pad[0] + size[0], pad[1] : pad[1] + size[1]]


def _bounds(size: int, out: int) -> list[tuple[int, int]]:
    """Adaptive windows [floor(i*L/o), ceil((i+1)*L/o)) (ATen AdaptiveAveragePooling)."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def adaptive_avg_forward(x: np.ndarray, out: Pair) -> tuple[np.ndarray, Saved]:
    """y (N, C, oh, ow): the mean of each adaptive window; keeps only the input shape."""
    y = np.empty(x.shape[:2] + tuple(out))
    for i, (h0, h1) in enumerate(_bounds(x.shape[2], out[0])):
        for j, (w0, w1) in enumerate(_bounds(x.shape[3], out[1])):
            y[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return y, Saved(extra=x.shape)


def adaptive_avg_backward(saved: Saved, dy: np.ndarray) -> np.ndarray:
    """dx: each output's gradient spread evenly over its window."""
    x_shape = saved.extra
    dx = np.zeros(x_shape)
    for i, (h0, h1) in enumerate(_bounds(x_shape[2], dy.shape[2])):
        for j, (w0, w1) in enumerate(_bounds(x_shape[3], dy.shape[3])):
            area = (h1 - h0) * (w1 - w0)
            dx[:, :, h0:h1, w0:w1] += dy[:, :, i, j][:, :, None, None] / area
    return dx
