"""Pix2Struct (transformers 5.24 modeling_pix2struct.py): an image encoder over flattened patches and
a T5-shaped text decoder whose every block cross-attends to all of them.

Pix2StructVisionModel is priced as `VisionSpec.tower` layers: patch_projection Linear(patch_embed_
hidden_size, h) with bias, row / column nn.Embedding(seq_len, h) tables, pre-norm blocks (weight-only
Pix2StructLayerNorm before attention and MLP, bias-free q / k / v / output of heads x d_kv, a gated
wi_0 / wi_1 / wo MLP of d_ff) and a final layernorm. The image processor pads every image to
max_patches rows (Pix2StructImageProcessor max_patches 2048), so the encoder always runs on that
many tokens and the decoder's cross-attention reads them all."""

from __future__ import annotations

import math
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_other import OTHER_MAPPERS
from modelplan.specs.hf_vision import _linear, _norm

MAX_PATCHES = 2048
"""Patches per image (Pix2StructImageProcessor.max_patches default, transformers 5.24); the config
key max_patches overrides it."""

_TEXT = {"vocab_size": 50244, "hidden_size": 768, "d_kv": 64, "d_ff": 2048, "num_layers": 12, "num_heads": 12,
         "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128, "layer_norm_epsilon": 1e-6,
         "dense_act_fn": "gelu_new", "tie_word_embeddings": False}
_VISION = {"hidden_size": 768, "patch_embed_hidden_size": 768, "d_ff": 2048, "d_kv": 64, "num_hidden_layers": 12,
           "num_attention_heads": 12, "seq_len": 4096}
"""Pix2StructTextConfig / Pix2StructVisionConfig defaults (transformers 5.24)."""


def flattened_patch_encoder(v: HFConfig, patches: int, keys: tuple[str, str, str] = ("d_kv", "d_ff", "seq_len")) -> dict:
    """Pix2StructVisionModel as tower layers on `patches` tokens (see the module docstring); `keys`:
    the config's names of the head width, the MLP width and the row / column table size
    (Kosmos-2.5's Kosmos2_5VisionModel: head_dim, intermediate_size, max_num_patches)."""
    h, layers, heads = (v.size(k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads"))
    d_kv, ffn, table = (v.size(k) for k in keys)
    inner, rows = heads * d_kv, dict(rows=patches)
    tower = [{**_linear("embeddings/patch_projection", v.size("patch_embed_hidden_size"), h, True), **rows},
             dict(name="embeddings/row_column", kind="vector", in_features=h, copies=2 * table),
             {**_norm("layers/norms", h, "rmsnorm", copies=2 * layers), **rows},
             {**_linear("layers/attention/qkv", h, inner, False, copies=3 * layers), **rows},
             dict(name="layers/attention/scores", kind="attention", in_features=inner, keys=patches, copies=layers, **rows),
             {**_linear("layers/attention/output", inner, h, False, copies=layers), **rows},
             {**_linear("layers/mlp/wi", h, ffn, False, copies=2 * layers), **rows},
             {**_linear("layers/mlp/wo", ffn, h, False, copies=layers), **rows},
             {**_norm("layernorm", h, "rmsnorm"), **rows}]
    side = math.isqrt(patches)  # the largest square image of at most max_patches 16 px patches (report only)
    return dict(layers=layers, hidden=h, heads=heads, ffn_hidden=ffn, patch_size=16, image_size=16 * side,
                tower=tower, connector=[])


def _decoder(t: HFConfig) -> dict:
    """Pix2StructTextModel: T5's decoder blocks (RMS norms, bias-free q / k / v / o of hidden x hidden,
    relative position bias in the first block, cross-attention, gated dense_act_fn MLP), final norm,
    an untied lm_head unless tie_word_embeddings."""
    heads, d_kv, h = t.size("num_heads"), t.size("d_kv"), t.size("hidden_size")
    if heads * d_kv != h:  # Pix2StructTextAttention: q/k/v are hidden x hidden, reshaped to heads x d_kv
        raise SpecError(f"{t.source}: {t.path}d_kv: num_heads x d_kv ({heads} x {d_kv}) must equal hidden_size ({h})")
    act = t.text("dense_act_fn")
    fields = OTHER_MAPPERS["t5"](HFConfig({**t.data, "d_model": h, "feed_forward_proj": f"gated-{act}"}, t.source, t.path))
    return {**fields, "arch": "decoder", "decoder_layers": None, "tied_embeddings": t.flag("tie_word_embeddings")}


def _pix2struct(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Pix2StructForConditionalGeneration: the vision encoder and the text decoder (see above)."""
    names = c.texts("architectures", None)
    if names and names[0] != "Pix2StructForConditionalGeneration":
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: "
                        f"Pix2StructForConditionalGeneration)")
    _, v = _sub(c, "vision_config", "pix2struct_vision_model")
    v = HFConfig({**_VISION, **v.data}, v.source, v.path)
    _, t = _sub(c, "text_config", "pix2struct_text_model")
    t = HFConfig({**_TEXT, **t.data}, t.source, t.path)
    patches = c.integer("max_patches", MAX_PATCHES)
    fields = _decoder(t)
    if v.size("hidden_size") != fields["hidden"]:  # the cross-attention's key / value are Linear(text hidden, ...)
        raise SpecError(f"{c.source}: vision_config.hidden_size ({v.size('hidden_size')}) must equal "
                        f"text_config.hidden_size ({fields['hidden']}): the decoder reads the encoder states as they are")
    fields["seq2seq"] = dict(idle_cross_attention=True, cross_memory=patches)
    fields["vision"] = flattened_patch_encoder(v, patches)
    return fields


PIX2STRUCT_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"pix2struct": _pix2struct}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
