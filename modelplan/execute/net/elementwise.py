"""Element-wise layers: activations, softmax and dropout, each keeping what torch keeps.

ReLU and ReLU6 keep a bool mask; GELU, SiLU, Hardswish and Hardsigmoid their input; tanh, sigmoid and softmax their output
(d tanh = 1 - y^2, d sigmoid = y(1 - y)); dropout its bool keep-mask (inverted dropout:
kept elements are scaled by 1/(1 - p), torch's convention).
"""

from __future__ import annotations

import numpy as np

from modelplan.execute.layers.activations import activation_backward, activation_forward
from modelplan.execute.net.saved import Saved


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x), evaluated without overflow for large |x|."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def act_forward(kind: str, x: np.ndarray) -> tuple[np.ndarray, Saved]:
    """phi(x) for relu, relu6, gelu, silu, tanh, sigmoid."""
    if kind == "tanh":
        y = np.tanh(x)
        return y, Saved(floats=(y,))
    if kind == "sigmoid":
        y = sigmoid(x)
        return y, Saved(floats=(y,))
    if kind == "relu":
        mask = x > 0
        return x * mask, Saved(fixed=(mask,))
    if kind == "relu6":  # min(max(x, 0), 6); the gradient flows where 0 < x < 6 (torch hardtanh_backward)
        mask = (x > 0) & (x < 6)
        return np.clip(x, 0.0, 6.0), Saved(fixed=(mask,))
    if kind == "hardswish":  # x * relu6(x + 3) / 6 (MobileNetV3 eq. 2); keeps its input, as torch does
        return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0, Saved(floats=(x,))
    if kind == "hardsigmoid":  # relu6(x + 3) / 6; keeps its input, as torch does
        return np.clip(x + 3.0, 0.0, 6.0) / 6.0, Saved(floats=(x,))
    return activation_forward(kind, x), Saved(floats=(x,))


def act_backward(kind: str, saved: Saved, dy: np.ndarray) -> np.ndarray:
    """dy * phi'(x)."""
    if kind == "tanh":
        (y,) = saved.floats
        return dy * (1.0 - y * y)
    if kind == "sigmoid":
        (y,) = saved.floats
        return dy * y * (1.0 - y)
    if kind in ("relu", "relu6"):
        (mask,) = saved.fixed
        return dy * mask
    (x,) = saved.floats
    if kind == "hardswish":  # 0 below -3, 1 above 3, (2x + 3) / 6 between (torch hardswish_backward)
        return dy * np.where(x < -3.0, 0.0, np.where(x > 3.0, 1.0, (2.0 * x + 3.0) / 6.0))
    if kind == "hardsigmoid":  # 1 / 6 strictly inside (-3, 3) (torch hardsigmoid_backward)
        return dy * ((x > -3.0) & (x < 3.0)) / 6.0
    return activation_backward(kind, x, dy)


def softmax_forward(x: np.ndarray, axis: int) -> tuple[np.ndarray, Saved]:
    """exp(x - max) / sum along `axis`; keeps the output."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    y = e / e.sum(axis=axis, keepdims=True)
    return y, Saved(floats=(y,), extra=axis)


def softmax_backward(saved: Saved, dy: np.ndarray) -> np.ndarray:
    """y * (dy - sum(dy * y)) along the softmax axis."""
    (y,) = saved.floats
    return y * (dy - (dy * y).sum(axis=saved.extra, keepdims=True))


def dropout_forward(x: np.ndarray, keep: np.ndarray, p: float) -> tuple[np.ndarray, Saved]:
    """x * keep / (1 - p); keeps the mask."""
    return x * keep / (1.0 - p), Saved(fixed=(keep,), extra=p)


def dropout_backward(saved: Saved, dy: np.ndarray) -> np.ndarray:
    """dy * keep / (1 - p)."""
    (keep,) = saved.fixed
    return dy * keep / (1.0 - saved.extra)
