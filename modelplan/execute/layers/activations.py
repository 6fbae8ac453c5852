"""Element-wise activations and their derivatives: GELU (erf and tanh forms), ReLU, SiLU."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

Activation = Literal["gelu", "relu", "silu", "gelu_tanh", "swiglu_clamp"]
"""swiglu_clamp is gated only: its gate and clamp live in `layers/mlp.py`."""

_erf = np.frompyfunc(math.erf, 1, 1)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def activation_forward(kind: Activation, x: np.ndarray) -> np.ndarray:
    """phi(x)."""
    if kind == "gelu":
        # Hendrycks & Gimpel 2016: x * Phi(x), Phi the standard normal CDF
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(x.dtype))
    if kind == "gelu_tanh":
        # Hendrycks & Gimpel 2016, tanh approximation (GPT-2's "gelu_new")
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
    if kind == "relu":
        return np.maximum(x, 0.0)
    # silu / swish: x * sigmoid(x) (Ramachandran et al. 2017)
    return x / (1.0 + np.exp(-x))


def activation_backward(kind: Activation, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dL/dx = dy * phi'(x)."""
    if kind == "gelu":
        cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)).astype(x.dtype))
        pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return dy * (cdf + x * pdf)
    if kind == "gelu_tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x**3)
        t = np.tanh(inner)
        d_inner = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner)
    if kind == "relu":
        return dy * (x > 0)
    sig = 1.0 / (1.0 + np.exp(-x))
    return dy * (sig * (1.0 + x * (1.0 - sig)))
