"""HF config mappers beyond plain decoders: the T5 encoder-decoder, Mamba and Jamba (state-space
and hybrid blocks), and the vision-language composites Gemma 3 and Mistral 3 (a nested
text_config mapped by its own model_type, plus the vision tower and projector)."""

from __future__ import annotations

import math
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import LLAMA_MAPPERS, compact_types, llama
from modelplan.specs.hf_moe import moe_placement


def _t5(c: HFConfig, ff: str = "relu") -> dict:
    """T5 / mT5 (T5ForConditionalGeneration): pre-norm RMS blocks (T5LayerNorm), no biases,
    relative position bias in the first block of each stack, cross-attention in the decoder,
    DenseReluDense or a gated wi_0/wi_1 MLP ('gated-gelu'), shared embedding."""
    proj = c.text("feed_forward_proj", ff)
    gated = proj.startswith("gated-")
    act = proj.removeprefix("gated-")
    return dict(
        arch="encoder_decoder",
        layers=c.size("num_layers", "num_hidden_layers"),
        decoder_layers=c.integer("num_decoder_layers", None),
        hidden=c.size("d_model", "hidden_size"),
        heads=c.size("num_heads", "num_attention_heads"),
        head_dim=c.integer("d_kv", 64, "head_dim"),
        ffn_hidden=c.size("d_ff"),
        vocab=c.integer("vocab_size", 32128),
        position="relative",
        relative_buckets=c.integer("relative_attention_num_buckets", 32),
        relative_max_distance=c.integer("relative_attention_max_distance", 128),
        norm="rmsnorm",
        norm_eps=c.number("layer_norm_epsilon", 1e-6),
        gated_mlp=gated,
        activation="gelu_tanh" if gated and act == "gelu" else _t5_activation(c, act),
        # transformers 5 T5Config forces tie_word_embeddings = True (lm_head tied to `shared`,
        # also for v1.1 / flan-t5 configs that say false, whose checkpoints ship a separate head)
        tied_embeddings=True,
        dropout=c.dropout(0.1, "dropout_rate"),
    )


def _t5_activation(c: HFConfig, name: str) -> str:
    kinds = {"relu": "relu", "gelu": "gelu", "silu": "silu", "gelu_new": "gelu_tanh"}
    if name not in kinds:
        raise SpecError(f"{c.source}: feed_forward_proj: unsupported '{name}' (relu, gelu, silu, gated-...)")
    return kinds[name]


def _t5_head(fields: dict, c: HFConfig) -> dict:
    """T5EncoderModel is the encoder stack alone (no decoder, no head)."""
    names = c.texts("architectures", None) or []
    if names and names[0].endswith("EncoderModel"):
        return {**fields, "arch": "encoder", "decoder_layers": None, "norm_placement": "pre",
                "lm_head": False, "tied_embeddings": False}
    return fields


def _ssm(c: HFConfig, hidden: int, prefix: str, jamba: bool) -> dict:
    """Mamba mixer sizes: d_inner = expand * hidden, dt_rank 'auto' = ceil(hidden / 16)."""
    key = f"{prefix}dt_rank" if jamba else "time_step_rank"
    rank = c.data.get(key, "auto")
    if rank == "auto":
        rank = math.ceil(hidden / 16)
    else:
        rank = c.integer(key)
    names = ("mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_proj_bias", "mamba_conv_bias") if jamba \
        else ("state_size", "conv_kernel", "expand", "use_bias", "use_conv_bias")
    return dict(
        state_size=c.integer(names[0], 16), conv_kernel=c.integer(names[1], 4),
        # MambaConfig keeps an explicit intermediate_size; Jamba's is its MLP width
        inner=c.integer(names[2], 2) * hidden if jamba else c.integer("intermediate_size", c.integer(names[2], 2) * hidden),
        dt_rank=rank, proj_bias=c.flag(names[3], False),
        conv_bias=c.flag(names[4], True), bc_dt_norm=jamba,
    )


def _mamba(c: HFConfig) -> dict:
    """Mamba (MambaForCausalLM): blocks of RMSNorm + mixer, no attention, no MLP, tied head."""
    hidden = c.size("hidden_size")
    return dict(
        layers=c.size("num_hidden_layers"), hidden=hidden, heads=1, vocab=c.size("vocab_size"),
        layer_types=["mamba"], ssm=_ssm(c, hidden, "", False), mlp=False, position="none",
        norm="rmsnorm", norm_eps=c.number("layer_norm_epsilon", 1e-5),
        tied_embeddings=c.flag("tie_word_embeddings", True),
    )


def _jamba(c: HFConfig) -> dict:
    """Jamba: one attention block per attn_layer_period (at attn_layer_offset), Mamba mixers
    with dt/B/C RMSNorms elsewhere; MoE MLPs every expert_layer_period (at its offset); no
    position encoding."""
    layers, hidden = c.size("num_hidden_layers"), c.size("hidden_size")
    period, offset = c.integer("attn_layer_period", 8), c.integer("attn_layer_offset", 4)
    e_period, e_offset = c.integer("expert_layer_period", 2), c.integer("expert_layer_offset", 1)
    if not 0 <= offset < period or not 0 <= e_offset < e_period:
        raise SpecError(f"{c.source}: attn/expert_layer_offset must be in [0, period) (got {offset}/{period}, "
                        f"{e_offset}/{e_period})")
    # JambaConfig.layers_block_type: attention where i % period == offset, over the model's blocks
    # (a period longer than the model is legal there; built over `layers`, it cannot run for ever)
    types = compact_types(["full_attention" if i % period == offset else "mamba" for i in range(layers)])
    experts = c.integer("num_experts", 16)
    moe = None
    if experts > 1:  # JambaSparseMoeBlock where layers_num_experts > 1, else JambaMLP
        moe = dict(num_experts=experts, top_k=c.integer("num_experts_per_tok", 2), norm_topk_prob=False,  # JambaTopKRouter
                   expert_ffn_hidden=c.size("intermediate_size"),
                   **moe_placement(layers, [i for i in range(layers) if i % e_period == e_offset]))
    return llama(c, position="none", layer_types=types, ssm=_ssm(c, hidden, "mamba_", True), moe=moe)


_SIGLIP = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
           "num_attention_heads": 12, "image_size": 224, "patch_size": 16}
_PIXTRAL = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
            "num_attention_heads": 16, "image_size": 1540, "patch_size": 14}
_GEMMA3_TEXT = {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4}
_MISTRAL3_TEXT = {"vocab_size": 131072, "hidden_size": 5120, "intermediate_size": 32768,
                  "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
                  "head_dim": 128}


def _vision(v: HFConfig, pixtral: bool, **projector) -> dict:
    """A SigLIP (LayerNorm, biases, fc1/fc2, post_layernorm, optional pooling head) or Pixtral
    (RMSNorm ln_pre, no biases, gated MLP, 2-D rotary) vision tower."""
    bias = not pixtral
    return dict(
        layers=v.size("num_hidden_layers"), hidden=v.size("hidden_size"),
        heads=v.size("num_attention_heads"), ffn_hidden=v.size("intermediate_size"),
        patch_size=v.size("patch_size"), image_size=v.size("image_size"),
        channels=v.integer("num_channels", 3), patch_bias=bias,
        position="rotary" if pixtral else "learned", norm="rmsnorm" if pixtral else "layernorm",
        norm_bias=bias, qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias, gated_mlp=pixtral,
        pre_norm=pixtral, post_norm=not pixtral,
        pooling_head=False if pixtral else v.flag("vision_use_head", True), **projector,
    )


def _composite(c: HFConfig, text_type: str, text_defaults: dict) -> tuple[dict, HFConfig]:
    """The text model of a vision-language config, mapped by text_config's own model_type."""
    text = c.sub("text_config", text_defaults)
    mapped_type = text.text("model_type", text_type)
    if mapped_type not in LLAMA_MAPPERS:
        raise SpecError(f"{c.source}: text_config.model_type: unsupported '{mapped_type}'")
    fields = LLAMA_MAPPERS[mapped_type](text)
    return fields, text


def _gemma3(c: HFConfig) -> dict:
    """Gemma 3 (Gemma3ForConditionalGeneration): Gemma 3 text model, SigLIP tower, projector
    (RMSNorm over the tower width + a bias-free tower -> text projection), tied head."""
    fields, _ = _composite(c, "gemma3_text", _GEMMA3_TEXT)
    vision = c.sub("vision_config", _SIGLIP)
    fields["vision"] = _vision(vision, False, projector_norm=True)
    fields["vision"]["pooled_tokens"] = c.integer("mm_tokens_per_image", 256)  # Gemma3MultiModalProjector avg pool
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


def _mistral3(c: HFConfig) -> dict:
    """Mistral 3 (Mistral3ForConditionalGeneration): Mistral text model, Pixtral tower, projector
    (RMSNorm, patch merger Linear(h m^2, h), linear_1, GELU, linear_2) as connector layers."""
    fields, _ = _composite(c, "mistral", _MISTRAL3_TEXT)
    if not isinstance(c.data.get("vision_feature_layer", -1), int):
        raise SpecError(f"{c.source}: vision_feature_layer: only a single layer index is supported")
    vision = c.sub("vision_config", _PIXTRAL)
    fields["vision"] = _vision(vision, True)
    h, t, m2 = fields["vision"]["hidden"], fields["hidden"], c.integer("spatial_merge_size", 2) ** 2
    bias = c.flag("multimodal_projector_bias", False)
    linear = dict(kind="linear", merge=m2)
    # Mistral3MultiModalProjector (transformers 5.24 modeling_mistral3.py): norm on every patch;
    # Mistral3PatchMerger.merging_layer is built even at spatial_merge_size 1 (a Linear(h, h))
    fields["vision"]["connector"] = [
        dict(name="norm", kind="rmsnorm", in_features=h),
        dict(name="merge", in_features=h * m2, out_features=h, bias=False, **linear),
        dict(name="proj", in_features=h, out_features=t, bias=bias, **linear),
        dict(name="proj2", in_features=t, out_features=t, bias=bias, **linear),
    ]
    # Mistral3Config.tie_word_embeddings defaults to true in transformers 5 (it decides, not the
    # text_config's false)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


OTHER_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "t5": lambda c: _t5_head(_t5(c), c), "mt5": lambda c: _t5_head(_t5(c, "gated-gelu"), c),
    # Falcon-Mamba: Mamba blocks whose B, C and dt RMS norms have no weight (no count change;
    # their arithmetic is not modelled)
    "mamba": _mamba, "falcon_mamba": _mamba, "jamba": _jamba, "gemma3": _gemma3, "mistral3": _mistral3,
}
