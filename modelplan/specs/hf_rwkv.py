"""HF config mapper of RWKV-4 (rwkv; transformers 5.24 modeling_rwkv.py): every block an
`rwkv` mixer (time and channel mixing, no separate MLP) behind two LayerNorms (ln1, ln2, with
biases), block 0's pre_ln on the embeddings, a final ln_out, an untied head by default."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig


def _rwkv(c: HFConfig) -> dict:
    """RwkvForCausalLM (RwkvConfig: attention_hidden_size default hidden, intermediate_size 4 hidden)."""
    hidden = c.size("hidden_size")
    attention = c.integer("attention_hidden_size", None, nullable=True) or hidden
    intermediate = c.integer("intermediate_size", None, nullable=True) or 4 * hidden
    return dict(
        layers=c.size("num_hidden_layers"), hidden=hidden, heads=1, vocab=c.size("vocab_size"),
        max_positions=c.integer("context_length", 1024), position="none", norm="layernorm", norm_bias=True,
        norm_eps=c.number("layer_norm_epsilon", 1e-5), mlp=False, norms_per_layer=2, embedding_norm=True,
        layer_types=["rwkv"], rwkv=dict(attention_hidden=attention, intermediate=intermediate),
        tied_embeddings=c.flag("tie_word_embeddings", False),
    )


RWKV_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"rwkv": _rwkv}
