"""Mean token cross-entropy over the full vocabulary (the single-device form), and the element-wise
transforms some families apply to the logits first: a scale (Cohere logit_scale, Granite
1 / logits_scaling) then a soft-cap c * tanh(z / c) (Gemma 2 final_logit_softcapping)."""

from __future__ import annotations

import numpy as np


def logits_forward(logits: np.ndarray, scale: float, softcap: float | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(transformed logits, tanh values kept for backward or None)."""
    z = logits if scale == 1.0 else logits * scale
    if softcap is None:
        return z, None
    t = np.tanh(z / softcap)
    return softcap * t, t


def logits_backward(dz: np.ndarray, scale: float, capped: np.ndarray | None) -> np.ndarray:
    """dL/dlogits of logits_forward."""
    if capped is not None:
        dz = dz * (1.0 - capped * capped)  # d/dz c * tanh(z / c)
    return dz if scale == 1.0 else dz * scale


def cross_entropy_forward(logits: np.ndarray, labels: np.ndarray, mask: np.ndarray | None = None
                          ) -> tuple[float, np.ndarray]:
    """Mean over tokens (those where `mask` is true) of logsumexp(z) - z[label]; returns
    (loss, softmax probabilities)."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(shifted)
    total = probs.sum(axis=-1, keepdims=True)
    probs /= total
    target = np.take_along_axis(shifted, labels[..., None], axis=-1)[..., 0]
    per_token = np.log(total[..., 0]) - target
    loss = float(np.mean(per_token)) if mask is None else float((per_token * mask).sum() / mask.sum())
    return loss, probs


def cross_entropy_backward(probs: np.ndarray, labels: np.ndarray, dloss: float, mask: np.ndarray | None = None
                           ) -> np.ndarray:
    """dlogits = (softmax - onehot(label)) * dloss / tokens (masked tokens: 0)."""
    dlogits = probs.copy()
    np.put_along_axis(dlogits, labels[..., None], np.take_along_axis(dlogits, labels[..., None], -1) - 1.0, -1)
    if mask is None:
        return dlogits * (dloss / labels.size)
    return dlogits * (mask[..., None] * (dloss / mask.sum()))
