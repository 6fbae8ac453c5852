"""HF config mapper of RecurrentGemma (Griffin; transformers 5.24 modeling_recurrent_gemma.py):
block_types cycled over the blocks, a recurrent block (`RecurrentGemmaRecurrentBlock`, the
`rglru` mixer) or local MQA/GQA attention over attention_window_size keys (q/k/v bias
attention_bias, o_proj always biased, half the head dims rotated); each block a temporal and a
channel RMSNorm (zero-centred: same count) and a GeGLU MLP of intermediate_size // 2 with
biases; embeddings scaled by sqrt(hidden), tied, the logits soft-capped."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import rotary_fraction
from modelplan.specs.hf_llama import compact_types, llama

_BLOCKS = {"recurrent": "rglru", "attention": "sliding_attention"}


def _recurrent_gemma(c: HFConfig) -> dict:
    """RecurrentGemmaForCausalLM (RecurrentGemmaConfig.layers_block_type: (block_types x 100)
    truncated to num_hidden_layers; head_dim = hidden // heads whatever the config says)."""
    layers, hidden, heads = c.size("num_hidden_layers"), c.size("hidden_size"), c.size("num_attention_heads")
    names = c.texts("block_types", None) or ["recurrent", "recurrent", "attention"]
    unknown = sorted(set(names) - set(_BLOCKS))
    if unknown:
        raise SpecError(f"{c.source}: block_types: unsupported {unknown} (supported: recurrent, attention)")
    if layers > 100 * len(names):
        raise SpecError(f"{c.source}: num_hidden_layers: {layers} exceeds 100 x len(block_types) "
                        f"(transformers builds at most {100 * len(names)} blocks)")
    types = compact_types([_BLOCKS[names[i % len(names)]] for i in range(layers)])
    width = c.integer("lru_width", None, nullable=True) or hidden
    fields = llama(c, kv_heads=c.integer("num_key_value_heads", None, nullable=True) or heads, head_dim=hidden // heads,
                   ffn_hidden=c.size("intermediate_size") // 2, mlp_bias=True, attn_out_bias=True,
                   activation=c.activation("gelu_pytorch_tanh", "hidden_activation"), norm_eps=c.number("rms_norm_eps", 1e-6),
                   tied_embeddings=c.flag("tie_word_embeddings", True), embedding_scale=hidden ** 0.5,
                   final_logit_softcap=c.number("logits_soft_cap", 30.0, nullable=True),
                   rotary_fraction=rotary_fraction(c, 0.5), layer_types=types,
                   rope_theta=c.number("rope_theta", 10000.0))
    if "sliding_attention" in (types or []):
        fields["sliding_window"] = c.integer("attention_window_size", 2048)
    if "rglru" in (types or []):
        fields["rglru"] = dict(width=width, heads=heads, conv_kernel=c.integer("conv1d_width", 4))
    return fields


RECURRENT_GEMMA_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"recurrent_gemma": _recurrent_gemma}
