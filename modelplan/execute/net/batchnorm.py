"""Batch normalisation in training mode (`nn.BatchNorm1d/2d`, Ioffe & Szegedy 2015).

Statistics are over every axis but the channel axis 1, from the batch of this call only: under
data parallelism each replica normalises with its own micro-batch (what `nn.BatchNorm2d` does
under DDP; `nn.SyncBatchNorm` would reduce the statistics over the replicas instead). The
normalisation uses the biased variance; the running variance the unbiased one (torch docs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelplan.execute.net.saved import Saved

MOMENTUM = 0.1  # torch.nn.BatchNorm default


@dataclass(frozen=True)
class BatchStats:
    """Per-channel mean and biased variance of one call, and how many values each covers."""

    mean: np.ndarray
    var: np.ndarray
    count: int


def _axes(x: np.ndarray) -> tuple[int, ...]:
    return (0,) + tuple(range(2, x.ndim))


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """(C,) -> broadcastable against (N, C, ...)."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def batchnorm_forward(x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float
                      ) -> tuple[np.ndarray, Saved, BatchStats]:
    """y = x_hat * weight + bias, x_hat = (x - mean) / sqrt(var + eps) per channel; keeps x and x_hat."""
    axes = _axes(x)
    mean = x.mean(axis=axes)
    var = x.var(axis=axes)  # biased, as the normalisation uses
    inv_std = 1.0 / np.sqrt(var + eps)
    x_hat = (x - _per_channel(mean, x.ndim)) * _per_channel(inv_std, x.ndim)
    y = x_hat if weight is None else x_hat * _per_channel(weight, x.ndim) + _per_channel(bias, x.ndim)
    count = x.size // x.shape[1]
    return y, Saved(floats=(x, x_hat), extra=inv_std), BatchStats(mean, var, count)


def batchnorm_backward(saved: Saved, weight: np.ndarray | None, dy: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(dx, dweight, dbias). dx = inv_std/M * (M*g - sum(g) - x_hat*sum(g*x_hat)), g = dy*weight."""
    _, x_hat = saved.floats
    inv_std = saved.extra
    axes, nd = _axes(dy), dy.ndim
    m = dy.size // dy.shape[1]
    dweight = (dy * x_hat).sum(axis=axes) if weight is not None else None
    dbias = dy.sum(axis=axes) if weight is not None else None
    g = dy if weight is None else dy * _per_channel(weight, nd)
    sum_g = _per_channel(g.sum(axis=axes), nd)
    sum_gx = _per_channel((g * x_hat).sum(axis=axes), nd)
    dx = _per_channel(inv_std, nd) / m * (m * g - sum_g - x_hat * sum_gx)
    return dx, dweight, dbias


def update_running(running_mean: np.ndarray, running_var: np.ndarray, stats: BatchStats
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(1 - momentum) * running + momentum * batch, with the unbiased variance (torch docs)."""
    unbiased = stats.var * stats.count / max(stats.count - 1, 1)
    return ((1 - MOMENTUM) * running_mean + MOMENTUM * stats.mean,
            (1 - MOMENTUM) * running_var + MOMENTUM * unbiased)
