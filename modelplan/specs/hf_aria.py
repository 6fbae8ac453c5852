"""HF config mapper of Aria (transformers 5.24 AriaForConditionalGeneration): the Aria MoE text model
(hf_n18causal.py's aria_text), an Idefics3 / SigLIP-shaped vision tower and AriaProjector, a
cross-attention from learned queries onto the patches."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18vlm_base import Mapper, _siglip, _single_layer, _sub, _text
from modelplan.specs.hf_vision import _linear, _norm

_TEXT = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 4096, "num_hidden_layers": 32,
         "num_attention_heads": 32, "head_dim": 128, "moe_num_experts": 8, "moe_topk": 2, "moe_num_shared_experts": 2}
"""AriaTextConfig size defaults (transformers 5.24), under an absent text_config."""
_VISION = {"hidden_size": 1152, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 16,
           "image_size": 224, "patch_size": 32, "num_channels": 3, "vision_use_head": False}
"""Idefics3VisionConfig defaults (transformers 5.24): SigLIP's blocks, post_layernorm, no head."""
_QUERIES = {1225: 128, 4900: 256}
"""AriaConfig.__post_init__'s projector_patch_to_query_dict default: patches -> learned queries."""


def _queries(c: HFConfig) -> dict[int, int]:
    raw = c.data.get("projector_patch_to_query_dict") or _QUERIES
    try:
        table = {int(k): int(x) for k, x in raw.items()}
    except (AttributeError, TypeError, ValueError):
        raise SpecError(f"{c.source}: projector_patch_to_query_dict: expected patches -> queries integers, "
                        f"got {raw!r}") from None
    if not table or min(table) < 1 or min(table.values()) < 1:
        raise SpecError(f"{c.source}: projector_patch_to_query_dict: entries must be positive, got {raw!r}")
    return table


def _aria(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Aria: aria_text MoE model; Idefics3VisionTransformer (biased patch conv, one position per
    patch of image_size, SigLIP blocks, post_layernorm; vision_feature_layer -1); AriaProjector:
    a query table of max(projector_patch_to_query_dict) rows, AriaCrossAttention (layer_norm on
    the queries, layer_norm_kv on the patches, bias-free q / k / v, nn.MultiheadAttention's biased
    in_proj (3 h x h) and out_proj, a biased linear), layer_norm, AriaProjectorMLP (linear_in h ->
    text, GELU, linear_out text -> text, bias-free); untied. An image is priced at the patch count
    of image_size when the dict lists it, else at the dict's largest-query entry (an image the
    projector accepts); the queries run q / out / MLP, the patches k / v. The cross-attention's
    score and context matmuls (4 queries x patches x h) are not priced."""
    if c.data.get("text_config") is None:
        c = HFConfig({**c.data, "text_config": {"model_type": "aria_text", **_TEXT}}, c.source, c.path)
    fields, _ = _text(c, text_mappers, "aria_text")
    _single_layer(c, "vision_feature_layer", -1)
    _, v = _sub(c, "vision_config", "idefics3_vision")
    v = HFConfig({**_VISION, **{k: x for k, x in v.data.items() if k != "vision_use_head"}}, v.source, v.path)
    tower = _siglip(v)
    table, p = _queries(c), v.divisor("patch_size")
    patches = (tower["image_size"] // p) ** 2
    if patches not in table:
        patches = max(table, key=lambda k: (table[k], k))
        side = round(patches ** 0.5)
        if side * side != patches:
            raise SpecError(f"{c.source}: projector_patch_to_query_dict: {patches} patches is not a square grid")
        tower = {**tower, "image_size": side * p, "position_rows": (v.integer("image_size") // p) ** 2}
    h, t, q = tower["hidden"], fields["hidden"], table[patches]
    rows = dict(rows=q)
    tower["connector"] = [
        dict(name="query", kind="vector", in_features=h, copies=max(table.values())),
        {**_norm("cross_attn/layer_norm", h), **rows}, _norm("cross_attn/layer_norm_kv", h),
        {**_linear("cross_attn/q_proj", h, h, False), **rows}, _linear("cross_attn/kv_proj", h, h, False, copies=2),
        {**_linear("cross_attn/in_proj_q", h, h, True), **rows}, _linear("cross_attn/in_proj_kv", h, h, True, copies=2),
        {**_linear("cross_attn/out_proj", h, h, True), **rows}, {**_linear("cross_attn/linear", h, h, True), **rows},
        {**_norm("layer_norm", h), **rows}, {**_linear("feed_forward/linear_in", h, t, False), **rows},
        {**_linear("feed_forward/linear_out", t, t, False), **rows}]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


ARIA_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"aria": _aria}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
