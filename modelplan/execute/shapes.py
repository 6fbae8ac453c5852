"""Small glue between a TransformerSpec and the layer calls, shared by the reference and the
sharded executor: parameter sub-dictionaries, per-rank attention shapes, the router and norm calls."""

from __future__ import annotations

import numpy as np

from modelplan.execute.layers.attention import AttentionShape, QKNorm
from modelplan.execute.layers.mamba import MambaShape
from modelplan.execute.layers.mamba2 import Mamba2Shape
from modelplan.execute.layers.deltanet import DeltaNetShape
from modelplan.execute.layers.mla import MLAShape
from modelplan.execute.layers.moe import Router
from modelplan.execute.layers.norm import NormCache, norm_backward, norm_forward
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]


def sub(params: Params, prefix: str) -> Params:
    """The parameters under `prefix/`, keyed by their relative names."""
    n = len(prefix) + 1
    return {k[n:]: v for k, v in params.items() if k.startswith(prefix + "/")}


def _window(spec: TransformerSpec, mixer: str) -> dict:
    """The mask options of a block's mixer: a sliding window or an attention chunk."""
    if mixer == "sliding_attention":
        return {"window": spec.sliding_window}
    if mixer == "chunked_attention":
        return {"chunk": spec.attention_chunk}
    return {}


def _qk_norm(spec: TransformerSpec, mixer: str) -> QKNorm | None:
    if not spec.qk_norm_in(mixer):
        return None
    affine = spec.norm_affine and spec.qk_norm_weight != "none"
    return QKNorm(spec.norm, spec.norm_eps, spec.qk_norm_scope, spec.qk_norm_weight if affine else "none",
                  affine and spec.norm_bias, spec.q_width, spec.kv_width)


def attention_shape(spec: TransformerSpec, tp: int = 1, mixer: str = "full_attention") -> AttentionShape:
    """Head counts per tensor-parallel rank (heads/tp query heads, kv_heads/tp key/value heads)
    and the attention options of a block whose mixer is `mixer`."""
    rotary = spec.rotary_in(mixer)
    rotary_dims = int(spec.dim_head * spec.rotary_fraction) if rotary and spec.rotary_fraction != 1.0 else None
    return AttentionShape(
        spec.heads // tp, spec.num_kv_heads // tp, spec.dim_head, spec.causal, rotary,
        rotary_dims=rotary_dims, rotary_base=spec.rope_theta, scale=spec.attention_scale, softcap=spec.attn_logit_softcap,
        sinks=spec.attention_sinks, clip=spec.qkv_clip, qk_norm=_qk_norm(spec, mixer), **_window(spec, mixer),
    )


def mla_shape(spec: TransformerSpec, tp: int = 1, mixer: str = "full_attention") -> MLAShape:
    """MLA dims with heads/tp local heads; the score core's options as for q/k/v attention."""
    mla = spec.mla
    core = AttentionShape(spec.heads // tp, spec.heads // tp, mla.qk_head_dim, spec.causal, False,
                          scale=spec.attention_scale, softcap=spec.attn_logit_softcap, **_window(spec, mixer))
    return MLAShape(spec.heads // tp, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim,
                    mla.kv_lora_rank, mla.q_lora_rank, spec.norm, spec.norm_eps, core,
                    spec.rope_theta)


def mamba_shape(spec: TransformerSpec, tp: int = 1) -> MambaShape:
    """The Mamba mixer with d_inner / tp local channels."""
    ssm = spec.ssm
    return MambaShape(ssm.inner // tp, ssm.state_size, ssm.dt_rank, ssm.conv_kernel, ssm.bc_dt_norm, spec.norm_eps)


def mamba2_shape(spec: TransformerSpec, tp: int = 1) -> Mamba2Shape:
    """The Mamba-2 mixer with heads / tp local heads and groups / tp local groups."""
    m = spec.mamba2
    return Mamba2Shape(m.heads // tp, m.head_dim, m.groups // tp, m.state_size, m.gated_norm, spec.norm_eps)


def deltanet_shape(spec: TransformerSpec, tp: int = 1) -> DeltaNetShape:
    """The gated DeltaNet with key_heads / tp and value_heads / tp local heads."""
    g = spec.deltanet
    return DeltaNetShape(g.key_heads // tp, g.value_heads // tp, g.key_head_dim, g.value_head_dim, spec.norm_eps)


def score_correction_bias(num_experts: int) -> np.ndarray:
    """The aux-free balancing bias (DeepSeek-V3 e_score_correction_bias). It is a buffer that
    training updates from expert loads between steps, not by gradients; the executor holds it at
    0.1 * sin(1 + e) for expert e, so the selection it biases is exercised, not at HF's zeros."""
    return 0.1 * np.sin(1.0 + np.arange(num_experts))


def router(spec: TransformerSpec) -> Router:
    """The spec's MoE router (`layers/moe.py`)."""
    moe = spec.moe
    kind = "topk_softmax" if moe.router == "topk_softmax" else moe.router
    bias = score_correction_bias(moe.num_experts) if moe.router_score_correction else None
    return Router(kind, moe.top_k, moe.norm_topk_prob, moe.router_groups, moe.router_group_top_k,
                  "top2_sum" if moe.router_score_correction else "max", bias, moe.routed_scaling)


def norm_f(spec: TransformerSpec, p: Params, x: np.ndarray) -> tuple[np.ndarray, NormCache]:
    """The spec's norm of x with p's weight (and bias); no weight for non-affine norms."""
    return norm_forward(spec.norm, x, p.get("weight"), p.get("bias"), spec.norm_eps)


def norm_b(p: Params, cache: NormCache, dy: np.ndarray, grads: Params, prefix: str) -> np.ndarray:
    """Norm backward: returns dx and stores the weight/bias grads under `prefix/`."""
    dx, dw, db = norm_backward(cache, p.get("weight"), dy, "bias" in p)
    if dw is not None:
        grads[f"{prefix}/weight"] = dw
    if db is not None:
        grads[f"{prefix}/bias"] = db
    return dx
