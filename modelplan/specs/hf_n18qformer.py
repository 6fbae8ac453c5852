"""HF config mappers of the Q-Former composites (transformers 5.24 modeling_blip_2.py,
modeling_instructblip.py, modeling_instructblipvideo.py): BLIP-2, InstructBLIP and InstructBLIP-Video, a BLIP ViT, a BERT-shaped Q-Former whose
learned queries cross-attend to the image, and a decoder text model (OPT, Llama / Vicuna, ...).

The Q-Former is a `VisionSpec.connector`: its query rows (num_query_tokens) run every projection
but the cross-attention keys / values, which run on the image's tokens; the image fills
num_query_tokens text positions. InstructBLIP's instruction-text branch (word / position tables,
the text-side MLP of each layer) holds parameters that run on the prompt tokens, not per image:
they are `vector` entries (counted, not priced)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18vlm_base import _sub, _text
from modelplan.specs.hf_vision import _clip, _linear, _norm

Mapper = Callable[[HFConfig], dict]

_BLIP_VISION = {"hidden_size": 1408, "intermediate_size": 6144, "num_hidden_layers": 39, "num_attention_heads": 16,
                "image_size": 224, "patch_size": 14, "qkv_bias": True}
"""Blip2VisionConfig / InstructBlipVisionConfig defaults (transformers 5.24)."""
_QFORMER = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
            "intermediate_size": 3072, "max_position_embeddings": 512, "cross_attention_frequency": 2}
"""Blip2QFormerConfig / InstructBlipQFormerConfig defaults (transformers 5.24)."""


def _blip_tower(v: HFConfig) -> dict:
    """Blip2VisionModel: class embedding, biased patch conv, (patches + 1) learned positions, no
    norm before the blocks, fused qkv with q / v biases when qkv_bias (a 3h bias Parameter, its k
    part zeros), biased projection and fc1 / fc2, post_layernorm."""
    return {**_clip(v), "patch_bias": True, "pre_norm": False, "qkv_bias": v.flag("qkv_bias", True)}


def _qformer(q: HFConfig, queries: int, image_width: int, image_rows_offset: int, text_width: int,
             instruct: bool) -> list[dict]:
    """Q-Former layers (Blip2QFormerModel / InstructBlipQFormerModel): per layer biased
    query / key / value / dense self-attention + LayerNorm, every cross_attention_frequency-th
    layer (from 0) the same cross-attention with keys / values from the image width, the query
    MLP (intermediate_query, output_query + LayerNorm); then language_projection to the text."""
    h, f = q.size("hidden_size"), q.size("intermediate_size")
    layers, freq = q.size("num_hidden_layers"), q.integer("cross_attention_frequency", 2)
    if freq < 1:
        raise SpecError(f"{q.source}: {q.path}cross_attention_frequency: must be >= 1, got {freq}")
    cross = len(range(0, layers, freq))
    rows = dict(rows=queries)
    out = [dict(name="qformer/query_tokens", kind="vector", in_features=h, copies=queries)]
    if instruct:  # InstructBlipQFormerEmbeddings: word / position tables, LayerNorm over queries + prompt
        out.append(dict(name="qformer/embeddings", kind="vector", in_features=h,
                        copies=q.size("vocab_size") + q.size("max_position_embeddings")))
    out.append({**_norm("qformer/layernorm", h), **rows})
    if layers:
        out += [{**_linear("qformer/attention/qkv", h, h, True, copies=3 * layers), **rows},
                {**_linear("qformer/attention/output", h, h, True, copies=layers), **rows},
                {**_norm("qformer/attention/norm", h, copies=layers), **rows}]
    if cross:
        out += [{**_linear("qformer/crossattention/query", h, h, True, copies=cross), **rows},
                {**_linear("qformer/crossattention/kv", image_width, h, True, copies=2 * cross),
                 "row_offset": image_rows_offset},
                {**_linear("qformer/crossattention/output", h, h, True, copies=cross), **rows},
                {**_norm("qformer/crossattention/norm", h, copies=cross), **rows}]
    if layers:
        out += [{**_linear("qformer/intermediate_query", h, f, True, copies=layers), **rows},
                {**_linear("qformer/output_query", f, h, True, copies=layers), **rows},
                {**_norm("qformer/output_query/norm", h, copies=layers), **rows}]
    if instruct and layers:  # intermediate / output: the prompt tokens' MLP + LayerNorm (not per image)
        out.append(dict(name="qformer/text_mlp", kind="vector", in_features=2 * h * f + f + 3 * h, copies=layers))
    return out + [{**_linear("language_projection", h, text_width, True), **rows}]


def _blip2(c: HFConfig, text_mappers: dict[str, Mapper], instruct: bool = False) -> dict:
    """BLIP-2 / InstructBLIP: BLIP ViT, Q-Former, decoder text model; the head is tied as the
    text config says (the composite config has no tie of its own)."""
    fields, text = _text(c, text_mappers, "opt")
    _, v = _sub(c, "vision_config", "blip_2_vision_model")
    tower = _blip_tower(HFConfig({**_BLIP_VISION, **v.data}, v.source, v.path))
    _, q = _sub(c, "qformer_config", "blip_2_qformer")
    q = HFConfig({**_QFORMER, **q.data}, q.source, q.path)
    if not instruct and q.flag("use_qformer_text_input", False):
        raise SpecError(f"{c.source}: qformer_config.use_qformer_text_input: true is not supported")
    queries = c.integer("num_query_tokens", 32)
    # the class token is the first of the tokens the cross-attention keys / values run on
    tower["connector"] = _qformer(q, queries, tower["hidden"], 1, fields["hidden"], instruct)
    fields["vision"] = tower
    fields["tied_embeddings"] = text.flag("tie_word_embeddings", fields.get("tied_embeddings", False))
    return fields


QFORMER_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "blip-2": _blip2, "instructblip": lambda c, m: _blip2(c, m, instruct=True),
    # InstructBLIP-Video: InstructBLIP's modules, each frame an image through the tower and Q-Former
    "instructblipvideo": lambda c, m: _blip2(c, m, instruct=True),
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
