"""Mixture-of-experts pieces: the top-k router and a stack of expert MLPs.

Routers (`Router`): top-k softmax (Mixtral; Megatron-core's default), softmax over all experts,
sigmoid scores with a selection bias and group-limited routing (DeepSeek), and the shared-expert
gate (Qwen2-MoE). Experts are stacked along dim 0:
experts/in/weight (E, h, f), experts/gate/weight (E, h, f), experts/out/weight (E, f, h).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

import numpy as np

from modelplan.execute.layers.activations import Activation
from modelplan.execute.layers.linear import linear_backward, linear_forward
from modelplan.execute.layers.mlp import MLPCache, mlp_backward, mlp_forward


@dataclass(frozen=True)
class Router:
    """How a router scores and picks experts (transformers' TopkRouter classes).

    topk_softmax: softmax over the top-k logits (Mixtral, gpt-oss); softmax: softmax over all
    experts, top-k, renormalised when `norm_topk_prob` (Qwen-MoE, OLMoE, DeepSeek-V2); sigmoid:
    per-expert sigmoid scores, picked on score + `score_bias` (DeepSeek-V3's aux-free
    e_score_correction_bias, selection only), renormalised with +1e-20 when `norm_topk_prob`.
    With `groups` > 1 only the experts of the `group_top_k` best groups may be picked, a group
    scored by its best expert (DeepSeek-V2 group_limited_greedy) or the sum of its best two
    (`group_score` top2_sum: DeepSeek-V3 noaux_tc). The weights are finally times `scaling`
    (routed_scaling_factor)."""

    kind: Literal["topk_softmax", "softmax", "sigmoid"]
    top_k: int
    norm_topk_prob: bool = True
    groups: int = 1
    group_top_k: int = 1
    group_score: Literal["max", "top2_sum"] = "max"
    score_bias: np.ndarray | None = None
    scaling: float = 1.0

    @property
    def softmax_of_topk(self) -> bool:
        """Renormalised softmax over all experts equals the softmax over the chosen logits."""
        return self.kind == "topk_softmax" or (self.kind == "softmax" and self.norm_topk_prob)


@dataclass(frozen=True)
class RouterCache:
    """Router activations kept for backward."""

    x: np.ndarray  # (T, h)
    experts: np.ndarray  # (T, k) chosen expert ids
    weights: np.ndarray  # (T, k) combine weights before the scaling
    scores: np.ndarray | None  # (T, E) softmax / sigmoid scores (None: softmax of the top-k)
    num_experts: int


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _group_limited(choice: np.ndarray, router: Router) -> np.ndarray:
    """choice with the experts outside each token's group_top_k best groups set to -inf."""
    T, E = choice.shape
    grouped = choice.reshape(T, router.groups, E // router.groups)
    if router.group_score == "top2_sum":
        group_scores = -np.sort(-grouped, axis=-1)[..., :2].sum(axis=-1)  # (T, G)
    else:
        group_scores = grouped.max(axis=-1)
    keep = np.argsort(-group_scores, axis=-1, kind="stable")[:, : router.group_top_k]
    allowed = np.zeros((T, router.groups), dtype=bool)
    np.put_along_axis(allowed, keep, True, axis=-1)
    return np.where(np.repeat(allowed, E // router.groups, axis=-1), choice, -np.inf)


def router_forward(
    x: np.ndarray, p: Mapping[str, np.ndarray], router: Router | int
) -> tuple[np.ndarray, np.ndarray, RouterCache]:
    """(weights (T, k), experts (T, k), cache) for tokens x (T, h); an int router is top-k softmax."""
    router = Router("topk_softmax", router) if isinstance(router, int) else router
    logits = linear_forward(x, p["router/weight"], p.get("router/bias"))  # (T, h) @ (h, E)
    scores = None
    if router.softmax_of_topk:
        choice = logits
    elif router.kind == "softmax":
        choice = scores = _softmax(logits)
    else:
        scores = _sigmoid(logits)
        choice = scores if router.score_bias is None else scores + router.score_bias
    if router.groups > 1:
        choice = _group_limited(choice, router)
    experts = np.argsort(-choice, axis=-1, kind="stable")[:, : router.top_k]
    if scores is None:
        chosen = np.take_along_axis(logits, experts, axis=-1)
        weights = np.exp(chosen - chosen.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
    else:
        weights = np.take_along_axis(scores, experts, axis=-1)
        if router.norm_topk_prob:
            weights = weights / (weights.sum(axis=-1, keepdims=True) + (1e-20 if router.kind == "sigmoid" else 0.0))
    cache = RouterCache(x, experts, weights, scores, logits.shape[-1])
    return (weights if router.scaling == 1.0 else weights * router.scaling), experts, cache


def router_backward(
    cache: RouterCache, p: Mapping[str, np.ndarray], dweights: np.ndarray, router: Router | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads) given dL/dweights (T, k); logits of unchosen experts get a gradient only
    through a softmax over all experts."""
    router = router or Router("topk_softmax", cache.experts.shape[1])
    w = cache.weights
    dw = dweights if router.scaling == 1.0 else dweights * router.scaling
    dlogits = np.zeros((w.shape[0], cache.num_experts), dtype=w.dtype)
    if cache.scores is None:
        dchosen = w * (dw - (dw * w).sum(axis=-1, keepdims=True))  # softmax backward
        np.put_along_axis(dlogits, cache.experts, dchosen, axis=-1)
    else:
        if router.norm_topk_prob:  # w = r / D, D = sum(r) (+ 1e-20): dr = (dw - sum(dw * w)) / D
            raw = np.take_along_axis(cache.scores, cache.experts, axis=-1)
            denominator = raw.sum(axis=-1, keepdims=True) + (1e-20 if router.kind == "sigmoid" else 0.0)
            dw = (dw - (dw * w).sum(axis=-1, keepdims=True)) / denominator
        dscores = np.zeros_like(dlogits)
        np.put_along_axis(dscores, cache.experts, dw, axis=-1)
        s = cache.scores
        if router.kind == "sigmoid":
            dlogits = dscores * s * (1.0 - s)
        else:
            dlogits = s * (dscores - (dscores * s).sum(axis=-1, keepdims=True))
    has_bias = "router/bias" in p
    dx, dwr, db = linear_backward(cache.x, p["router/weight"], dlogits, has_bias)
    grads = {"router/weight": dwr}
    if db is not None:
        grads["router/bias"] = db
    return dx, grads


def shared_gate_forward(tokens: np.ndarray, p: Mapping[str, np.ndarray]) -> np.ndarray:
    """Qwen2-MoE shared_expert_gate: sigmoid(tokens @ w) (T, 1), scaling the shared experts."""
    return _sigmoid(tokens @ p["shared_gate/weight"])  # (T, h) @ (h, 1)


def shared_gate_backward(tokens: np.ndarray, p: Mapping[str, np.ndarray], gate: np.ndarray, shared_out: np.ndarray,
                         dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dtokens, dweight) of y = gate * shared_out for dL/dy (T, h)."""
    dlogit = (dy * shared_out).sum(axis=-1, keepdims=True) * gate * (1.0 - gate)  # (T, 1)
    return dlogit @ p["shared_gate/weight"].T, tokens.T @ dlogit  # (T, 1) @ (1, h); (h, T) @ (T, 1)


def expert_params(p: Mapping[str, np.ndarray], e: int) -> dict[str, np.ndarray]:
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
        y, cache = mlp_forward(x[e], expert_params(p, e), activation, gated)  # (C, h) -> (C, h)
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
        dx, g = mlp_backward(cache, expert_params(p, e), activation, gated, dy[e])
        dxs.append(dx)
        per_expert.append(g)
    grads = {f"experts/{k}": np.stack([g[k] for g in per_expert]) for k in per_expert[0]}
    if "experts/out/bias" in p:
        grads["experts/out/bias"] = dy.sum(axis=1)  # (E_local, C, h) -> (E_local, h)
    return np.stack(dxs), grads
