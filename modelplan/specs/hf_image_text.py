"""HF config mappers of the image-text pairs CLIP (MetaCLIP 2, Chinese-CLIP), SigLIP and SigLIP 2:
the text tower as the block stack, the vision tower as the composites' `VisionSpec` (hf_vision,
hf_n18vlm_base) with the projection and logit scale as its connector; or their
...ForImageClassification, the vision model alone (hf_vision_models) with a classifier
(transformers 5.24 modeling_clip.py, modeling_metaclip_2.py, modeling_chinese_clip.py,
modeling_siglip.py, modeling_siglip2.py). Without `architectures`, the ...Model pair.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_n18vlm_base import _tower
from modelplan.specs.hf_vision import _clip
from modelplan.specs.hf_vision_models import (Mapper, architecture, clip_vision, labels, linear, siglip_vision,
                                               with_defaults)

HEADS: dict[str, tuple[str, ...]] = {
    "clip": ("CLIPModel", "CLIPForImageClassification"),
    "metaclip_2": ("MetaClip2Model", "MetaClip2ForImageClassification"),
    "chinese_clip": ("ChineseCLIPModel",),
    "clipseg": ("CLIPSegModel",),  # CLIPModel's modules; CLIPSegForImageSegmentation's decoder is not modelled
    "siglip": ("SiglipModel", "SiglipForImageClassification"),
    "siglip2": ("Siglip2Model", "Siglip2ForImageClassification"),
}
"""model_type -> the classes whose head is modelled; the first is the base model."""


def _vision_config(c: HFConfig, kinds: tuple[str, ...]) -> HFConfig:
    """vision_config (absent: {}), its model_type one of `kinds` when it states one."""
    raw = c.data.get("vision_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: vision_config: expected an object, got {raw!r}")
    v = HFConfig(raw, c.source, "vision_config.")
    kind = v.text("model_type", kinds[0])
    if kind not in kinds:
        raise SpecError(f"{c.source}: vision_config.model_type: unsupported '{kind}' ({', '.join(kinds)})")
    return v


def _image_classifier(c: HFConfig, kind: str, kinds: tuple[str, ...]) -> dict:
    """...ForImageClassification of an image-text pair (CLIP, MetaCLIP 2, SigLIP, SigLIP 2): the
    vision model of vision_config alone, its tokens mean-pooled (CLIP's without the class token)
    into classifier Linear(vision hidden, num_labels)."""
    v = _vision_config(c, kinds)
    head = [linear("classifier", with_defaults(v, kind).size("hidden_size"), labels(c))]
    return clip_vision(v, head) if kind == "clip_vision_model" else siglip_vision(v, kind, head)


_TEXT = {
    "clip": {"vocab_size": 49408, "hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 12,
             "num_attention_heads": 8, "max_position_embeddings": 77, "hidden_act": "quick_gelu"},
    "siglip": {"vocab_size": 32000, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
               "num_attention_heads": 12, "max_position_embeddings": 64, "hidden_act": "gelu_pytorch_tanh"},
}
"""CLIPTextConfig / SiglipTextConfig (and Siglip2TextConfig) class defaults (transformers 5.24)."""


def _text_tower(c: HFConfig, kind: str) -> tuple[dict, HFConfig]:
    """The text tower: token and position tables, pre-LN LayerNorm / biased blocks, final_layer_norm
    (CLIPTextTransformer: causal; SiglipTextTransformer: bidirectional), no LM head."""
    raw = c.data.get("text_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: text_config: expected an object, got {raw!r}")
    t = HFConfig({**_TEXT[kind], **raw}, c.source, "text_config.")
    return dict(
        arch="decoder" if kind == "clip" else "encoder", layers=t.size("num_hidden_layers"),
        hidden=t.size("hidden_size"), heads=t.divisor("num_attention_heads"), ffn_hidden=t.size("intermediate_size"),
        vocab=t.size("vocab_size"), max_positions=t.size("max_position_embeddings"), position="learned",
        norm="layernorm", norm_bias=True, norm_placement="pre", qkv_bias=True, attn_out_bias=True, mlp_bias=True,
        gated_mlp=False, activation=t.activation("gelu", "hidden_act"), final_norm=True, lm_head=False,
        tied_embeddings=False), t


def _clip_model(c: HFConfig) -> dict:
    """CLIPModel (MetaClip2Model, CLIPSegModel: the same modules): the CLIP text tower with text_projection
    Linear(h_text, projection_dim, bias=False) on its pooled (EOS) token, the CLIP vision tower
    with visual_projection Linear(h_vision, projection_dim, bias=False) on its pooled token, and
    logit_scale (1); ...ForImageClassification: `_image_classifier`."""
    kinds = ("clip_vision_model", "metaclip_2_vision_model", "clipseg_vision_model")
    if architecture(c, c.text("model_type"), HEADS).endswith("ForImageClassification"):
        return _image_classifier(c, "clip_vision_model", kinds)
    fields, _ = _text_tower(c, "clip")
    proj = c.integer("projection_dim", 512)
    fields["classifier"] = {"num_labels": proj, "bias": False}  # text_projection, once per text
    tower = _clip(with_defaults(_vision_config(c, kinds), "clip_vision_model"))
    tower["connector"] = [dict(name="visual_projection", kind="linear", in_features=tower["hidden"], out_features=proj,
                               rows=1), dict(name="logit_scale", kind="vector", in_features=1)]
    return {**fields, "vision": tower}


_BERT_BASE = {"vocab_size": 30522, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
              "num_attention_heads": 12}
"""ChineseCLIPTextConfig's size defaults (transformers 5.24: BERT-base's)."""


def _chinese_clip(c: HFConfig) -> dict:
    """ChineseCLIPModel: a BERT text tower without its pooler (ChineseCLIPTextModel,
    add_pooling_layer=False) with text_projection Linear(h_text, projection_dim, bias=False) on its
    [CLS] token, the CLIP vision tower with visual_projection, and logit_scale (1)."""
    architecture(c, "chinese_clip", HEADS)
    raw = c.data.get("text_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: text_config: expected an object, got {raw!r}")
    fields = GPT_MAPPERS["bert"](HFConfig({**_BERT_BASE, **raw}, c.source, "text_config."))
    proj = c.integer("projection_dim", 512)
    fields.update(pooler=False, classifier={"num_labels": proj, "bias": False})  # text_projection, once per text
    tower = _clip(with_defaults(_vision_config(c, ("chinese_clip_vision_model",)), "clip_vision_model"))
    tower["connector"] = [dict(name="visual_projection", kind="linear", in_features=tower["hidden"], out_features=proj,
                               rows=1), dict(name="logit_scale", kind="vector", in_features=1)]
    return {**fields, "vision": tower}


def _siglip_model(kind: str) -> Mapper:
    def mapper(c: HFConfig) -> dict:
        """SiglipModel / Siglip2Model: the SigLIP text tower with its head Linear(h, projection_size,
        bias) on the last token, the SigLIP (2) vision tower with its pooling head, logit_scale
        and logit_bias (1 each); ...ForImageClassification: `_image_classifier`."""
        if architecture(c, kind, HEADS).endswith("ForImageClassification"):
            return _image_classifier(c, f"{kind}_vision_model", (f"{kind}_vision_model",))
        fields, text = _text_tower(c, "siglip")
        h = fields["hidden"]
        fields["classifier"] = {"num_labels": text.integer("projection_size", h, nullable=True) or h}
        tower_type = f"{kind}_vision_model"
        tower, _ = _tower(c, tower_type, kinds=(tower_type,))
        tower["connector"] = [dict(name="logit_scale", kind="vector", in_features=1),
                              dict(name="logit_bias", kind="vector", in_features=1)]
        return {**fields, "vision": tower}

    return mapper


IMAGE_TEXT_MAPPERS: dict[str, Mapper] = {
    "clip": _clip_model, "metaclip_2": _clip_model, "clipseg": _clip_model, "chinese_clip": _chinese_clip,
    "siglip": _siglip_model("siglip"), "siglip2": _siglip_model("siglip2"),
}
