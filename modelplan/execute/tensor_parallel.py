"""One transformer block on one tensor-parallel rank (Megatron-LM, Shoeybi et al. 2019, sec. 3).

Attention: column-parallel Q/K/V (local heads = heads/tp, kv_heads/tp), row-parallel output
projection whose bias is added once after the reduce; per-head options (sinks, per-head q/k norm
weights, sliding windows) follow their heads, a q/k norm over all heads (OLMo-2) all-reduces its
statistics over tp, a head_dim norm weight shared by the heads (Qwen3) is replicated. MLA: heads
split, latents replicated (Megatron-core MLASelfAttention). Mamba: d_inner channels split, x_proj's
output all-reduced (`layers/mamba.py`). Mamba-2 and gated DeltaNet: heads (and groups) split,
nothing exchanged inside (`layers/mamba2.py`, `layers/deltanet.py`). MLP: column-parallel in (and gate),
row-parallel out. Norms run on whatever the residual stream holds: the full sequence, or this
rank's sequence shard under sequence parallelism (`residual.py` places them). Parameters `p` are
this rank's shards, named as in the full model (`layers/3/attention/q/weight`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelplan.count.blocks import Block, block_of
from modelplan.comm.regions import Region
from modelplan.execute import mappings
from modelplan.execute.expert_parallel import ExpertParallel, moe_backward, moe_forward
from modelplan.execute.layers.attention import attention_backward, attention_forward, discard_scores
from modelplan.execute.layers.mamba import mamba_backward, mamba_forward
from modelplan.execute.layers.mamba2 import mamba2_backward, mamba2_forward
from modelplan.execute.layers.deltanet import deltanet_backward, deltanet_forward
from modelplan.execute.layers.mla import mla_backward, mla_forward
from modelplan.execute.layers.mlp import mlp_backward, mlp_forward
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.residual import block_backward as residual_backward, block_forward as residual_forward
from modelplan.execute.shapes import attention_shape, deltanet_shape, mamba2_shape, mamba_shape, mla_shape, sub
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]


def _bias_grad(dy: np.ndarray) -> np.ndarray:
    return dy.reshape(-1, dy.shape[-1]).sum(axis=0)


def _stats(tp: TensorParallel):
    """The AllReduce of a q/k norm's statistics over the heads of all tp ranks (None: one rank)."""
    return tp.all_reduce if tp.size > 1 else None


def _attention_f(tp: TensorParallel, spec: TransformerSpec, block: Block, pa: Params, h: np.ndarray,
                 core_attn: bool = False):
    a_in = mappings.enter_region(tp, h, Region.TP_ATTENTION_IN)  # (b, s, h)
    if spec.mla is not None:
        a_part, cache = mla_forward(a_in, pa, mla_shape(spec, tp.size, block.mixer))  # partial over tp
    else:
        a_part, cache = attention_forward(a_in, pa, attention_shape(spec, tp.size, block.mixer), _stats(tp), tp.cp)
    a = mappings.exit_region(tp, a_part, Region.TP_ATTENTION_OUT)
    # core_attn recompute: the probabilities go, backward recomputes them (layers/attention.py)
    return a + pa.get("out/bias", 0.0), discard_scores(cache) if core_attn else cache


def _attention_b(tp: TensorParallel, spec: TransformerSpec, block: Block, pa: Params, cache, da: np.ndarray):
    grads: Params = {}
    if "out/bias" in pa:
        grads["out/bias"] = _bias_grad(da)
    da_part = mappings.exit_region_backward(tp, da, Region.TP_ATTENTION_OUT)
    if spec.mla is not None:
        dh, g = mla_backward(cache, pa, mla_shape(spec, tp.size, block.mixer), da_part)
    else:
        dh, g = attention_backward(cache, pa, attention_shape(spec, tp.size, block.mixer), da_part, _stats(tp),
                                   tp.cp)
    grads.update(g)
    return mappings.enter_region_backward(tp, dh, Region.TP_ATTENTION_IN), grads


def _mamba_f(tp: TensorParallel, spec: TransformerSpec, pm: Params, h: np.ndarray):
    m_in = mappings.enter_region(tp, h, Region.TP_MAMBA_IN)  # (b, s, h)
    m_part, cache = mamba_forward(m_in, pm, mamba_shape(spec, tp.size), _stats(tp))  # partial over tp
    return mappings.exit_region(tp, m_part, Region.TP_MAMBA_OUT) + pm.get("out/bias", 0.0), cache


def _mamba_b(tp: TensorParallel, spec: TransformerSpec, pm: Params, cache, dm: np.ndarray):
    grads: Params = {}
    if "out/bias" in pm:
        grads["out/bias"] = _bias_grad(dm)
    dm_part = mappings.exit_region_backward(tp, dm, Region.TP_MAMBA_OUT)
    dh, g = mamba_backward(cache, pm, mamba_shape(spec, tp.size), dm_part, _stats(tp))
    grads.update(g)
    return mappings.enter_region_backward(tp, dh, Region.TP_MAMBA_IN), grads


LINEAR_MIXERS = {"mamba2": (mamba2_forward, mamba2_backward, mamba2_shape),
                 "gated_deltanet": (deltanet_forward, deltanet_backward, deltanet_shape)}
"""Mixers split by heads with nothing exchanged inside: f before in_proj, g after out_proj."""


def _linear_mixer_f(tp: TensorParallel, spec: TransformerSpec, name: str, pm: Params, h: np.ndarray):
    forward, _, shape = LINEAR_MIXERS[name]
    m_in = mappings.enter_region(tp, h, Region.TP_MAMBA_IN)  # (b, s, h)
    m_part, cache = forward(m_in, pm, shape(spec, tp.size))  # partial over tp
    return mappings.exit_region(tp, m_part, Region.TP_MAMBA_OUT) + pm.get("out/bias", 0.0), cache


def _linear_mixer_b(tp: TensorParallel, spec: TransformerSpec, name: str, pm: Params, cache, dm: np.ndarray):
    _, backward, shape = LINEAR_MIXERS[name]
    grads: Params = {}
    if "out/bias" in pm:
        grads["out/bias"] = _bias_grad(dm)
    dh, g = backward(cache, pm, shape(spec, tp.size), mappings.exit_region_backward(tp, dm, Region.TP_MAMBA_OUT))
    grads.update(g)
    return mappings.enter_region_backward(tp, dh, Region.TP_MAMBA_IN), grads


def _mlp_f(tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, block: Block, pm: Params, h: np.ndarray):
    if block.moe:
        return moe_forward(tp, ep, spec, pm, h)
    m_in = mappings.enter_region(tp, h, Region.TP_MLP_IN)
    m_part, cache = mlp_forward(m_in, pm, spec.activation, spec.gated_mlp)
    m = mappings.exit_region(tp, m_part, Region.TP_MLP_OUT)
    return m + pm.get("out/bias", 0.0), cache


def _mlp_b(tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, block: Block, pm: Params, cache,
           dm: np.ndarray):
    if block.moe:
        return moe_backward(tp, ep, spec, pm, cache, dm)
    grads: Params = {}
    if "out/bias" in pm:
        grads["out/bias"] = _bias_grad(dm)
    dm_part = mappings.exit_region_backward(tp, dm, Region.TP_MLP_OUT)
    dh, g = mlp_backward(cache, pm, spec.activation, spec.gated_mlp, dm_part)
    grads.update(g)
    return mappings.enter_region_backward(tp, dh, Region.TP_MLP_IN), grads


def kind_forward(tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, block: Block, p: Params,
                 x: np.ndarray, core_attn: bool = False) -> tuple[np.ndarray, dict[str, Any]]:
    """A block of kind `block` with parameters `p` (relative names) on the residual stream x;
    `core_attn`: keep no attention probabilities (backward recomputes them)."""
    def run(name: str, ps: Params, h: np.ndarray):
        if name == "attention":
            return _attention_f(tp, spec, block, ps, h, core_attn)
        if name == "mamba":
            return _mamba_f(tp, spec, ps, h)
        if name in LINEAR_MIXERS:
            return _linear_mixer_f(tp, spec, name, ps, h)
        return _mlp_f(tp, ep, spec, block, ps, h)
    return residual_forward(spec, block, p, x, run)


def kind_backward(tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, block: Block, p: Params,
                  c: dict[str, Any], dy: np.ndarray) -> tuple[np.ndarray, Params]:
    """(dx, grads keyed relative to the block) of kind_forward."""
    def run_backward(name: str, ps: Params, cache, dout: np.ndarray):
        if name == "attention":
            return _attention_b(tp, spec, block, ps, cache, dout)
        if name == "mamba":
            return _mamba_b(tp, spec, ps, cache, dout)
        if name in LINEAR_MIXERS:
            return _linear_mixer_b(tp, spec, name, ps, cache, dout)
        return _mlp_b(tp, ep, spec, block, ps, cache, dout)
    return residual_backward(spec, block, p, c, dy, run_backward)


def block_forward(
    tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, i: int, params: Params, x: np.ndarray,
    core_attn: bool = False,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Block i on the residual stream x (b, s or s/tp, h)."""
    return kind_forward(tp, ep, spec, block_of(spec, i), sub(params, f"layers/{i}"), x, core_attn)


def block_backward(
    tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, i: int, params: Params, c: dict[str, Any],
    dy: np.ndarray,
) -> tuple[np.ndarray, Params]:
    """(dx, grads of block i's local shards)."""
    dx, g = kind_backward(tp, ep, spec, block_of(spec, i), sub(params, f"layers/{i}"), c, dy)
    return dx, {f"layers/{i}/{k}": v for k, v in g.items()}
