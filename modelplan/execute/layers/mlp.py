"""Feed-forward block: plain (GELU, GPT) or gated (SwiGLU/GeGLU, Shazeer 2020).

Parameters (relative names): in/weight (h, f), gate/weight (h, f) when gated, out/weight (f, h),
and their biases. Gated: y = (phi(x @ gate) * (x @ in)) @ out. gpt-oss's clamped SwiGLU
(activation swiglu_clamp, GptOssExperts): g = min(x @ gate, 7), u = clip(x @ in, -7, 7),
y = (g * sigmoid(1.702 g) * (u + 1)) @ out. The output projection is returned without its bias;
the caller adds it once after any tensor-parallel reduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from modelplan.execute.layers.activations import Activation, activation_backward, activation_forward

SWIGLU_ALPHA = 1.702  # GptOssExperts.alpha (hard-coded in transformers' gpt_oss modelling)
SWIGLU_LIMIT = 7.0  # gpt-oss config swiglu_limit (every published gpt-oss checkpoint)


def _clamped_swiglu(pre: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hidden, glu, sigmoid) of gpt-oss's clamped SwiGLU on gate pre-activations and up values."""
    g = np.minimum(pre, SWIGLU_LIMIT)
    sig = 1.0 / (1.0 + np.exp(-SWIGLU_ALPHA * g))
    glu = g * sig
    return glu * (np.clip(up, -SWIGLU_LIMIT, SWIGLU_LIMIT) + 1.0), glu, sig


def _clamped_swiglu_backward(pre: np.ndarray, up: np.ndarray, dhidden: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dpre, dup); torch clamp passes the gradient where the value is inside its bounds."""
    _, glu, sig = _clamped_swiglu(pre, up)
    g = np.minimum(pre, SWIGLU_LIMIT)
    dup = dhidden * glu * (np.abs(up) <= SWIGLU_LIMIT)
    dglu = dhidden * (np.clip(up, -SWIGLU_LIMIT, SWIGLU_LIMIT) + 1.0)
    dpre = dglu * (sig + SWIGLU_ALPHA * g * sig * (1.0 - sig)) * (pre <= SWIGLU_LIMIT)
    return dpre, dup
from modelplan.execute.layers.linear import linear_backward, linear_forward


@dataclass(frozen=True)
class MLPCache:
    """Activations kept for backward."""

    x: np.ndarray
    pre_act: np.ndarray  # x @ in (plain) or x @ gate (gated)
    up: np.ndarray | None  # x @ in when gated
    hidden: np.ndarray  # input of the output projection


def mlp_forward(
    x: np.ndarray, p: Mapping[str, np.ndarray], activation: Activation, gated: bool
) -> tuple[np.ndarray, MLPCache]:
    """MLP of x (..., h) up to the output projection, bias excluded."""
    up = linear_forward(x, p["in/weight"], p.get("in/bias"))  # (b, s, h) @ (h, f)
    if gated:
        pre = linear_forward(x, p["gate/weight"], p.get("gate/bias"))  # (b, s, h) @ (h, f)
        if activation == "swiglu_clamp":
            hidden = _clamped_swiglu(pre, up)[0]
        else:
            hidden = activation_forward(activation, pre) * up
    else:
        pre, hidden, up = up, activation_forward(activation, up), None
    out = linear_forward(hidden, p["out/weight"])  # (b, s, f) @ (f, h)
    return out, MLPCache(x, pre, up, hidden)


def mlp_backward(
    cache: MLPCache, p: Mapping[str, np.ndarray], activation: Activation, gated: bool, dout: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads); grads has the keys of p except out/bias."""
    grads: dict[str, np.ndarray] = {}
    dhidden, grads["out/weight"], _ = linear_backward(cache.hidden, p["out/weight"], dout, False)
    if gated and activation == "swiglu_clamp":
        dpre, dup = _clamped_swiglu_backward(cache.pre_act, cache.up, dhidden)
    elif gated:
        dpre = activation_backward(activation, cache.pre_act, dhidden * cache.up)
        dup = dhidden * activation_forward(activation, cache.pre_act)
    if gated:
        dx, grads["gate/weight"], db = linear_backward(cache.x, p["gate/weight"], dpre, "gate/bias" in p)
        if db is not None:
            grads["gate/bias"] = db
    else:
        dup = activation_backward(activation, cache.pre_act, dhidden)
        dx = 0.0
    dxi, grads["in/weight"], db = linear_backward(cache.x, p["in/weight"], dup, "in/bias" in p)
    if db is not None:
        grads["in/bias"] = db
    return dx + dxi, grads
