"""HF config mapper of pi0 (transformers 5.24 modeling_pi0.py, PI0ForConditionalGeneration): the
PaliGemma model of vlm_config without its LM head (PaliGemmaModel: the Gemma text model as the
block stack, the SigLIP tower and projector, hf_n18vlm.py), beside a second Gemma decoder, the
action expert `dit` (GemmaModel of dit_config, its token table of the vlm text vocab_size rows,
PI0Config.__post_init__) and the flow-matching action / time embeddings (action_in_proj and
state_proj from max_action_dim / max_state_dim, action_time_mlp_in over 2 x the expert width,
action_time_mlp_out, action_out_proj back to max_action_dim, all biased). The action expert and
the embeddings are counted as `vector` entries (memory and optimizer state hold them); their
compute over the chunk_size action tokens is not priced."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import CLASS_DEFAULTS, Mapper

_VLM = {"model_type": "paligemma", "projection_dim": 2048, "image_token_id": 257152,
        "text_config": {"model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18, "intermediate_size": 16384,
                        "num_attention_heads": 8, "num_key_value_heads": 1, "vocab_size": 257152},
        "vision_config": {"model_type": "siglip_vision_model", "intermediate_size": 4304, "hidden_size": 1152,
                          "patch_size": 14, "image_size": 224, "num_hidden_layers": 27, "num_attention_heads": 16,
                          "vocab_size": 257152, "vision_use_head": False}}
_DIT = {"hidden_size": 1024, "num_hidden_layers": 18, "intermediate_size": 4096, "num_attention_heads": 8,
        "num_key_value_heads": 1, "head_dim": 256}
"""PI0Config.sub_configs_defaults init_kwargs (transformers 5.24), used when the sub-config is absent."""
_GEMMA_HEAD_DIM = 256
"""GemmaConfig.head_dim default (transformers 5.24)."""


def _sub(c: HFConfig, key: str, init_kwargs: dict, defaults: dict) -> HFConfig:
    """Absent: init_kwargs over the class defaults; present: its own keys over them (SubConfigSpec)."""
    raw = c.data.get(key)
    if raw is not None and not isinstance(raw, dict):
        raise SpecError(f"{c.source}: {key}: expected an object, got {raw!r}")
    return HFConfig({**defaults, **(init_kwargs if raw is None else raw)}, c.source, f"{key}.")


def _action_expert(d: HFConfig, vocab: int) -> list[dict]:
    """GemmaModel of dit_config: its token table, per block q / k / v / o (biased by
    attention_bias), GeGLU gate / up / down and two RMSNorms, the final RMSNorm."""
    h, f, layers = d.size("hidden_size"), d.size("intermediate_size"), d.integer("num_hidden_layers")
    heads = d.divisor("num_attention_heads")
    kv = d.integer("num_key_value_heads", heads, nullable=True) or heads
    hd = d.integer("head_dim", _GEMMA_HEAD_DIM, nullable=True) or _GEMMA_HEAD_DIM
    q, k = heads * hd, kv * hd
    bias = (q + 2 * k + h) if d.flag("attention_bias", False) else 0
    out = [_vec("action_expert/embed_tokens", h, vocab), _vec("action_expert/norm", h)]
    if layers:  # q, k, v from h and o into h; gate, up, down
        out += [_vec("action_expert/layers/attention", h, (2 * q + 2 * k) * layers),
                _vec("action_expert/layers/mlp", h, 3 * f * layers),
                _vec("action_expert/layers/norms_biases", 2 * h + bias, layers)]
    return out


def _pi0(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """PI0ForConditionalGeneration (module docstring)."""
    vlm = c.data.get("vlm_config")
    if vlm is not None and not isinstance(vlm, dict):
        raise SpecError(f"{c.source}: vlm_config: expected an object, got {vlm!r}")
    v = HFConfig({**(_VLM if vlm is None else vlm), "model_type": "paligemma"}, c.source, "vlm_config.")
    fields = text_mappers["paligemma"](v)
    fields.update(lm_head=False, tied_embeddings=False)  # PaliGemmaModel: no head
    d = _sub(c, "dit_config", _DIT, CLASS_DEFAULTS["gemma"])
    h, actions, states = d.size("hidden_size"), c.integer("max_action_dim", 32), c.integer("max_state_dim", 32)
    if actions <= 0 or states <= 0:
        raise SpecError(f"{c.source}: max_action_dim ({actions}) and max_state_dim ({states}) must be positive")
    fields["vision"]["connector"] += _action_expert(d, fields["vocab"]) + [
        _vec("embed_action_time/action_in_proj", actions + 1, h), _vec("embed_action_time/state_proj", states + 1, h),
        _vec("embed_action_time/action_time_mlp_in", 2 * h + 1, h),
        _vec("embed_action_time/action_time_mlp_out", h + 1, h), _vec("action_out_proj", h + 1, actions)]
    return fields


PI0_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"pi0": _pi0}
