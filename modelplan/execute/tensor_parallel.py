"""One transformer block on one tensor-parallel rank (Megatron-LM, Shoeybi et al. 2019, sec. 3).

Attention: column-parallel Q/K/V (local heads = heads/tp, kv_heads/tp), row-parallel output
projection whose bias is added once after the reduce. MLP: column-parallel in (and gate),
row-parallel out. Norms run on whatever the residual stream holds: the full sequence, or this
rank's sequence shard under sequence parallelism. Parameters `p` are this rank's shards, named
as in the full model (`layers/3/attention/q/weight`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelplan.comm.regions import Region
from modelplan.execute import mappings
from modelplan.execute.expert_parallel import ExpertParallel, moe_backward, moe_forward
from modelplan.execute.layers.attention import attention_backward, attention_forward
from modelplan.execute.layers.mlp import mlp_backward, mlp_forward
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.shapes import attention_shape, norm_b, norm_f, sub
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]


def _bias_grad(dy: np.ndarray) -> np.ndarray:
    return dy.reshape(-1, dy.shape[-1]).sum(axis=0)


def _attention_f(tp: TensorParallel, spec: TransformerSpec, pa: Params, h: np.ndarray):
    a_in = mappings.enter_region(tp, h, Region.TP_ATTENTION_IN)  # (b, s, h)
    a_part, cache = attention_forward(a_in, pa, attention_shape(spec, tp.size))  # partial over tp
    a = mappings.exit_region(tp, a_part, Region.TP_ATTENTION_OUT)
    return a + pa.get("out/bias", 0.0), cache


def _attention_b(tp: TensorParallel, spec: TransformerSpec, pa: Params, cache, da: np.ndarray, grads: Params, prefix: str):
    if "out/bias" in pa:
        grads[f"{prefix}/out/bias"] = _bias_grad(da)
    da_part = mappings.exit_region_backward(tp, da, Region.TP_ATTENTION_OUT)
    dh, g = attention_backward(cache, pa, attention_shape(spec, tp.size), da_part)
    grads.update({f"{prefix}/{k}": v for k, v in g.items()})
    return mappings.enter_region_backward(tp, dh, Region.TP_ATTENTION_IN)


def _mlp_f(tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, i: int, pm: Params, h: np.ndarray):
    if spec.is_moe_layer(i):
        return moe_forward(tp, ep, spec, pm, h)
    m_in = mappings.enter_region(tp, h, Region.TP_MLP_IN)
    m_part, cache = mlp_forward(m_in, pm, spec.activation, spec.gated_mlp)
    m = mappings.exit_region(tp, m_part, Region.TP_MLP_OUT)
    return m + pm.get("out/bias", 0.0), cache


def _mlp_b(tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, i: int, pm: Params, cache, dm: np.ndarray,
           grads: Params, prefix: str):
    if spec.is_moe_layer(i):
        dh, g = moe_backward(tp, ep, spec, pm, cache, dm)
        grads.update({f"{prefix}/{k}": v for k, v in g.items()})
        return dh
    if "out/bias" in pm:
        grads[f"{prefix}/out/bias"] = _bias_grad(dm)
    dm_part = mappings.exit_region_backward(tp, dm, Region.TP_MLP_OUT)
    dh, g = mlp_backward(cache, pm, spec.activation, spec.gated_mlp, dm_part)
    grads.update({f"{prefix}/{k}": v for k, v in g.items()})
    return mappings.enter_region_backward(tp, dh, Region.TP_MLP_IN)


def block_forward(
    tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, i: int, params: Params, x: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """Block i on the residual stream x (b, s or s/tp, h)."""
    p = sub(params, f"layers/{i}")
    pa, pm = sub(p, "attention"), sub(p, "mlp")
    c: dict[str, Any] = {}
    h1, c["norm_a"] = norm_f(spec, sub(pa, "norm"), x)
    a, c["attn"] = _attention_f(tp, spec, pa, h1)
    x_mid = x if spec.parallel_block else x + a
    if "norm/weight" in pm:
        h2, c["norm_m"] = norm_f(spec, sub(pm, "norm"), x_mid)
    else:
        h2 = h1 if spec.parallel_block else x_mid
    m, c["mlp"] = _mlp_f(tp, ep, spec, i, pm, h2)
    return x_mid + m + (a if spec.parallel_block else 0.0), c


def block_backward(
    tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, i: int, params: Params, c: dict[str, Any],
    dy: np.ndarray,
) -> tuple[np.ndarray, Params]:
    """(dx, grads of block i's local shards)."""
    prefix = f"layers/{i}"
    p = sub(params, prefix)
    pa, pm = sub(p, "attention"), sub(p, "mlp")
    grads: Params = {}
    dh2 = _mlp_b(tp, ep, spec, i, pm, c["mlp"], dy, grads, f"{prefix}/mlp")
    dh1_extra = 0.0
    if "norm_m" in c:
        dx_mid = dy + norm_b(sub(pm, "norm"), c["norm_m"], dh2, grads, f"{prefix}/mlp/norm")
    elif spec.parallel_block:
        dx_mid, dh1_extra = dy, dh2
    else:
        dx_mid = dy + dh2
    da = dy if spec.parallel_block else dx_mid
    dh1 = _attention_b(tp, spec, pa, c["attn"], da, grads, f"{prefix}/attention")
    dx = norm_b(sub(pa, "norm"), c["norm_a"], dh1 + dh1_extra, grads, f"{prefix}/attention/norm")
    return dx_mid + dx, grads
