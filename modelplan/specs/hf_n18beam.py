"""HF config mapper of Beam (transformers 5.24 BeamForCausalLM): GQA blocks whose attention output is
scaled by sigmoid(gate_proj(x) + gate_bias), a per-channel head gate with a learned per-head bias
(`TransformerSpec.head_gate`, `head_gate_bias`, counted in count/attention_extras.py)."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import layer_types, llama


def _beam(c: HFConfig) -> dict:
    """Beam (BeamForCausalLM, BeamConfig defaults): q/k RMSNorms over head_dim, gate_proj
    Linear(h, heads head_dim, bias=False) plus gate_bias (heads,); four sandwich RMSNorms a block
    (input, post_attention, pre_feedforward, post_feedforward); default pattern sliding except
    every sixth block and the last (full, NoPE: rotary counted there too, an element-wise op);
    a dense SwiGLU where mlp_layer_types says dense (default: the first three blocks), else
    DeepSeek-V3's router (sigmoid, e_score_correction_bias a buffer, n_group / topk_group) over
    bias-free experts, no shared expert, x routed_scaling_factor; final_logit_softcapping.
    The depth-scaled residual adds (1/sqrt(i), sqrt((i-1)/i)) are weight-free element-wise."""
    layers = c.size("num_hidden_layers")
    default = ["full_attention" if not (i + 1) % 6 or i == layers - 1 else "sliding_attention"
               for i in range(layers)]
    types = layer_types(c, layers, default)
    mlp_types = c.texts("mlp_layer_types", None) or ["dense"] * min(3, layers) + ["sparse"] * max(0, layers - 3)
    c.check_names("mlp_layer_types", mlp_types, ("dense", "sparse"), layers)
    sparse = [i for i, t in enumerate(mlp_types) if t == "sparse"]
    moe = None
    if sparse:
        moe = dict(num_experts=c.integer("num_experts", 256), top_k=c.integer("num_experts_per_tok", 8),
                   expert_ffn_hidden=c.integer("moe_intermediate_size", 2560), router="sigmoid",
                   router_score_correction=True, norm_topk_prob=c.flag("norm_topk_prob", True),
                   routed_scaling=c.number("routed_scaling_factor", 2.5, positive=True),
                   router_groups=c.integer("n_group", 8, nullable=True) or 1,
                   router_group_top_k=c.integer("topk_group", 4, nullable=True) or 1,
                   expert_bias=False, layers=sparse)
    return llama(c, kv_heads=c.integer("num_key_value_heads", 8), head_dim=c.integer("head_dim", 128),
                 max_positions=c.integer("max_position_embeddings", 8192), qk_norm=True, layer_types=types,
                 norm_placement="sandwich", head_gate="element", head_gate_bias=True, moe=moe,
                 final_logit_softcap=c.number("final_logit_softcapping", 30.0, nullable=True),
                 sliding_window=c.integer("sliding_window", 512, nullable=True)
                 if types and "sliding_attention" in types else None)


N18BEAM_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"beam": _beam}
