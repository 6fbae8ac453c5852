"""HF config mapper of ZAYA (transformers 5.24 modeling_zaya.py; `specs/cca.py`, count/cca.py):

- zaya (ZayaForCausalLM, ZayaConfig defaults, Zyphra/ZAYA1-8B): GQA blocks whose q and k pass
  compressed convolutional attention's depthwise and grouped convs (ZayaCCAProjection), values
  half current / half delayed, L2-normed q / k with a per-kv-head key temperature (ZayaQKNorm),
  partial rotary, optional sliding blocks ('hybrid_sliding'); every block's MLP top-1 routed over
  num_experts bias-free experts by a router MLP (ZayaRouter: router_hidden_size wide, one extra
  class that skips the MLP); learned scales and biases on both residual adds and on the
  embeddings (ZayaResidualScaling); tied embeddings by default, lm_head_bias.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import llama

_ZAYA = dict(vocab_size=262272, hidden_size=2048, num_hidden_layers=40, num_attention_heads=8, num_key_value_heads=2,
             head_dim=128, moe_intermediate_size=2048, num_experts=16, num_experts_per_tok=1, router_hidden_size=256,
             cca_time0=2, cca_time1=2, max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=True,
             lm_head_bias=False, attention_bias=False)
"""ZayaConfig's defaults (transformers 5.24 configuration_zaya.py)."""

_TYPES = {"hybrid": "full_attention", "hybrid_sliding": "sliding_attention"}


def _rotary(c: HFConfig) -> float:
    """partial_rotary_factor of the 'hybrid' rope parameters (ZayaConfig's default 0.5)."""
    rope = c.sub("rope_parameters")
    hybrid = rope.sub("hybrid") if rope is not None else None
    if hybrid is not None and hybrid.has("partial_rotary_factor"):
        return hybrid.number("partial_rotary_factor")
    return c.number("partial_rotary_factor", 0.5) if c.data.get("partial_rotary_factor") is not None else 0.5


def _zaya(c: HFConfig) -> dict:
    """ZayaForCausalLM: CCA attention, MLP-routed top-1 experts, learned residual scales."""
    data = {**_ZAYA, **{k: v for k, v in c.data.items() if v is not None}}
    c = HFConfig({**data, "intermediate_size": data["moe_intermediate_size"]}, c.source, c.path, c.defaults)
    layers = c.size("num_hidden_layers")
    names = c.texts("layer_types", None) or ["hybrid"] * layers
    c.check_names("layer_types", names, _TYPES, layers)
    top_k = c.integer("num_experts_per_tok", 1)
    if top_k != 1:
        raise SpecError(f"{c.source}: num_experts_per_tok: {top_k} (ZAYA routes each token to one expert: "
                        "ZayaConfig.validate_architecture)")
    types = [_TYPES[name] for name in names]
    sliding = "sliding_attention" in types
    moe = dict(num_experts=c.size("num_experts"), top_k=1, expert_ffn_hidden=c.size("moe_intermediate_size"),
               router="softmax", norm_topk_prob=False, expert_bias=False, router_mlp=c.size("router_hidden_size"))
    return llama(c, kv_heads=c.size("num_key_value_heads"), head_dim=c.size("head_dim"), ffn_hidden=0, moe=moe,
                 rotary_fraction=_rotary(c), tied_embeddings=c.flag("tie_word_embeddings", True),
                 lm_head_bias=c.flag("lm_head_bias", False), residual_affine=True,
                 cca=dict(depthwise_kernel=c.size("cca_time0"), grouped_kernel=c.size("cca_time1")),
                 layer_types=types if sliding else None,
                 sliding_window=c.size("sliding_window") if sliding else None)


CCA_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"zaya": _zaya}
