"""Exact parameters, forward FLOPs and kept activation bytes of three ZAYA mechanisms (transformers
5.24 modeling_zaya.py), keyed relative to the block:

    attention/cca                 compressed convolutional attention's q/k convs and key temperature
    mlp/router                    an MLP router (`MoESpec.router_mlp`, ZayaRouter)
    residual                      learned affine residual adds (`TransformerSpec.residual_affine`)

FLOPs count the convolutions as multiply-adds (2 FLOPs each: C taps per channel for the depthwise
conv, head_dim x taps for the grouped one, as FlopCounterMode counts aten.convolution) and the
router's linears as GEMMs; norms, GELUs, the L2 norms and the affine adds are element-wise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def cca_channels(spec: "TransformerSpec") -> int:
    """C: the q and k channels the convs mix (heads + kv_heads heads of head_dim)."""
    return spec.q_width + spec.kv_width


def cca_params(spec: "TransformerSpec") -> dict[str, int]:
    """ZayaCCAProjection's conv_qk_depthwise (C, 1, k0) + bias C, conv_qk_grouped (C, head_dim, k1)
    + bias C; ZayaQKNorm.temp (kv_heads,)."""
    cca = spec.cca
    if cca is None:
        return {}
    c = cca_channels(spec)
    return {"attention/cca": c * cca.depthwise_kernel + c + c * spec.dim_head * cca.grouped_kernel + c
            + spec.num_kv_heads}


def cca_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """The two convs over `tokens` tokens: 2 t C (k0 + head_dim k1)."""
    cca = spec.cca
    if cca is None:
        return {}
    return {"attention/cca": 2 * tokens * cca_channels(spec) * (cca.depthwise_kernel + spec.dim_head * cca.grouped_kernel)}


def cca_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """Bytes per token autograd keeps (eager): the conv input (the q, k projections), the depthwise
    output and the grouped output before the residual add, 3 C values."""
    return d * 3 * cca_channels(spec) if spec.cca is not None else 0


def router_mlp_params(spec: "TransformerSpec", router_state: bool) -> int:
    """ZayaRouter with router hidden r over E experts: down_proj Linear(h, r) with bias, the
    previous block's state scale (r) on every block but the first, router_mlp's RMSNorm(r),
    fc1 / fc2 Linear(r, r) with biases and out_proj Linear(r, E + 1) (the last class skips the MLP)."""
    r, e = spec.moe.router_mlp, spec.moe.num_experts
    return spec.hidden * r + r + (r if router_state else 0) + r + 2 * (r * r + r) + r * (e + 1)


def router_mlp_flops(spec: "TransformerSpec", tokens: int) -> int:
    """The router's GEMMs: (t, h) @ (h, r), two (t, r) @ (r, r), (t, r) @ (r, E + 1)."""
    r, e = spec.moe.router_mlp, spec.moe.num_experts
    return 2 * tokens * (spec.hidden * r + 2 * r * r + r * (e + 1))


def router_mlp_gemms(spec: "TransformerSpec", tokens: int) -> list[tuple[str, int, int, int]]:
    """(name, m, n, k) of the router's GEMMs, every tp rank over its tokens."""
    r, e, h = spec.moe.router_mlp, spec.moe.num_experts, spec.hidden
    return [("mlp/router/down", tokens, r, h), ("mlp/router/fc1", tokens, r, r), ("mlp/router/fc2", tokens, r, r),
            ("mlp/router", tokens, e + 1, r)]


def residual_affine_params(spec: "TransformerSpec") -> int:
    """ZayaResidualScaling after the attention and after the MLP: a scale and a bias on the branch
    and on the residual, 4 h each."""
    return 2 * 4 * spec.hidden if spec.residual_affine else 0


def input_affine_params(spec: "TransformerSpec") -> dict[str, int]:
    """ZayaModel.input_hidden_states_scale and _bias (h each) on the embeddings, keyed relative to `embedding/`."""
    return {"input_affine": 2 * spec.hidden} if spec.residual_affine else {}
