"""Which HuggingFace config.json key a TransformerSpec field came from, for error messages.

A config.json with `num_hidden_layers: 0` is refused by the spec's own check (`layers: Input
should be greater than 0`); the user edited `num_hidden_layers`, so the message also names that
key and its value. The key names are those of the HF config classes (LlamaConfig, GPT2Config,
MixtralConfig, DeepseekV3Config, T5Config, ...).
"""

from __future__ import annotations

import json
import re

# spec field -> the config.json keys that set it, in the HF config classes' spellings
SPEC_FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head", "num_heads"),
    "kv_heads": ("num_key_value_heads", "multi_query_group_num", "num_kv_heads"),
    "ffn_hidden": ("intermediate_size", "n_inner", "ffn_hidden_size", "d_ff", "ffn_dim"),
    "vocab": ("vocab_size",),
    "max_positions": ("max_position_embeddings", "n_positions", "seq_length"),
    "head_dim": ("head_dim", "kv_channels"),
    "moe.num_experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "moe.top_k": ("num_experts_per_tok", "moe_topk", "moe_k"),
    "moe.expert_ffn_hidden": ("moe_intermediate_size",),
    "norm_eps": ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"),
    "rotary_fraction": ("partial_rotary_factor", "rotary_pct"),
    "final_logit_softcap": ("final_logit_softcapping",),
    "attn_logit_softcap": ("attn_logit_softcapping",),
    "moe.shared_expert_ffn_hidden": ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
    "vision.hidden": ("vision_config.hidden_size",),
    "vision.heads": ("vision_config.num_attention_heads", "vision_config.num_heads"),
    "vision.layers": ("vision_config.num_hidden_layers", "vision_config.depth"),
    "vision.ffn_hidden": ("vision_config.intermediate_size",),
}
_FIELD = re.compile(r"(?<![\w.])(" + "|".join(re.escape(f) for f in sorted(SPEC_FIELD_KEYS, key=len,
                                                                          reverse=True)) + r")(?!\w)")


_NESTED = re.compile(r"\b(moe|vision|mla|mamba2): (\w+)(?![\w.])")
"""`moe: top_k (...)`, a nested spec's own check, spelled as the field path `moe.top_k`."""


def _present(data: dict, key: str) -> tuple[str, object] | None:
    """(`key` or `text_config.key`, its value) when the config holds it; a dotted key
    (`vision_config.hidden_size`) is looked up in that nested object."""
    if "." in key:
        outer, inner = key.split(".", 1)
        nested = data.get(outer)
        return (key, nested[inner]) if isinstance(nested, dict) and inner in nested else None
    if key in data:
        return key, data[key]
    text = data.get("text_config")
    if isinstance(text, dict) and key in text:
        return f"text_config.{key}", text[key]
    return None


def hf_keys_named(message: str, data: dict) -> str:
    """` (config.json: num_hidden_layers = 0)` for the spec fields `message` names, listing the
    config keys present in `data` that set them; empty when it names none."""
    found: dict[str, object] = {}
    for field in dict.fromkeys(_FIELD.findall(_NESTED.sub(r"\1.\2", message))):
        for key in SPEC_FIELD_KEYS[field]:
            hit = _present(data, key)
            if hit is not None:
                found.setdefault(hit[0], hit[1])
                break
    if not found:
        return ""
    return " (config.json: " + ", ".join(f"{k} = {json.dumps(v)[:40]}" for k, v in found.items()) + ")"
