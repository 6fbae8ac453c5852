"""Small glue between a TransformerSpec and the layer calls, shared by the reference and the
sharded executor: parameter sub-dictionaries, per-rank attention shapes and norm calls."""

from __future__ import annotations

import numpy as np

from modelplan.execute.layers.attention import AttentionShape
from modelplan.execute.layers.norm import NormCache, norm_backward, norm_forward
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]


def sub(params: Params, prefix: str) -> Params:
    """The parameters under `prefix/`, keyed by their relative names."""
    n = len(prefix) + 1
    return {k[n:]: v for k, v in params.items() if k.startswith(prefix + "/")}


def attention_shape(spec: TransformerSpec, tp: int = 1) -> AttentionShape:
    """Head counts per tensor-parallel rank: heads/tp query heads, kv_heads/tp key/value heads."""
    return AttentionShape(
        spec.heads // tp, spec.num_kv_heads // tp, spec.dim_head, spec.causal, spec.position == "rotary"
    )


def norm_f(spec: TransformerSpec, p: Params, x: np.ndarray) -> tuple[np.ndarray, NormCache]:
    """The spec's norm of x with p's weight (and bias)."""
    return norm_forward(spec.norm, x, p["weight"], p.get("bias"), spec.norm_eps)


def norm_b(p: Params, cache: NormCache, dy: np.ndarray, grads: Params, prefix: str) -> np.ndarray:
    """Norm backward: returns dx and stores the weight/bias grads under `prefix/`."""
    dx, dw, db = norm_backward(cache, p["weight"], dy, "bias" in p)
    grads[f"{prefix}/weight"] = dw
    if db is not None:
        grads[f"{prefix}/bias"] = db
    return dx
