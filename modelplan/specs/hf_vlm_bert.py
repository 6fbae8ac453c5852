"""HF config mappers of the vision-language composites with a BERT-shaped text model (transformers
5.24): BLIP (modeling_blip.py, modeling_blip_text.py: a BLIP ViT and a BERT decoder whose every block
cross-attends to the image tokens) and GIT (modeling_git.py: a CLIP tower whose projected tokens
are prepended to a BERT-shaped decoder's sequence)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18qformer import _blip_tower
from modelplan.specs.hf_n18small import N18SMALL_MAPPERS
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_vision import _clip, _linear, _norm

_BLIP_TEXT = {"vocab_size": 30524, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
              "num_attention_heads": 8, "max_position_embeddings": 512, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
_BLIP_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                "image_size": 384, "patch_size": 16, "qkv_bias": True}
"""BlipTextConfig / BlipVisionConfig defaults (transformers 5.24 configuration_blip.py)."""


def _heads(c: HFConfig, supported: tuple[str, ...]) -> None:
    """Refuse the task heads that add modules beyond `supported` (architectures[0])."""
    names = c.texts("architectures", None)
    if names and names[0] not in supported:
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: {', '.join(supported)})")


def _bert_decoder(t: HFConfig) -> dict:
    """A BERT-shaped decoder (BertGenerationDecoder's modules: word and position tables, embedding
    LayerNorm, post-LN blocks, no token types, no pooler) with its biased vocabulary decoder."""
    return N18SMALL_MAPPERS["bert-generation"](t)


def _blip(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """BlipForConditionalGeneration: BlipVisionModel (class token, biased patch conv, learned
    positions, no pre-norm, fused biased qkv, post_layernorm) and BlipTextLMHeadModel: BERT's
    decoder blocks, each with a crossattention (query Linear(h, h), key / value
    Linear(encoder_hidden_size = vision width, h), dense + LayerNorm) over every image token, and
    the MLM head (transform dense + LayerNorm, decoder tied to the word table, vocab bias);
    BlipModel: BlipTextModel with its pooler and no head, text_projection Linear(h, projection_dim,
    bias=False) on the first token, visual_projection Linear(vision, projection_dim, bias=False) on
    the pooled image token and logit_scale (1)."""
    _heads(c, ("BlipForConditionalGeneration", "BlipModel"))
    _, v = _sub(c, "vision_config", "blip_vision_model")
    tower = _blip_tower(HFConfig({**_BLIP_VISION, **v.data}, v.source, v.path))
    _, t = _sub(c, "text_config", "blip_text_model")
    t = HFConfig({**_BLIP_TEXT, **t.data}, t.source, t.path)
    fields = _bert_decoder(t)
    tokens = (tower["image_size"] // tower["patch_size"]) ** 2 + 1  # patches + the class token
    fields.update(mlm_transform=True, tied_embeddings=t.flag("tie_word_embeddings", True),
                  seq2seq=dict(idle_cross_attention=True, cross_input=tower["hidden"], cross_memory=tokens))
    fields["vision"] = {**tower, "connector": []}  # the decoder reads the tower's output directly
    if (c.texts("architectures", None) or [""])[0] == "BlipModel":  # apply_head drops the LM head
        proj = c.integer("projection_dim", 512)
        fields.update(pooler=True, classifier={"num_labels": proj, "bias": False})  # text_projection
        fields["vision"]["connector"] = [{**_linear("visual_projection", tower["hidden"], proj, False), "rows": 1},
                                         dict(name="logit_scale", kind="vector", in_features=1)]
    return fields


_GIT_TEXT = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 6, "num_attention_heads": 12,
             "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 1024, "layer_norm_eps": 1e-12}
_GIT_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
               "num_channels": 3, "image_size": 224, "patch_size": 16}
"""GitConfig / GitVisionConfig defaults (transformers 5.24 configuration_git.py)."""


def _git(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """GitForCausalLM: GitVisionModel (CLIP's: class token, bias-free patch conv, pre_layrnorm,
    post_layernorm), visual_projection (Linear(vision, h) + LayerNorm over every tower token), one
    (1, 1, vision width) img_temporal_embedding per num_image_with_embedding, and a BERT-shaped
    decoder (GitEmbeddings: word + position tables, LayerNorm; post-LN blocks over the image
    tokens + text) with `output` Linear(h, vocab) (biased, one bias, no BertGeneration `bias` copy; tied when
    tie_word_embeddings)."""
    _heads(c, ("GitForCausalLM",))
    fields = _bert_decoder(HFConfig({**_GIT_TEXT, **{k: x for k, x in c.data.items() if k != "vision_config"}},
                                    c.source, c.path))
    _, v = _sub(c, "vision_config", "git_vision_model")
    tower = _clip(HFConfig({**_GIT_VISION, **v.data}, v.source, v.path))
    h, vh = fields["hidden"], tower["hidden"]
    # every tower token (the class token's too) is projected: patches + 1 rows
    tower["connector"] = [{**_linear("visual_projection/linear", vh, h, True), "row_offset": 1},
                          {**_norm("visual_projection/norm", h), "row_offset": 1}]
    images = c.integer("num_image_with_embedding", None, nullable=True)
    if images:
        tower["connector"].append(dict(name="img_temporal_embedding", kind="vector", in_features=vh, copies=images))
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    fields["head_bias_copy"] = False  # `output` is one biased Linear: no second vocab bias untied
    return fields


VLM_BERT_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"blip": _blip, "git": _git}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
