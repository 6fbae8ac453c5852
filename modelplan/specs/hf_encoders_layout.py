"""HF config mappers of the document encoders (transformers 5.24 modeling code): layoutlm (2-D
position tables), layoutlmv3 (box tables, an image side, relative-bias tables), lilt (a layout
stream beside the text stream) and markuplm (XPath embeddings): BERT's encoder (`hf_gpt._bert`) with
the groups each modeling file adds as `extras.side` (specs/encoder_side.py)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_side import layer_norm, linear, table
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_encoder_fields import defaulted, pooled_always, with_side
from modelplan.specs.hf_gpt import GPT_MAPPERS

_bert = GPT_MAPPERS["bert"]


def _layoutlm(c: HFConfig) -> dict:
    """LayoutLMModel: BERT's modules plus x / y / h / w position tables, each
    Embedding(max_2d_position_embeddings, h), summed into the embedding (Xu et al. 2020 sec. 2.2)."""
    fields = _bert(c)
    rows = c.integer("max_2d_position_embeddings", 1024)
    return with_side(fields, embedding=[table("xywh_position", rows, fields["hidden"], copies=4)])


def _layoutlmv3(c: HFConfig) -> dict:
    """LayoutLMv3Model (Huang et al. 2022): RoBERTa's text modules (post-LN blocks, layer_norm_eps 1e-5)
    with x / y tables of coordinate_size and h / w tables of shape_size columns concatenated to h;
    with visual_embed, the image side (patch_embed Conv2d(num_channels, h, patch) with bias, cls_token,
    pos_embed of (input_size / patch)^2 + 1 rows, LayerNorm and norm); the encoder's relative (rel_pos_bias
    Linear(rel_pos_bins, heads)) and spatial (rel_pos_x / y_bias Linear(rel_2d_pos_bins, heads)) biases,
    looked up by bucket (no GEMM). FLOPs and memory are a text-only forward's: image patches joining the
    sequence are not modelled."""
    if not c.flag("text_embed", True):
        raise SpecError(f"{c.source}: text_embed: false is not modelled (an image-only LayoutLMv3)")
    fields = _bert(defaulted(c, layer_norm_eps=1e-5))
    h, heads, rows = fields["hidden"], fields["heads"], c.integer("max_2d_position_embeddings", 1024)
    coordinate, shape = c.integer("coordinate_size", 128), c.integer("shape_size", 128)
    if 4 * coordinate + 2 * shape != h:  # LayoutLMv3TextEmbeddings.calculate_spatial_position_embeddings
        raise SpecError(f"{c.source}: coordinate_size, shape_size: 4 x {coordinate} + 2 x {shape} must equal "
                        f"hidden_size ({h}) (the six box lookups are concatenated to h)")
    embedding = [table("layout/xy", rows, coordinate, copies=2), table("layout/hw", rows, shape, copies=2)]
    if c.flag("visual_embed", True):
        patch = c.data.get("patch_size", 16)
        patch = patch[0] if isinstance(patch, list) and patch else patch
        if not isinstance(patch, int) or patch <= 0:
            raise SpecError(f"{c.source}: patch_size: expected a positive integer, got {patch!r}")
        side = c.integer("input_size", 224) // patch
        channels = c.integer("num_channels", 3)
        embedding += [dict(name="visual/patch", params=channels * patch * patch * h + h),
                      table("visual/cls_and_position", side * side + 2, h),  # cls_token + pos_embed rows
                      layer_norm("visual/norms", h), layer_norm("visual/norms", h)]  # LayerNorm, norm
    if c.flag("has_relative_attention_bias", True):
        embedding.append(table("relative/1d", c.integer("rel_pos_bins", 32), heads))
    if c.flag("has_spatial_attention_bias", True):
        embedding.append(table("relative/2d", c.integer("rel_2d_pos_bins", 64), heads, copies=2))
    return with_side({**fields, "pooler": False}, embedding=embedding)


def _markuplm(c: HFConfig) -> dict:
    """MarkupLMModel (Li et al. 2022): BERT's modules plus XPathEmbeddings: max_depth tag tables
    Embedding(max_xpath_tag_unit_embeddings, xpath_unit_hidden_size) and as many subscript tables
    Embedding(max_xpath_subs_unit_embeddings, xpath_unit_hidden_size), then xpath_unitseq2_inner
    Linear(D, 4h), inner2emb Linear(4h, h) over D = max_depth x xpath_unit_hidden_size
    (xpath_unitseq2_embeddings Linear(D, h) is held but not run); its pooler."""
    fields = _bert(c)
    h = fields["hidden"]
    depth, unit = c.integer("max_depth", 50), c.integer("xpath_unit_hidden_size", 32)
    width = depth * unit
    embedding = [
        table("xpath/tag", c.integer("max_xpath_tag_unit_embeddings", 256), unit, copies=depth),
        table("xpath/subs", c.integer("max_xpath_subs_unit_embeddings", 1024), unit, copies=depth),
        dict(name="xpath/unitseq2", params=width * h + h),  # xpath_unitseq2_embeddings: not in the forward
        linear("xpath/inner", width, 4 * h),
        linear("xpath/inner2emb", 4 * h, h),
    ]
    return with_side(fields, embedding=embedding)


def _lilt(c: HFConfig) -> dict:
    """LiltModel (Wang et al. 2022): BERT's text stream and its pooler beside a layout stream of width
    w = h / channel_shrink_ratio: LiltLayoutEmbeddings (x / y / h / w tables of h // 6 columns over
    max_2d_position_embeddings rows, box_linear_embeddings Linear(h, w) over the six concatenated
    lookups, box_position_embeddings (max_position_embeddings, w), LayerNorm(w)); in every block
    layout_query / key / value Linear(w, w), layout_output (dense w x w, LayerNorm(w)), the layout
    scores and context (bi-directional attention complementation: the text and layout scores are
    summed), layout_intermediate Linear(w, f / r), layout_output Linear(f / r, w) and LayerNorm(w)."""
    fields = _bert(c)
    h, f = fields["hidden"], fields["ffn_hidden"]
    r = c.integer("channel_shrink_ratio", 4)
    w, fw, rows = h // r, f // r, c.integer("max_2d_position_embeddings", 1024)
    embedding = [table("layout/xywh", rows, h // 6, copies=4), linear("layout/box_linear", h, w),
                 table("layout/box_position", fields["max_positions"], w), layer_norm("layout/norm", w)]
    block = [linear("layout/qkv", w, 3 * w), linear("layout/attention_out", w, w), layer_norm("layout/attention_norm", w),
             dict(name="layout/scores", macs_per_key=2 * w),  # QK^T and softmax(QK^T) V over the w layout dims
             linear("layout/intermediate", w, fw), linear("layout/output", fw, w), layer_norm("layout/output_norm", w)]
    return with_side(fields, embedding=embedding, block=block)


def _layoutlmv3_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """LayoutLMv3Model bare (no pooler); ...ForSequenceClassification: LayoutLMv3ClassificationHead on the
    first token (dense + out_proj: a pooler and a classifier); ...ForTokenClassification: Linear(h,
    num_labels) under 10 labels, else the classification head on every token; ...ForQuestionAnswering:
    the classification head (dense, out_proj Linear(h, num_labels)) on every token."""
    name = architecture(c) or "LayoutLMv3Model"
    fields = apply_head(fields, c, name)
    labels = c.num_labels()
    per_token_head = {**fields, "pooler": True, "classifier": {"num_labels": labels, "per_token": True},
                      "extras": {**fields["extras"], "dense_head_per_token": True}}
    if name.endswith("ForQuestionAnswering") or (name.endswith("ForTokenClassification") and labels >= 10):
        return per_token_head
    return {**fields, "pooler": False} if name.endswith("Model") else fields


LAYOUT_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "layoutlm": _layoutlm, "layoutlmv3": _layoutlmv3, "markuplm": _markuplm, "lilt": _lilt,
}

LAYOUT_HEADS: dict[str, Callable[..., dict]] = {"layoutlm": pooled_always, "layoutlmv3": _layoutlmv3_head}
"""Types whose head classes `hf.apply_head` would misread."""
