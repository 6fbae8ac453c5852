"""The architectural features of a model, shrunk with it (`scale.scale_down`): every option the
model uses stays on, at sizes the small model runs in seconds and the plan splits exactly.

- head_dim: 4, or the smallest multiple of 4 whose rotary share is a whole even number of dims
  (partial rotary); MLA: latents of 4 (query) and 4 (KV), nope and value dims 4, rope dims 2;
- layer_types: one block of each mixer the model has, in order of first appearance, repeated, so
  two blocks already run a sliding and a global layer; the sliding window shrinks to 3 and the
  attention chunk to 4 keys of the 8-token sequence, so the band really masks;
- attention_scale keeps its ratio to 1/sqrt(head_dim) (Gemma's query_pre_attn_scalar);
  embedding_scale stays sqrt(hidden) when it was (Gemma), else keeps its value;
- MoE: its router options, biases and gate as they are; two router groups with one picked
  when the model groups its experts; explicit MoE layer lists become the last block (with an MLP);
  a model with mixer-free MLP blocks (Nemotron-H) keeps one block of each kind on every stage;
- Mamba: d_inner 2 hidden, state 4, dt_rank 2, conv kernel at most 4; Mamba-2: 4 tp heads of 2
  channels, 2 tp groups (1 stays 1), state 4, conv kernel at most 4; gated DeltaNet: tp key heads
  of 4 dims, value heads in the model's ratio (at most 2) of 2 dims;
- MTP: at most two modules; the vision tower is left out (`support.TEXT_ONLY`).
"""

from __future__ import annotations

import math

from modelplan.specs.blocks import MLASpec, MoESpec
from modelplan.specs.transformer import TransformerSpec

HEAD_DIM = 4
"""head_dim of every scaled-down model (even, for rotary), unless partial rotary needs more."""
SLIDING_WINDOW = 3
"""Keys a sliding-window query sees in the scaled-down model (of its 8-token sequence)."""
ATTENTION_CHUNK = 4


def head_dim(spec: TransformerSpec) -> int:
    """4, or the smallest multiple of 4 whose rotary share int(d * fraction) is even and >= 2."""
    if spec.position != "rotary" or spec.rotary_fraction == 1.0:
        return HEAD_DIM
    d = HEAD_DIM
    while int(d * spec.rotary_fraction) < 2 or int(d * spec.rotary_fraction) % 2:
        d += HEAD_DIM
    return d


def small_layer_types(spec: TransformerSpec) -> list[str] | None:
    """Each mixer of the model once, in order of first appearance (None stays None)."""
    if spec.layer_types is None:
        return None
    kinds: list[str] = []
    for kind in spec.layer_types:
        if kind not in kinds:
            kinds.append(kind)
    return kinds


def small_moe(src: MoESpec, layers: int, expert_ffn: int, ep: int, with_mlp: list[int] | None = None) -> MoESpec:
    """The MoE settings of the small model (sizes shrunk, routing options kept); `with_mlp`: the
    blocks that have an MLP (None: all), the last of which an explicit MoE layer list becomes."""
    experts = ep * -(-max(4, 2 * ep) // ep)
    first_dense = min(src.first_dense_layers, 1) if layers > 1 else 0
    grouped = src.router_groups > 1 and experts % 2 == 0
    explicit = None
    if src.layers is not None:
        explicit = [layers - 1] if layers > 1 else [0]
        if with_mlp:
            explicit = [with_mlp[-1]]
    return src.model_copy(update={
        "num_experts": experts, "top_k": min(src.top_k, 2), "expert_ffn_hidden": expert_ffn,
        "shared_experts": min(src.shared_experts, 1), "shared_expert_ffn_hidden": None,
        "layer_freq": min(src.layer_freq, max(1, layers - first_dense)), "first_dense_layers": first_dense,
        "layers": explicit, "router_groups": 2 if grouped else 1, "router_group_top_k": 1,
    })


def scaled_features(spec: TransformerSpec, hidden: int, dim: int, tp: int = 1) -> dict:
    """TransformerSpec field updates that keep each feature of `spec` on in a model of width
    `hidden` and head_dim `dim`."""
    out: dict = {"layer_types": small_layer_types(spec), "vision": None,
                 "mtp_layers": min(spec.mtp_layers, 2)}
    if spec.extras is not None and spec.extras.act_params:  # support.COUNT_ONLY: left out
        out["extras"] = spec.extras.model_copy(update={"act_params": 0})
    if spec.sliding_window is not None:
        out["sliding_window"] = min(spec.sliding_window, SLIDING_WINDOW)
    if spec.attention_chunk is not None:
        out["attention_chunk"] = min(spec.attention_chunk, ATTENTION_CHUNK)
    if spec.ssm is not None:
        out["ssm"] = spec.ssm.model_copy(update={"inner": 2 * hidden, "state_size": 4, "dt_rank": 2,
                                                 "conv_kernel": min(spec.ssm.conv_kernel, 4)})
    if spec.mamba2 is not None:
        heads = 4 * tp
        out["mamba2"] = spec.mamba2.model_copy(update={
            "heads": heads, "inner": 2 * heads, "groups": 1 if spec.mamba2.groups == 1 else 2 * tp, "state_size": 4,
            "conv_kernel": min(spec.mamba2.conv_kernel, 4), "chunk_size": 4})
    if spec.deltanet is not None:  # tp key heads, their value heads in the model's ratio (at most 2)
        g = spec.deltanet
        out["deltanet"] = g.model_copy(update={
            "key_heads": tp, "value_heads": tp * min(g.value_heads // g.key_heads, 2), "key_head_dim": 4,
            "value_head_dim": 2, "conv_kernel": min(g.conv_kernel, 4), "chunk_size": 4})
    if spec.mla is not None:
        out["mla"] = MLASpec(kv_lora_rank=4, q_lora_rank=None if spec.mla.q_lora_rank is None else 4,
                             qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4)
    old_default = (spec.mla.qk_head_dim if spec.mla is not None else spec.dim_head) ** -0.5
    if spec.attention_scale is not None:
        new_default = (out["mla"].qk_head_dim if spec.mla is not None else dim) ** -0.5
        out["attention_scale"] = spec.attention_scale / old_default * new_default
    if spec.embedding_scale is not None and math.isclose(spec.embedding_scale, math.sqrt(spec.hidden), rel_tol=1e-9):
        out["embedding_scale"] = math.sqrt(hidden)
    return out
