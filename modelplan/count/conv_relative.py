"""Exact parameters, forward FLOPs and kept activation bytes of Inkling's short convolutions and
relative logits and Inkling 2's additions (`modelplan.specs.conv_relative.ConvRelativeSpec`), keyed
relative to the block:

    attention/{kv_conv, relative/proj, relative/bank, relative/scale, q_scale, sink_proj, input_norms},
    branch_conv, pools, mlp/{global_scale, router_extra}

transformers 5.24 modeling_inkling.py / modeling_inkling2.py: a short convolution is nn.Conv1d(c, c,
L, groups=c, bias=False), weight (c, 1, L) (Inkling2DynamicShortConvolution: static_weight (L, c) and
weight_proj Linear(h, kv_heads L)); r_proj / relative_position_bias.linear is Linear(h, heads d_rel,
bias=False); the bank (relative_position_bias.proj) is (d_rel, extent). Called with the block's own
spec (its layer type's heads, kv heads and head_dim: specs/attention_shape.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.specs.transformer import TransformerSpec


def _spec(spec: "TransformerSpec"):
    x = spec.extras
    return x.conv_relative if x is not None else None


def pooled_residuals(spec: "TransformerSpec") -> bool:
    """The stack uses Inkling 2's attention residuals (block 0 then has no pooled attention input)."""
    m = _spec(spec)
    return m is not None and m.pool_block_layers is not None


def in_loop(spec: "TransformerSpec", index: int) -> bool:
    """Block `index` sits in Inkling 2 Loop's looped range."""
    m = _spec(spec)
    return m is not None and m.loop_start <= index < m.loop_end


def block_passes(spec: "TransformerSpec", block: "Block") -> int:
    """Times a block of kind `block` runs per forward: loop_passes for a looped block, else 1."""
    return spec.extras.conv_relative.loop_passes if block.looped else 1


def final_pool_params(spec: "TransformerSpec") -> int:
    """Inkling2TextModel.final_input: one h-wide query pooling the final norm's input."""
    return spec.hidden if pooled_residuals(spec) else 0


def _extent(spec: "TransformerSpec", block: "Block") -> int:
    """Backward distances the relative bias spans (InklingAttention.rel_extent: the window in
    sliding blocks)."""
    m = _spec(spec)
    return m.sliding_rel_extent if block.mixer == "sliding_attention" else m.rel_extent


def _dynamic(spec: "TransformerSpec", block: "Block") -> bool:
    """Inkling 2's full blocks' k/v convs take per-token taps."""
    return _spec(spec).dynamic_kv_conv and block.mixer == "full_attention"


def _pool_queries(spec: "TransformerSpec", block: "Block") -> int:
    """Learned queries of one block's pools: the MLP input's, plus the attention input's (1 in
    sliding blocks, 3 in full ones: Inkling2FullDecoderLayer pools q, k and v inputs; none in block 0)."""
    attention = 0 if block.no_input_pool else (3 if block.mixer == "full_attention" else 1)
    return 1 + attention


def conv_relative_params(spec: "TransformerSpec", block: "Block") -> dict[str, int]:
    """One block's parameters."""
    m, h = _spec(spec), spec.hidden
    out = {}
    if m.kv_conv:  # k_sconv, v_sconv: depthwise over kv_heads x head_dim each
        out["attention/kv_conv"] = (spec.kv_width + spec.v_width) * m.conv_kernel
        if _dynamic(spec, block):  # weight_proj: Linear(h, kv_heads L, bias=False), for k and v
            out["attention/kv_conv"] += 2 * h * spec.num_kv_heads * m.conv_kernel
    out["attention/relative/proj"] = h * spec.heads * m.d_rel  # r_proj: Linear(h, heads d_rel)
    out["attention/relative/bank"] = m.d_rel * _extent(spec, block)  # rel_logits_proj.proj (d_rel, extent)
    if m.clip_scales:  # Inkling2ScaledL2Clip.scale: (heads, head_dim) on q, (heads, d_rel) on the relative states
        out["attention/q_scale"] = spec.q_width
        out["attention/relative/scale"] = spec.heads * m.d_rel
    if m.sink_proj:  # sink_proj: Linear(h, heads, bias=False)
        out["attention/sink_proj"] = h * spec.heads
    if m.branch_conv:  # attn_sconv, mlp_sconv: depthwise over h each
        out["branch_conv"] = 2 * h * m.conv_kernel
    if m.pool_block_layers is not None:  # Inkling2BlockAttentionResidual.query: (queries, h)
        out["pools"] = _pool_queries(spec, block) * h
        if block.mixer == "full_attention":  # q/k/v_input_layernorm replace input_layernorm: 2 more
            out["attention/input_norms"] = 2 * h
    if block.looped:  # Inkling2LoopMessageGate x 4; message_input.query[i]: (4, h)
        out["message_gates"] = 4 * (2 * h * m.loop_gate_rank + 2 * m.loop_gate_rank * h)
        out["pools"] = out.get("pools", 0) + 4 * h
    if block.mlp:
        out["mlp/global_scale"] = 1 if m.mlp_scale else 0  # InklingMLP / InklingTopkRouter.global_scale: (1,)
        if block.moe:  # InklingTopkRouter.weight: (n_routed + n_shared, h)
            out["mlp/router_extra"] = m.router_extra_rows * h
    return out


def pool_sources(spec: "TransformerSpec") -> int:
    """Sources one pool attends over, averaged over the blocks: the block states so far (one more
    every pool_block_layers blocks, Inkling2TextModel.forward) and the partial state; rounded down."""
    n, layers = _spec(spec).pool_block_layers, spec.layers
    return sum(-(-i // n) + 1 for i in range(layers)) // layers


def conv_relative_flops(spec: "TransformerSpec", block: "Block", tokens: int) -> dict[str, int]:
    """Forward FLOPs: the depthwise convs L multiply-adds a channel and token (as count/short_conv.py),
    r_proj's GEMM (t, h) @ (h, heads d_rel) and the bank's (t heads, d_rel) @ (d_rel, extent)
    (InklingRelativeLogits.forward materializes every distance densely before its gather); Inkling 2's
    weight_proj and sink_proj GEMMs and each pool's scores and mix, 2 x 2 t q S h over S sources
    (`pool_sources`); scales and clips are element-wise (not counted)."""
    m, h = _spec(spec), spec.hidden
    out = {}
    if m.kv_conv:
        out["attention/kv_conv"] = 2 * tokens * (spec.kv_width + spec.v_width) * m.conv_kernel
        if _dynamic(spec, block):
            out["attention/kv_conv"] += 2 * tokens * h * 2 * spec.num_kv_heads * m.conv_kernel
    out["attention/relative/proj"] = 2 * tokens * h * spec.heads * m.d_rel
    out["attention/relative/bank"] = 2 * tokens * spec.heads * m.d_rel * _extent(spec, block)
    if m.sink_proj:
        out["attention/sink_proj"] = 2 * tokens * h * spec.heads
    if m.branch_conv:
        out["branch_conv"] = 2 * tokens * 2 * h * m.conv_kernel
    if m.pool_block_layers is not None:
        out["pools"] = 4 * tokens * _pool_queries(spec, block) * pool_sources(spec) * h
    if block.moe and block.mlp:  # the extra router rows' GEMM (t, h) @ (h, shared)
        out["mlp/router_extra"] = 2 * tokens * h * m.router_extra_rows
    return out


def loop_message_flops(spec: "TransformerSpec", block: "Block", tokens: int) -> dict[str, int]:
    """The message path of a looped block, in passes 2 .. loop_passes: message_input's 4 queries over
    the previous pass's sources (2 x 2 t 4 S h) and the four gates' GEMMs, (t, 2h) @ (2h, r) and two
    (t, r) @ (r, h) each (Inkling2LoopTextModel.forward, Inkling2LoopMessageGate)."""
    m, h = _spec(spec), spec.hidden
    later = block_passes(spec, block) - 1
    if later < 1:
        return {}
    pool = 4 * tokens * 4 * pool_sources(spec) * h
    return {"message_gates": later * (4 * 2 * tokens * 4 * h * m.loop_gate_rank + pool)}


def conv_cache_elements(spec: "TransformerSpec", block: "Block") -> int:
    """Per-sequence inference state of one block's short convolutions, whatever the length: each keeps
    its last conv_kernel_size inputs a channel (transformers' LinearAttentionCacheLayer.update_conv_state
    pads its conv_states to the kernel; InklingTextConfig.number_of_conv_states = 4)."""
    m = _spec(spec)
    if m is None:
        return 0
    channels = (spec.kv_width + spec.v_width if m.kv_conv else 0) + (2 * spec.hidden if m.branch_conv else 0)
    return channels * m.conv_kernel


def conv_relative_kept_elements(spec: "TransformerSpec", block: "Block") -> int:
    """Values per token eager autograd keeps for backward: each conv's input (k, v, and the two h-wide
    branch outputs), the relative states (heads d_rel) and their logits over every distance
    (heads x extent, read by the gather's backward); Inkling 2's pools keep their normed sources
    (S h each) and the sinks (heads)."""
    m, h = _spec(spec), spec.hidden
    convs = (spec.kv_width + spec.v_width if m.kv_conv else 0) + (2 * h if m.branch_conv else 0)
    pools = _pool_queries(spec, block) * pool_sources(spec) * h if m.pool_block_layers is not None else 0
    return convs + spec.heads * (m.d_rel + _extent(spec, block) + int(m.sink_proj)) + pools
