"""HF config mapper of MiniMax-01 (minimax; transformers 5.24 modeling_minimax.py): Mixtral's
blocks (softmax top-k router renormalised, SwiGLU experts, no biases) whose mixer is lightning
attention (`MiniMaxLightningAttention`, the `lightning` layer type) where layer_types says
linear_attention and GQA softmax attention (over sliding_window keys when set) elsewhere. The
residual alpha / beta factors are scalars (no count)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import compact_types, llama


def _minimax(c: HFConfig) -> dict:
    """MiniMaxForCausalLM; layer_types default: full attention at even, lightning at odd blocks
    (MiniMaxConfig.__post_init__)."""
    layers, hidden, heads = c.size("num_hidden_layers"), c.size("hidden_size"), c.size("num_attention_heads")
    names = c.texts("layer_types", None) or ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(layers)]
    unknown = sorted(set(names) - {"full_attention", "linear_attention"})
    if unknown:
        raise SpecError(f"{c.source}: layer_types: unsupported {unknown} (supported: full_attention, linear_attention)")
    if len(names) != layers:
        raise SpecError(f"{c.source}: layer_types: {len(names)} entries for num_hidden_layers {layers}")
    window = c.integer("sliding_window", None, nullable=True)
    attention = "sliding_attention" if window else "full_attention"
    types = compact_types(["lightning" if t == "linear_attention" else attention for t in names])
    head_dim = c.integer("head_dim", None, nullable=True) or hidden // heads
    moe = dict(num_experts=c.integer("num_local_experts", 8), top_k=c.integer("num_experts_per_tok", 2),
               expert_ffn_hidden=c.size("intermediate_size"))
    fields = llama(c, kv_heads=c.integer("num_key_value_heads", heads), head_dim=head_dim,
                   norm_eps=c.number("rms_norm_eps", 1e-5), max_positions=c.integer("max_position_embeddings", 131072),
                   moe=moe, layer_types=types, sliding_window=window)
    if types is not None and "lightning" in types:
        fields["lightning"] = dict(heads=heads, head_dim=head_dim, block_size=c.integer("block_size", 256))
    return fields


MINIMAX_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"minimax": _minimax}
