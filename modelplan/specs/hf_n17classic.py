"""HF config mappers of classic families transformers 5.24 ships (the RoBERTa family is
hf_roberta.py): the BERT-shaped encoders ernie and megatron-bert (pre-LN, final LayerNorm); the
GPT-style decoders openai-gpt, xglm, ctrl; the composites llava_next_video, llava_onevision,
vipllava; and the classic types refused with the mechanism the spec lacks."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS, GPT_STYLE
from modelplan.specs.hf_roberta import ROBERTA_MAPPERS

_bert = GPT_MAPPERS["bert"]


def _ernie(c: HFConfig) -> dict:
    """ErnieModel: BertModel's shapes; the optional task-type embedding (use_task_id) is refused."""
    if c.flag("use_task_id", False):
        raise SpecError(f"{c.source}: use_task_id: true is not supported (ERNIE's task_type_embeddings "
                        "table is not modelled)")
    return _bert(c)


def _openai_gpt(c: HFConfig) -> dict:
    """OpenAIGPTModel (GPT-1): post-LN GPT-2 blocks, learned positions, no embedding or final
    norm, head without bias, tied unless tie_word_embeddings is false (OpenAIGPTLMHeadModel._tied_weights_keys,
    transformers 5.24 modeling_openai.py)."""
    hidden = c.size("n_embd", "hidden_size")
    return dict(
        layers=c.size("n_layer", "num_hidden_layers"), hidden=hidden, heads=c.size("n_head", "num_attention_heads"),
        ffn_hidden=4 * hidden, vocab=c.size("vocab_size"), max_positions=c.integer("n_positions", 512),
        position="learned", **GPT_STYLE, norm_placement="post", norm_eps=c.number("layer_norm_epsilon", 1e-5),
        activation=c.activation("gelu", "afn"), final_norm=False, tied_embeddings=c.flag("tie_word_embeddings", True),
        dropout=c.dropout(0.1, "resid_pdrop", "embd_pdrop", "attn_pdrop"),
    )


def _xglm(c: HFConfig) -> dict:
    """XGLM: pre-LN blocks with biased q/k/v/out and fc1/fc2, sinusoidal positions (a buffer, no
    parameters), final LayerNorm, tied head without bias."""
    return dict(
        layers=c.size("num_layers"), hidden=c.size("d_model"), heads=c.size("attention_heads"),
        ffn_hidden=c.size("ffn_dim"), vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 2048), position="none", **GPT_STYLE,
        norm_eps=1e-5, activation=c.activation("gelu", "activation_function"),
        tied_embeddings=c.flag("tie_word_embeddings", True),
        dropout=c.dropout(0.1, "dropout", "attention_dropout", "activation_dropout"),
    )


def _ctrl(c: HFConfig) -> dict:
    """CTRL: pre-LN blocks (biased Wq/Wk/Wv/dense, dff MLP with ReLU), sinusoidal positions (a
    buffer), final LayerNorm, head tied to the embeddings with its own vocab bias."""
    return dict(
        layers=c.size("n_layer"), hidden=c.size("n_embd"), heads=c.size("n_head"), ffn_hidden=c.size("dff"),
        vocab=c.size("vocab_size"), max_positions=c.integer("n_positions", 256), position="none", **GPT_STYLE,
        norm_eps=c.number("layer_norm_epsilon", 1e-6), activation="relu",
        tied_embeddings=c.flag("tie_word_embeddings", True), lm_head_bias=True,
        dropout=c.dropout(0.1, "resid_pdrop", "embd_pdrop"),
    )


CLASSIC_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    # MegatronBertModel: XLM-RoBERTa-XL's shapes (pre-LN blocks, final LayerNorm, no embedding LayerNorm)
    "megatron-bert": ROBERTA_MAPPERS["xlm-roberta-xl"],
    "ernie": _ernie, "openai-gpt": _openai_gpt, "xglm": _xglm, "ctrl": _ctrl,
}

CLASSIC_UNMODELLED: dict[str, str] = {
}
"""Classic families transformers 5.24 ships that the spec cannot yet express exactly."""


def _llava_newline(c: HFConfig, text_mappers: dict) -> dict:
    """LLaVA-NeXT-Video / LLaVA-OneVision: LLaVA-NeXT's parameters (tower, two-layer projector,
    image_newline); the video pooling (vision_resampler / bilinear resize) holds no weights."""
    from modelplan.specs.hf_vision import VISION_MAPPERS

    return VISION_MAPPERS["llava_next"](c, text_mappers)


def _vipllava(c: HFConfig, text_mappers: dict) -> dict:
    """VipLLaVA: LLaVA's tower and projector over the concatenated vision_feature_layer outputs
    (class token dropped), with VipLlavaMultiModalProjector's LayerNorm before linear_1."""
    from modelplan.specs.hf_vision import VISION_MAPPERS

    layers = c.data.get("vision_feature_layer", c.data.get("vision_feature_layers", [-2, -5, -8, -11, 6]))
    data = {**c.data, "vision_feature_layer": layers, "vision_feature_select_strategy": "default",
            "multimodal_projector_bias": True}
    fields = VISION_MAPPERS["llava"](HFConfig(data, c.source, c.path), text_mappers)
    first = fields["vision"]["connector"][0]
    norm = dict(name="projector_layernorm", kind="layernorm", in_features=first["in_features"], bias=True,
                merge=1, copies=1, row_offset=first["row_offset"])
    fields["vision"]["connector"] = [norm, *fields["vision"]["connector"]]
    return fields


CLASSIC_VISION_MAPPERS: dict[str, Callable[[HFConfig, dict], dict]] = {
    "llava_next_video": _llava_newline, "llava_onevision": _llava_newline, "vipllava": _vipllava,
}
"""Composites read whole, each taking the config and the text model_type -> mapper table."""
