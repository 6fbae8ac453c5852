"""HF config mappers of the vision-language encoder-decoders (transformers 5.24): Florence-2 (a DaViT
tower feeding BART's encoder). The text model is mapped by its own model_type's mapper
(hf.MAPPERS); the tower and projector are a `VisionSpec` (count/vision.py), priced per image."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import DAVIT_DEFAULTS, davit_tower
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_swin import swin_tower
from modelplan.specs.hf_vision import _clip, _linear, _norm

BART_DEFAULTS = {"vocab_size": 50265, "max_position_embeddings": 1024, "encoder_layers": 12, "encoder_ffn_dim": 4096,
                 "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096,
                 "decoder_attention_heads": 16, "d_model": 1024}
"""BartConfig size defaults (transformers 5.24 configuration_bart.py)."""

FLORENCE2_IMAGE_SIZE = 768
"""Pixels per side of one Florence-2 image (Xiao et al. 2023, arXiv 2311.06242: 768 x 768 inputs;
the microsoft/Florence-2-base processor resizes to it; transformers 5.24 ships no size of its own);
vision_config.image_size overrides it."""


def _encoder_decoder_text(c: HFConfig, text_mappers: dict[str, Mapper], default_type: str, defaults: dict) -> dict:
    """The text_config mapped by its model_type's mapper over `defaults`; it must be an encoder-decoder."""
    kind, text = _sub(c, "text_config", default_type)
    mapper = text_mappers.get(kind)
    if mapper is None:
        raise SpecError(f"{c.source}: text_config.model_type: unsupported '{kind}'")
    fields = mapper(HFConfig({**(defaults if kind == default_type else {}), **text.data}, c.source, text.path))
    if fields.get("arch") != "encoder_decoder" or "vision" in fields:
        raise SpecError(f"{c.source}: text_config.model_type: '{kind}' is not a text encoder-decoder")
    return fields


def _florence2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Florence-2: BART encoder-decoder (its head tied to `shared`) whose encoder reads the image
    tokens, the DaViT tower (hf_davit.py) and Florence2MultiModalProjector: a learned 2-D position
    table (row / column nn.Embedding(max_position_embeddings, d / 2) each, added to the grid), the
    grid's mean prepended (one more token), image_projection Linear(d, projection_dim, bias=False)
    and image_proj_norm LayerNorm; the 1-D temporal sinusoids are a buffer."""
    fields = _encoder_decoder_text(c, text_mappers, "bart", BART_DEFAULTS)
    _, v = _sub(c, "vision_config", "florence_vision")
    v = HFConfig({**DAVIT_DEFAULTS, **v.data}, v.source, v.path)
    image = v.integer("image_size", FLORENCE2_IMAGE_SIZE)
    tower, side, stride = davit_tower(v, image)
    d, out, rows = v.ints("embed_dim")[-1], v.integer("projection_dim"), side * side + 1
    if side > v.integer("max_position_embeddings"):
        raise SpecError(f"{c.source}: vision_config.max_position_embeddings ({v.integer('max_position_embeddings')}) "
                        f"is smaller than the {side} x {side} feature grid of a {image} px image")
    depths = v.ints("depths")
    fields["vision"] = dict(
        layers=sum(depths) or 1, hidden=d, heads=v.ints("num_heads")[-1], ffn_hidden=int(d * v.number("mlp_ratio")),
        patch_size=stride, image_size=image, channels=v.integer("in_channels"), tower=tower,
        connector=[dict(name="image_position_embed", kind="vector", in_features=v.integer("max_position_embeddings") * d),
                   {**_linear("image_projection", d, out, False), "rows": rows},
                   {**_norm("image_proj_norm", out), "rows": rows}])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


_VIT = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "image_size": 224, "patch_size": 16, "num_channels": 3, "qkv_bias": True, "pooler_output_size": None}
"""ViTConfig defaults (transformers 5.24 configuration_vit.py)."""


def _vit_encoder(v: HFConfig) -> tuple[dict, int]:
    """ViTModel as AutoModel builds it (add_pooling_layer true, no mask token): cls_token, biased
    patch conv, (patches + 1) learned positions, pre-LN blocks (q / k / v bias qkv_bias), final
    layernorm, and ViTPooler Linear(h, pooler_output_size) + tanh on the first token."""
    v = HFConfig({**_VIT, **v.data}, v.source, v.path)
    tower = {**_clip(v), "patch_bias": True, "pre_norm": False, "qkv_bias": v.flag("qkv_bias")}
    h = tower["hidden"]
    pooled = v.integer("pooler_output_size", None, nullable=True) or h
    tower["connector"] = [{**_linear("pooler", h, pooled, True), "rows": 1}]
    return tower, (tower["image_size"] // tower["patch_size"]) ** 2 + 1  # patches + the class token


def _deit_encoder(v: HFConfig) -> tuple[dict, int]:
    """DeiTModel as AutoModel builds it: ViTModel's modules with a distillation token beside the
    class token (patches + 2 tokens and position rows), as tower layers; the pooler on the first."""
    v = HFConfig({**_VIT, **v.data}, v.source, v.path)
    h, f, layers, p = (v.size(k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size"))
    patches = (v.size("image_size") // p) ** 2
    n, rows = patches + 2, dict(rows=patches + 2)
    pooled = v.integer("pooler_output_size", None, nullable=True) or h
    tower = [dict(name="embeddings/patch", kind="conv", in_features=v.size("num_channels"), out_features=h, kernel=p,
                  bias=True, rows=patches),
             dict(name="embeddings/cls_distillation_tokens", kind="vector", in_features=h, copies=2),
             dict(name="embeddings/position", kind="vector", in_features=n * h),
             {**_norm("layers/norms", h, copies=2 * layers), **rows},
             {**_linear("layers/attention/qkv", h, h, v.flag("qkv_bias"), copies=3 * layers), **rows},
             dict(name="layers/attention/scores", kind="attention", in_features=h, keys=n, copies=layers, **rows),
             {**_linear("layers/attention/out", h, h, True, copies=layers), **rows},
             {**_linear("layers/mlp/fc1", h, f, True, copies=layers), **rows},
             {**_linear("layers/mlp/fc2", f, h, True, copies=layers), **rows},
             {**_norm("layernorm", h), **rows}, {**_linear("pooler", h, pooled, True), "rows": 1}]
    return dict(layers=layers, hidden=h, heads=v.size("num_attention_heads"), ffn_hidden=f, patch_size=p,
                image_size=v.size("image_size"), channels=v.size("num_channels"), tower=tower, connector=[]), n


_ENCODERS: dict[str, Callable[[HFConfig], tuple[dict, int]]] = {
    "vit": _vit_encoder, "deit": _deit_encoder,  # TrOCR-small's encoder is a DeiT
    "swin": lambda v: swin_tower(v, donut=False),  # SwinModel: its pooler is an AdaptiveAvgPool1d
    "donut-swin": lambda v: swin_tower(v, donut=True),
}
"""VisionEncoderDecoder encoder model_types (AutoModel) -> (their tower, the tokens it outputs)."""

_TROCR = {"vocab_size": 50265, "d_model": 1024, "decoder_layers": 12, "decoder_attention_heads": 16,
          "decoder_ffn_dim": 4096, "max_position_embeddings": 512}
_BERT = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}
_GPT2 = {"vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024}
"""TrOCRConfig, BertConfig, GPT2Config size defaults (transformers 5.24)."""

_DECODERS: dict[str, tuple[str, dict]] = {
    "trocr": ("TrOCRForCausalLM", _TROCR), "bart": ("BartForCausalLM", BART_DEFAULTS),
    "mbart": ("MBartForCausalLM", BART_DEFAULTS), "bert": ("BertLMHeadModel", _BERT),
    "gpt2": ("GPT2LMHeadModel", _GPT2),
}
"""VisionEncoderDecoder decoder model_types -> the class AutoModelForCausalLM builds and the
config class's size defaults. TrOCR / BART / mBART decoders always hold their encoder_attn; BERT
and GPT-2 build it when add_cross_attention (BertLayer.crossattention: query / key / value /
dense + LayerNorm; GPT2Block: q_attn, c_attn (k, v), c_proj, ln_cross_attn: the same shapes)."""


def _ved_decoder_config(c: HFConfig) -> tuple[str, str, HFConfig]:
    """(model_type, head class, config over its class defaults) of the composite's decoder."""
    kind, d = _sub(c, "decoder", "bert", {"is_decoder": True, "add_cross_attention": True})
    if kind not in _DECODERS:
        raise SpecError(f"{c.source}: decoder.model_type: unsupported '{kind}' (supported: {', '.join(sorted(_DECODERS))})")
    head, defaults = _DECODERS[kind]
    return kind, head, HFConfig({**defaults, **d.data, "architectures": [head]}, d.source, d.path)


def _ved_decoder(c: HFConfig, text_mappers: dict[str, Mapper]) -> tuple[dict, HFConfig]:
    """The decoder's body (its head is put on by `_ved_head`, once the composite is mapped)."""
    kind, _, d = _ved_decoder_config(c)
    fields = dict(text_mappers[kind](d))
    if kind in ("bert", "gpt2"):
        if not d.flag("add_cross_attention", False):
            raise SpecError(f"{c.source}: decoder.add_cross_attention: false is not modelled (a decoder that "
                            f"never reads the image)")
        fields["seq2seq"] = dict(idle_cross_attention=True)
    if kind != "trocr" and d.integer("cross_attention_hidden_size", None, nullable=True) is not None:
        raise SpecError(f"{c.source}: decoder.cross_attention_hidden_size: only TrOCR's decoder reads it")
    return fields, d


def _vision_encoder_decoder(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """VisionEncoderDecoderModel: an image encoder (AutoModel of `encoder`: `_ENCODERS`) and a text
    decoder (AutoModelForCausalLM of `decoder`: `_DECODERS`) whose every block cross-attends to
    all of the encoder's tokens; enc_to_dec_proj Linear(encoder width, decoder width) on them
    when the widths differ and the decoder has no cross_attention_hidden_size."""
    kind, e = _sub(c, "encoder", "vit")
    if kind not in _ENCODERS:
        raise SpecError(f"{c.source}: encoder.model_type: unsupported '{kind}' (supported: {', '.join(sorted(_ENCODERS))})")
    tower, tokens = _ENCODERS[kind](e)
    fields, d = _ved_decoder(c, text_mappers)
    width, h = tower["hidden"], fields["hidden"]
    cross = d.integer("cross_attention_hidden_size", None, nullable=True)
    if cross is not None and cross != width:
        raise SpecError(f"{c.source}: decoder.cross_attention_hidden_size ({cross}) must equal the encoder's "
                        f"hidden_size ({width})")
    if width != h and cross is None:
        tower["connector"].append({**_linear("enc_to_dec_proj", width, h, True), "rows": tokens})
    fields["seq2seq"] = {**fields["seq2seq"], "cross_memory": tokens, "cross_input": cross or h}
    fields["vision"] = tower
    return fields


def _ved_head(fields: dict, c: HFConfig, apply_head, architecture) -> dict:
    """VisionEncoderDecoderModel is the whole composite; its LM head is the decoder's head class
    (hf.apply_head: BertLMHeadModel's MLM head on BERT's body), its blocks causal."""
    name = architecture(c)
    if name not in (None, "VisionEncoderDecoderModel"):
        raise SpecError(f"{c.source}: architectures: '{name}' not modelled (supported: VisionEncoderDecoderModel)")
    _, head, d = _ved_decoder_config(c)
    return {**apply_head(fields, d, head), "arch": "decoder"}


VLM_ENCDEC_HEADS = {"vision-encoder-decoder": _ved_head}
"""model_type -> its head reading (hf.from_hf_config): the composite's class name ends in Model
but carries the decoder's LM head."""

VLM_ENCDEC_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "florence2": _florence2, "vision-encoder-decoder": _vision_encoder_decoder,
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""

VLM_ENCDEC_UNMODELLED: dict[str, str] = {
    "udop": "its T5 stacks over text tokens fused with image patches, 2-D cell-position tables and the "
            "aggregated 1-D / horizontal / vertical relative biases (relative_bias_args)",
    "reformer": "LSH and local chunked self-attention, axial position embeddings and reversible residual layers",
}
"""Encoder-decoder and document types transformers 5.24 ships that the spec cannot yet express."""
