"""Mean token cross-entropy over the full vocabulary (the single-device form)."""

from __future__ import annotations

import numpy as np


def cross_entropy_forward(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean over tokens of logsumexp(z) - z[label]; returns (loss, softmax probabilities)."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(shifted)
    total = probs.sum(axis=-1, keepdims=True)
    probs /= total
    target = np.take_along_axis(shifted, labels[..., None], axis=-1)[..., 0]
    loss = float(np.mean(np.log(total[..., 0]) - target))
    return loss, probs


def cross_entropy_backward(probs: np.ndarray, labels: np.ndarray, dloss: float) -> np.ndarray:
    """dlogits = (softmax - onehot(label)) * dloss / tokens."""
    dlogits = probs.copy()
    np.put_along_axis(dlogits, labels[..., None], np.take_along_axis(dlogits, labels[..., None], -1) - 1.0, -1)
    return dlogits * (dloss / labels.size)
