"""LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the last dimension."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

NormKind = Literal["layernorm", "rmsnorm"]


@dataclass(frozen=True)
class NormCache:
    """What the backward pass needs: normalised input and 1/std (or 1/rms)."""

    x_hat: np.ndarray
    inv_std: np.ndarray
    kind: NormKind


def norm_forward(
    kind: NormKind, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, eps: float
) -> tuple[np.ndarray, NormCache]:
    """y = x_hat * weight (+ bias); x_hat = (x - mean)/std (LayerNorm) or x/rms (RMSNorm)."""
    if kind == "layernorm":
        centred = x - x.mean(axis=-1, keepdims=True)
        inv_std = 1.0 / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)
        x_hat = centred * inv_std
    else:
        inv_std = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
        x_hat = x * inv_std
    y = x_hat * weight
    if bias is not None:
        y = y + bias
    return y, NormCache(x_hat, inv_std, kind)


def norm_backward(
    cache: NormCache, weight: np.ndarray, dy: np.ndarray, has_bias: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(dx, dweight, dbias)."""
    features = dy.shape[-1]
    dweight = (dy * cache.x_hat).reshape(-1, features).sum(axis=0)
    dbias = dy.reshape(-1, features).sum(axis=0) if has_bias else None
    dx_hat = dy * weight
    proj = (dx_hat * cache.x_hat).mean(axis=-1, keepdims=True)
    if cache.kind == "layernorm":
        # d/dx of (x - mu)/sigma: remove the mean and the component along x_hat
        dx = (dx_hat - dx_hat.mean(axis=-1, keepdims=True) - cache.x_hat * proj) * cache.inv_std
    else:
        dx = (dx_hat - cache.x_hat * proj) * cache.inv_std
    return dx, dweight, dbias
