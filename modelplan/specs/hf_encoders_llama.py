"""HF config mappers of the Llama- and ModernBERT-shaped encoders (transformers 5.24 modeling code):
esmc (LayerNorms with and without bias), ultrabert (a bidirectional sliding window, its prediction
head) and the vision composites modernvbert and ultravbert (a SigLIP tower and Idefics3's
pixel-shuffle connector beside ModernBERT / Ultrabert), with their heads."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_side import linear
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_encoder_fields import defaulted, with_side


def _esmc(c: HFConfig) -> dict:
    """EsmcModel (ESM C): Llama's modules (q/k/v/o and gated MLP bias-free, rotary) attending both
    ways with LayerNorms: input / post-attention EsmcLayerNorm with bias, q_norm / k_norm over the
    whole projection and the final norm without (their biases as a side group, norm_bias false), no
    embedding norm."""
    from modelplan.specs.hf_llama import llama

    kv = c.integer("num_key_value_heads", None, nullable=True)
    if kv is not None and kv != c.size("num_attention_heads"):
        raise SpecError(f"{c.source}: num_key_value_heads: {kv} != num_attention_heads ({c.size('num_attention_heads')}):"
                        f" ESMC has no grouped-query attention (EsmcConfig refuses it too)")
    fields = {**llama(defaulted(c, max_position_embeddings=2048)), "arch": "encoder", "norm": "layernorm",
              "norm_bias": False, "norm_eps": 1e-5, "qk_norm": True, "qk_norm_scope": "all_heads"}
    return with_side(fields, block=[dict(name="norm_biases", params=2 * fields["hidden"])])  # the two block LayerNorms' biases


def _ultrabert(c: HFConfig) -> dict:
    """UltrabertModel: Llama's blocks (RMSNorm, rotary, gated MLP, GQA) attending both ways, its
    sliding_attention blocks (every block but each third by default, layer_types) seeing the keys
    within sliding_window on either side (create_bidirectional_sliding_window_mask: |i - j| <=
    sliding_window), the final norm."""
    from modelplan.specs.hf_llama import llama

    fields = {**llama(defaulted(c, max_position_embeddings=32768)), "arch": "encoder"}
    layers, window = fields["layers"], c.integer("sliding_window", 128)
    kinds = c.texts("layer_types", None) or ["sliding_attention" if (i + 1) % 3 else "full_attention"
                                             for i in range(layers)]
    rope = c.sub("rope_parameters")
    full = rope.sub("full_attention") if rope is not None and rope.has("full_attention") else rope
    theta = full.number("rope_theta", 2560000.0) if full is not None else 2560000.0  # UltrabertConfig's full_attention base
    return {**fields, "layer_types": kinds, "sliding_window": 2 * window + 1, "rope_theta": theta}


def _shuffled_siglip(c: HFConfig, fields: dict, use_head: bool, norm: bool) -> dict:
    """`fields` (the text encoder) with vision_config's SigLIP tower (biased patch conv, a position per
    patch, post_layernorm, the attention-pooling head under vision_use_head) and a connector that
    pixel-shuffles its patches by pixel_shuffle_factor s, projects them, modality_projection
    Linear(h_v s^2, h, bias=False) (Idefics3's connector, `hf_vision._idefics3`), then with `norm` an
    RMSNorm(h); lm_head tied as the composite's tie_word_embeddings says."""
    from modelplan.specs.hf_vision import _linear

    v = c.sub("vision_config", {})
    s2 = c.integer("pixel_shuffle_factor", 4) ** 2
    h = v.integer("hidden_size", 768)
    connector = [_linear("modality_projection", h * s2, fields["hidden"], False, s2)]
    if norm:  # UltraVBertConnector.norm
        connector.append(dict(name="norm", kind="rmsnorm", in_features=fields["hidden"], merge=s2))
    fields["vision"] = dict(
        layers=v.integer("num_hidden_layers", 12), hidden=h, heads=v.integer("num_attention_heads", 12),
        ffn_hidden=v.integer("intermediate_size", 3072), patch_size=v.integer("patch_size", 16),
        image_size=v.integer("image_size", 224), channels=v.integer("num_channels", 3), pre_norm=False,
        post_norm=True, projector_norm=False, pooling_head=v.flag("vision_use_head", use_head), connector=connector)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


def _text_config(c: HFConfig) -> HFConfig:
    return c.sub("text_config") or HFConfig({}, c.source, "text_config.")


def _modernvbert(c: HFConfig) -> dict:
    """ModernVBertModel: a ModernBERT text encoder (text_config, `hf_encoders._modernbert`) beside a
    SigLIP tower with its pooling head (`_shuffled_siglip`)."""
    from modelplan.specs.hf_encoders import ENCODER_MAPPERS

    return _shuffled_siglip(c, ENCODER_MAPPERS["modernbert"](_text_config(c)), use_head=True, norm=False)


def _ultravbert(c: HFConfig) -> dict:
    """UltraVBertModel: an Ultrabert text encoder (text_config, `_ultrabert`) beside a SigLIP tower
    without its pooling head and a connector ending in an RMSNorm (`_shuffled_siglip`)."""
    return _shuffled_siglip(c, _ultrabert(_text_config(c)), use_head=False, norm=True)


def _esmc_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """EsmcForMaskedLM (also without `architectures`): EsmcMaskedLMHead, dense h x h with bias, GELU,
    LayerNorm(h) with bias (its bias a side group), decoder Linear(h, vocab) with bias, never tied (no
    _tied_weights_keys); EsmcModel bare; ...ForSequenceClassification: EsmcClassificationHead on the
    first token (dense + out_proj: a pooler and a classifier); ...ForTokenClassification: a biased
    Linear(h, num_labels) on every token."""
    name = architecture(c) or "EsmcForMaskedLM"
    if name.endswith("ForMaskedLM"):
        fields = {**fields, "lm_head": True, "mlm_transform": True, "lm_head_bias": True}
        side = {**fields["extras"]["side"], "head": [dict(name="transform_norm_bias", params=fields["hidden"])]}
        return {**fields, "extras": {**fields["extras"], "side": side, "head_untied": True}}  # declares no tied weights
    if name.endswith(("EsmcModel", "ForSequenceClassification", "ForTokenClassification")):
        return apply_head({**fields, "pooler": False}, c, name)
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for esmc (EsmcForMaskedLM, EsmcModel, "
                    f"...ForSequenceClassification, ...ForTokenClassification)")


def _ultrabert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """UltrabertForMaskedLM (also without `architectures`): UltrabertPredictionHead, linear1 Linear(h, p)
    and linear2 Linear(p, h) bias-free (p = prediction_head_size), decoder Linear(h, vocab) bias-free,
    tied as tie_word_embeddings says; UltrabertModel bare; ...ForSequenceClassification: classifier
    Linear(h, num_labels) with bias on the pooled cls / mean row; ...ForTokenClassification and
    ...ForQuestionAnswering (Linear(h, 2)) on every token."""
    name = architecture(c) or "UltrabertForMaskedLM"
    bare = {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    if name.endswith("ForMaskedLM"):  # UltraVBert: its text_config's prediction_head_size
        p = (c.sub("text_config") or c).integer("prediction_head_size", 768)
        h = fields["hidden"]
        head = [linear("prediction/linear1", h, p, bias=False), linear("prediction/linear2", p, h, bias=False)]
        return with_side({**fields, "lm_head": True, "lm_head_bias": False}, head=head)
    if name.endswith("Model"):
        return bare
    if name.endswith("ForSequenceClassification"):
        return {**bare, "classifier": {"num_labels": c.num_labels()}}
    if name.endswith(("ForTokenClassification", "ForQuestionAnswering")):
        labels = 2 if name.endswith("ForQuestionAnswering") else c.num_labels()  # GenericForQuestionAnswering: Linear(h, 2)
        return {**bare, "classifier": {"num_labels": labels, "per_token": True}}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for ultrabert (UltrabertForMaskedLM, "
                    f"UltrabertModel, ...ForSequenceClassification, ...ForTokenClassification, ...ForQuestionAnswering)")


def _modernvbert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """ModernBERT's heads (`hf_encoders._modernbert_head`) under ModernVBert's class names."""
    from modelplan.specs.hf_encoders import ENCODER_HEADS

    return ENCODER_HEADS["modernbert"](fields, c, apply_head, architecture)


LLAMA_ENCODER_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "esmc": _esmc, "ultrabert": _ultrabert, "modernvbert": _modernvbert, "ultravbert": _ultravbert,
}

LLAMA_ENCODER_HEADS: dict[str, Callable[..., dict]] = {
    "esmc": _esmc_head, "ultrabert": _ultrabert_head, "modernvbert": _modernvbert_head, "ultravbert": _ultrabert_head,
}
"""Types whose head classes `hf.apply_head` would misread."""
