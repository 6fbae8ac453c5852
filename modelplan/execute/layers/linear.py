"""Affine map y = x @ w + b with weights stored (in, out)."""

from __future__ import annotations

import numpy as np


def linear_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """y = x @ w (+ b); x is (..., in), w is (in, out)."""
    y = x @ w  # (b, s, in) @ (in, out) -> (b, s, out)
    return y if b is None else y + b


def linear_backward(
    x: np.ndarray, w: np.ndarray, dy: np.ndarray, has_bias: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(dx, dw, db) of y = x @ w + b given dy = dL/dy."""
    x2 = x.reshape(-1, x.shape[-1])
    dy2 = dy.reshape(-1, dy.shape[-1])
    dw = x2.T @ dy2  # (b*s, in).T @ (b*s, out) -> (in, out)
    dx = dy @ w.T  # (b, s, out) @ (out, in) -> (b, s, in)
    db = dy2.sum(axis=0) if has_bias else None
    return dx, dw, db
