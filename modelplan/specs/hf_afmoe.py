"""HF config mapper of Arcee's AFMoE (Trinity; transformers 5.24 modeling_afmoe.py): Llama-style
GQA with q/k RMSNorms over head_dim and a gated output (gate_proj Linear(h, heads x head_dim),
no bias: o_proj reads attn * sigmoid(gate)), sandwich norms (input, post_attention, pre_mlp,
post_mlp), sliding-window blocks with every global_attn_every_n_layers-th block global, a dense
SwiGLU in the first num_dense_layers blocks, then sigmoid-routed experts whose selection adds
`expert_bias` (a frozen nn.Parameter, so counted), always renormalised, x route_scale, beside
one shared SwiGLU of moe_intermediate_size x num_shared_experts."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import layer_types, llama


def _afmoe(c: HFConfig) -> dict:
    """AFMoE (AfmoeForCausalLM). Its global blocks apply no rotary; the spec's rotary on every
    block changes no count (the rope is a parameter-free, uncounted element-wise pass)."""
    if c.flag("attention_bias", False):  # the spec's gate would take q_proj's bias; gate_proj has none
        raise SpecError(f"{c.source}: attention_bias: true is not modelled for afmoe (its gate_proj has no bias)")
    layers, heads = c.size("num_hidden_layers"), c.size("num_attention_heads")
    every = c.integer("global_attn_every_n_layers", 4)
    if every < 1:
        raise SpecError(f"{c.source}: global_attn_every_n_layers: must be >= 1, got {every}")
    default = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)]
    types = layer_types(c, layers, default)
    window = c.integer("sliding_window", 1024) if types is not None and "sliding_attention" in types else None
    dense = c.integer("num_dense_layers", 1)
    moe = None
    if dense < layers:
        shared = c.integer("num_shared_experts", 2)
        inner = c.size("moe_intermediate_size")
        moe = dict(num_experts=c.integer("num_experts", 64), top_k=c.integer("num_experts_per_tok", 6),
                   expert_ffn_hidden=inner, router="sigmoid", router_score_correction=True,
                   score_correction_param=True, norm_topk_prob=True,
                   routed_scaling=c.number("route_scale", 1.0, positive=True), expert_bias=False,
                   shared_experts=1 if shared else 0, shared_expert_ffn_hidden=inner * shared if shared else None,
                   first_dense_layers=dense)
    hidden = c.size("hidden_size")
    return llama(c, kv_heads=c.integer("num_key_value_heads", heads), head_dim=c.integer("head_dim", 128),
                 norm_eps=c.number("rms_norm_eps", 1e-5), max_positions=c.integer("max_position_embeddings", 16384),
                 qk_norm=True, attention_output_gate=True, norm_placement="sandwich", layer_types=types,
                 sliding_window=window, moe=moe,
                 embedding_scale=hidden ** 0.5 if c.flag("mup_enabled", False) else None)  # muP input scaling


AFMOE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"afmoe": _afmoe}
