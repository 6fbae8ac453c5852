"""LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the last dimension.

The weight is optional (OLMo's non-parametric LayerNorm, Llama 4's L2 q/k norm). A norm whose
features are split over tensor-parallel ranks (OLMo-2's q/k norm over all heads) passes `reduce`,
which sums per-rank partial statistics over the ranks, and `width`, the full feature count; each
rank then normalises its own features with the statistics of the whole vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

NormKind = Literal["layernorm", "rmsnorm"]
Reduce = Callable[[np.ndarray, str], np.ndarray]
"""Sums an array over the ranks that hold the other features (identity on one device)."""


@dataclass(frozen=True)
class NormCache:
    """What the backward pass needs: normalised input and 1/std (or 1/rms)."""

    x_hat: np.ndarray
    inv_std: np.ndarray
    kind: NormKind
    width: int
    """Features of the whole normalised vector (this rank's, unless the norm is sharded)."""


def _mean(x: np.ndarray, width: int, reduce: Reduce | None, label: str) -> np.ndarray:
    """Mean over the last dim of the whole (possibly sharded) vector; x may stack statistics."""
    total = x.sum(axis=-1, keepdims=True)
    return (total if reduce is None else reduce(total, label)) / width


def norm_forward(
    kind: NormKind, x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float,
    reduce: Reduce | None = None, width: int | None = None, label: str = "norm",
) -> tuple[np.ndarray, NormCache]:
    """y = x_hat * weight (+ bias); x_hat = (x - mean)/std (LayerNorm) or x/rms (RMSNorm)."""
    width = x.shape[-1] if width is None else width
    if kind == "layernorm" and reduce is None:
        centred = x - x.mean(axis=-1, keepdims=True)
        inv_std = 1.0 / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)
        x_hat = centred * inv_std
    elif kind == "layernorm":  # one reduction of both moments: E[x], E[x^2]
        stats = _mean(np.stack([x, x * x]), width, reduce, f"{label}/stats")  # (2, ..., 1)
        inv_std = 1.0 / np.sqrt(stats[1] - stats[0] ** 2 + eps)
        x_hat = (x - stats[0]) * inv_std
    else:
        inv_std = 1.0 / np.sqrt(_mean(x * x, width, reduce, f"{label}/stats") + eps)
        x_hat = x * inv_std
    y = x_hat if weight is None else x_hat * weight
    if bias is not None:
        y = y + bias
    return y, NormCache(x_hat, inv_std, kind, width)


def norm_backward(
    cache: NormCache, weight: np.ndarray | None, dy: np.ndarray, has_bias: bool, reduce: Reduce | None = None,
    label: str = "norm",
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(dx, dweight, dbias); dweight is None for a weight-free norm."""
    features = dy.shape[-1]
    dweight = None if weight is None else (dy * cache.x_hat).reshape(-1, features).sum(axis=0)
    dbias = dy.reshape(-1, features).sum(axis=0) if has_bias else None
    dx_hat = dy if weight is None else dy * weight
    if cache.kind == "layernorm" and reduce is None:
        # d/dx of (x - mu)/sigma: remove the mean and the component along x_hat
        proj = (dx_hat * cache.x_hat).mean(axis=-1, keepdims=True)
        dx = (dx_hat - dx_hat.mean(axis=-1, keepdims=True) - cache.x_hat * proj) * cache.inv_std
    elif cache.kind == "layernorm":
        stats = _mean(np.stack([dx_hat, dx_hat * cache.x_hat]), cache.width, reduce, f"{label}/grad-stats")
        dx = (dx_hat - stats[0] - cache.x_hat * stats[1]) * cache.inv_std
    else:
        proj = _mean(dx_hat * cache.x_hat, cache.width, reduce, f"{label}/grad-stats")
        dx = (dx_hat - cache.x_hat * proj) * cache.inv_std
    return dx, dweight, dbias
