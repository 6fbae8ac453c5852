"""Losses of a network's output: cross-entropy over the last dim, or mean squared error.

Both are means over the batch (torch's reduction='mean'): cross-entropy over every position
that has a label (`nn.CrossEntropyLoss` on (N, classes) or, flattened, (N*seq, vocab)), MSE over
every element (`nn.MSELoss`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from modelplan.execute.layers.loss import cross_entropy_backward, cross_entropy_forward

LossKind = Literal["cross_entropy", "mse"]


def loss_forward(kind: LossKind, y: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """(loss, what backward needs): softmax probabilities, or the residual y - target."""
    if kind == "cross_entropy":
        return cross_entropy_forward(y, target)
    diff = y - target
    return float(np.mean(diff * diff)), diff


def loss_backward(kind: LossKind, cache: np.ndarray, target: np.ndarray, dloss: float) -> np.ndarray:
    """dL/dy, scaled by dloss (the share of this batch in the step's mean)."""
    if kind == "cross_entropy":
        return cross_entropy_backward(cache, target, dloss)
    return cache * (2.0 * dloss / cache.size)  # d mean((y-t)^2) / dy = 2 (y - t) / numel
