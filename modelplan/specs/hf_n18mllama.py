"""HF config mapper of Llama 3.2 Vision (`mllama`, MllamaForConditionalGeneration, transformers 5.24
models/mllama/modeling_mllama.py).

Every text block maps onto a Llama block: a gated cross-attention block
(MllamaCrossAttentionDecoderLayer) has a Llama block's q / k / v / o, norms and MLP, plus q_norm /
k_norm and two scalar gates, which (with the 8 extra embedding rows, the tiled tower's global
encoder, gated position / tile embeddings and the projector) are `VisionSpec.connector`
parameter groups. The parameter total is exact. FLOPs approximation: a cross-attention block is
priced as a causal self-attention block over the text tokens (its k / v really run over the image
states and its scores over text x image positions).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18vlm_base import Mapper
from modelplan.specs.hf_vision import _linear, _norm

_TEXT = {"vocab_size": 128256, "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32,
         "num_key_value_heads": 8, "intermediate_size": 14336, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
         "max_position_embeddings": 131072, "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]}
"""MllamaTextConfig defaults (transformers 5.24 configuration_mllama.py)."""
_VISION = {"hidden_size": 1280, "num_hidden_layers": 32, "num_global_layers": 8, "attention_heads": 16,
           "num_channels": 3, "intermediate_size": 5120, "vision_output_dim": 7680, "image_size": 448,
           "patch_size": 14, "max_num_tiles": 4,
           "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]]}
"""MllamaVisionConfig defaults (transformers 5.24 configuration_mllama.py)."""


def _vec(name: str, n: int, copies: int = 1) -> dict:
    return dict(name=name, kind="vector", in_features=n, copies=copies)


def _sub(c: HFConfig, key: str, defaults: dict) -> HFConfig:
    raw = c.data.get(key) or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: {key}: expected an object, got {raw!r}")
    data = {**defaults, **{k: v for k, v in raw.items() if v is not None}}
    if "num_attention_heads" in raw and "attention_heads" not in raw:  # MllamaVisionConfig attribute_map
        data["attention_heads"] = raw["num_attention_heads"]
    return HFConfig(data, c.source, f"{c.path}{key}.")


def _cross_extras(t: HFConfig, n: int) -> list[dict]:
    """What n MllamaCrossAttentionDecoderLayer hold beyond a Llama block (same bias-free q / k / v /
    o, input / post-attention RMSNorms and SwiGLU MLP): q_norm / k_norm RMSNorm(head_dim) and the
    scalar cross_attn_attn_gate / cross_attn_mlp_gate."""
    d = t.size("hidden_size") // t.size("num_attention_heads")
    return [_norm("cross/qk_norm", d, "rmsnorm", copies=2 * n), _vec("cross/gates", 1, 2 * n)]


def _mllama(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Llama 3.2 Vision: MllamaTextModel (Llama blocks, cross_attention_layers replaced by gated
    cross-attention blocks, Embedding(vocab_size + 8)), untied lm_head(vocab_size) (the class's
    _tied_weights_keys is commented out: the shapes differ), MllamaVisionModel (bias-free patch
    conv, class embedding, gated position embedding with its tile table, pre / post tile
    embeddings, layernorm_pre / post, a local and a gated global encoder) and
    multi_modal_projector Linear(vision_output_dim, text hidden, bias). MllamaForCausalLM holds the
    text model alone: its cross-attention extras and extra rows as a tower-free `vision` group."""
    t, v = _sub(c, "text_config", _TEXT), _sub(c, "vision_config", _VISION)
    layers, cross = t.size("num_hidden_layers"), t.data.get("cross_attention_layers")
    if not isinstance(cross, list) or not all(isinstance(i, int) and 0 <= i < layers for i in cross):
        raise SpecError(f"{c.source}: text_config.cross_attention_layers: expected indices below {layers}, got {cross!r}")
    n_cross = len(set(cross))
    keep = ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
            "rms_norm_eps", "max_position_embeddings", "rope_theta", "hidden_act")
    llama = {k: t.data[k] for k in keep if k in t.data}
    fields = text_mappers["llama"](HFConfig({**llama, "model_type": "llama", "num_hidden_layers": layers,
                                             "tie_word_embeddings": False}, t.source, t.path))
    th = fields["hidden"]
    h, ffn, heads = v.size("hidden_size"), v.size("intermediate_size"), v.size("attention_heads")
    p, side, tiles = v.size("patch_size"), v.size("image_size"), v.size("max_num_tiles")
    ratios = v.data.get("supported_aspect_ratios")
    if not isinstance(ratios, list) or not ratios:
        raise SpecError(f"{c.source}: vision_config.supported_aspect_ratios: expected a list, got {ratios!r}")
    rows, g = len(ratios) + 1, v.integer("num_global_layers", 8)
    patches = (side // p) ** 2 + 1
    connector = _cross_extras(t, n_cross) + [_vec("embed_tokens/extra_rows", 8 * th)]
    if (c.texts("architectures", None) or [""])[0] == "MllamaForCausalLM":  # MllamaTextModel + lm_head, no tower
        fields["vision"] = dict(layers=0, hidden=h, heads=1, ffn_hidden=1, patch_size=p, image_size=side,
                                channels=v.size("num_channels"), tower=connector, connector=[])
        return fields
    if g:  # MllamaVisionEncoderLayer(is_gated=True): biased fc1 / fc2, bias-free attention, gate_attn / gate_ffn
        connector += [_linear("global/qkv", h, h, False, copies=3 * g), _linear("global/o_proj", h, h, False, copies=g),
                      _norm("global/norms", h, copies=2 * g), _linear("global/fc1", h, ffn, True, copies=g),
                      _linear("global/fc2", ffn, h, True, copies=g), _vec("global/gates", 1, 2 * g)]
    connector += [_vec("gated_positional_embedding/gate", 1), _vec("tile_embedding", patches * h, rows * tiles),
                  _vec("pre_post_tile_positional_embedding", tiles * h, 2 * rows), _vec("pre_post_tile_gates", 1, 2),
                  _linear("multi_modal_projector", v.size("vision_output_dim"), th, True)]
    fields["vision"] = dict(layers=v.size("num_hidden_layers"), hidden=h, heads=heads, ffn_hidden=ffn, patch_size=p,
                            image_size=side, channels=v.size("num_channels"), patch_bias=False, qkv_bias=False,
                            attn_out_bias=False, mlp_bias=True, pre_norm=True, post_norm=True, class_token=True,
                            projector_norm=False, connector=connector)
    return fields


N18MLLAMA_MAPPERS = {"mllama": _mllama}
