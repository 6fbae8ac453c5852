"""Mixture-of-experts pieces: the top-k router and a stack of expert MLPs.

Router (Mixtral; Megatron-core's default): logits = x @ router, keep the top-k logits per token
and softmax over those k to get the combine weights. Experts are stacked along dim 0:
experts/in/weight (E, h, f), experts/gate/weight (E, h, f), experts/out/weight (E, f, h).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from modelplan.execute.layers.activations import Activation
from modelplan.execute.layers.linear import linear_backward, linear_forward
from modelplan.execute.layers.mlp import MLPCache, mlp_backward, mlp_forward


@dataclass(frozen=True)
class RouterCache:
    """Router activations kept for backward."""

    x: np.ndarray  # (T, h)
    experts: np.ndarray  # (T, k) chosen expert ids
    weights: np.ndarray  # (T, k) softmax over the chosen logits
    num_experts: int


def router_forward(
    x: np.ndarray, p: Mapping[str, np.ndarray], top_k: int
) -> tuple[np.ndarray, np.ndarray, RouterCache]:
    """(weights (T, k), experts (T, k), cache) for tokens x (T, h)."""
    logits = linear_forward(x, p["router/weight"], p.get("router/bias"))  # (T, h) @ (h, E)
    experts = np.argsort(-logits, axis=-1, kind="stable")[:, :top_k]
    chosen = np.take_along_axis(logits, experts, axis=-1)
    weights = np.exp(chosen - chosen.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights, experts, RouterCache(x, experts, weights, logits.shape[-1])


def router_backward(
    cache: RouterCache, p: Mapping[str, np.ndarray], dweights: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads) given dL/dweights (T, k); unchosen logits get no gradient."""
    w = cache.weights
    dchosen = w * (dweights - (dweights * w).sum(axis=-1, keepdims=True))  # softmax backward
    dlogits = np.zeros((w.shape[0], cache.num_experts), dtype=w.dtype)
    np.put_along_axis(dlogits, cache.experts, dchosen, axis=-1)
    has_bias = "router/bias" in p
    dx, dw, db = linear_backward(cache.x, p["router/weight"], dlogits, has_bias)
    grads = {"router/weight": dw}
    if db is not None:
        grads["router/bias"] = db
    return dx, grads


def _expert(p: Mapping[str, np.ndarray], e: int) -> dict[str, np.ndarray]:
    """Expert e's MLP parameters (stacked names without the 'experts/' prefix, biases but out/bias)."""
    out = {}
    for key, value in p.items():
        if key.startswith("experts/") and key != "experts/out/bias":
            out[key[len("experts/") :]] = value[e]
    return out


def experts_forward(
    x: np.ndarray, p: Mapping[str, np.ndarray], activation: Activation, gated: bool, add_out_bias: bool
) -> tuple[np.ndarray, list[MLPCache]]:
    """Each expert e on its own rows x[e] (E_local, C, h) -> (E_local, C, h)."""
    outs, caches = [], []
    for e in range(x.shape[0]):
        y, cache = mlp_forward(x[e], _expert(p, e), activation, gated)  # (C, h) -> (C, h)
        if add_out_bias and "experts/out/bias" in p:
            y = y + p["experts/out/bias"][e]
        outs.append(y)
        caches.append(cache)
    return np.stack(outs), caches


def experts_backward(
    caches: list[MLPCache], p: Mapping[str, np.ndarray], activation: Activation, gated: bool, dy: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx (E_local, C, h), stacked grads); the out/bias grad is returned whether or not it was added."""
    dxs, per_expert = [], []
    for e, cache in enumerate(caches):
        dx, g = mlp_backward(cache, _expert(p, e), activation, gated, dy[e])
        dxs.append(dx)
        per_expert.append(g)
    grads = {f"experts/{k}": np.stack([g[k] for g in per_expert]) for k in per_expert[0]}
    if "experts/out/bias" in p:
        grads["experts/out/bias"] = dy.sum(axis=1)  # (E_local, C, h) -> (E_local, h)
    return np.stack(dxs), grads
