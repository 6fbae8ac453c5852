"""Exact parameters, forward FLOPs and kept activation bytes of Inkling's short convolutions and
relative logits (`modelplan.specs.conv_relative.ConvRelativeSpec`), keyed relative to the block:

    attention/{kv_conv, relative/proj, relative/bank}, branch_conv, mlp/{global_scale, router_extra}

transformers 5.24 modeling_inkling.py: InklingShortConvolution is nn.Conv1d(c, c, L, groups=c,
bias=False), weight (c, 1, L); r_proj is Linear(h, heads d_rel, bias=False); the bank
InklingRelativeLogits.proj is (d_rel, extent). Called with the block's own spec (its layer type's
heads, kv heads and head_dim: specs/attention_shape.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.specs.transformer import TransformerSpec


def _extent(spec: "TransformerSpec", block: "Block") -> int:
    """Backward distances the relative bias spans (InklingAttention.rel_extent: the window in
    sliding blocks)."""
    m = spec.extras.conv_relative
    return m.sliding_rel_extent if block.mixer == "sliding_attention" else m.rel_extent


def conv_relative_params(spec: "TransformerSpec", block: "Block") -> dict[str, int]:
    """One block's parameters."""
    m, h = spec.extras.conv_relative, spec.hidden
    out = {}
    if m.kv_conv:  # k_sconv, v_sconv: depthwise over kv_heads x head_dim each
        out["attention/kv_conv"] = (spec.kv_width + spec.v_width) * m.conv_kernel
    out["attention/relative/proj"] = h * spec.heads * m.d_rel  # r_proj: Linear(h, heads d_rel)
    out["attention/relative/bank"] = m.d_rel * _extent(spec, block)  # rel_logits_proj.proj (d_rel, extent)
    if m.branch_conv:  # attn_sconv, mlp_sconv: depthwise over h each
        out["branch_conv"] = 2 * h * m.conv_kernel
    if block.mlp:
        out["mlp/global_scale"] = 1 if m.mlp_scale else 0  # InklingMLP / InklingTopkRouter.global_scale: (1,)
        if block.moe:  # InklingTopkRouter.weight: (n_routed + n_shared, h)
            out["mlp/router_extra"] = m.router_extra_rows * h
    return out


def conv_relative_flops(spec: "TransformerSpec", block: "Block", tokens: int) -> dict[str, int]:
    """Forward FLOPs: the depthwise convs L multiply-adds a channel and token (as count/short_conv.py),
    r_proj's GEMM (t, h) @ (h, heads d_rel) and the bank's (t heads, d_rel) @ (d_rel, extent)
    (InklingRelativeLogits.forward materializes every distance densely before its gather)."""
    m, h = spec.extras.conv_relative, spec.hidden
    out = {}
    if m.kv_conv:
        out["attention/kv_conv"] = 2 * tokens * (spec.kv_width + spec.v_width) * m.conv_kernel
    out["attention/relative/proj"] = 2 * tokens * h * spec.heads * m.d_rel
    out["attention/relative/bank"] = 2 * tokens * spec.heads * m.d_rel * _extent(spec, block)
    if m.branch_conv:
        out["branch_conv"] = 2 * tokens * 2 * h * m.conv_kernel
    if block.moe and block.mlp:  # the extra router rows' GEMM (t, h) @ (h, shared)
        out["mlp/router_extra"] = 2 * tokens * h * m.router_extra_rows
    return out


def conv_relative_kept_elements(spec: "TransformerSpec", block: "Block") -> int:
    """Values per token eager autograd keeps for backward: each conv's input (k, v, and the two h-wide
    branch outputs), the relative states (heads d_rel) and their logits over every distance
    (heads x extent, read by the gather's backward)."""
    m, h = spec.extras.conv_relative, spec.hidden
    convs = (spec.kv_width + spec.v_width if m.kv_conv else 0) + (2 * h if m.branch_conv else 0)
    return convs + spec.heads * (m.d_rel + _extent(spec, block))
