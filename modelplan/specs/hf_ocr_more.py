"""HF config mappers of further OCR composites (transformers 5.24) on a SAM tower (hf_sam.py):
GOT-OCR 2.0 and PP-Chart2Table (modeling_got_ocr2.py: a Qwen2 text model), PP-FormulaNet
(modeling_pp_formulanet.py: an mBART decoder cross-attending to the image)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv
from modelplan.specs.hf_llama import llama
from modelplan.specs.hf_moe import moe_placement
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_sam import sam_tower
from modelplan.specs.hf_vision import _linear, _norm

_GOT_VISION = {"hidden_size": 768, "output_channels": 256, "num_hidden_layers": 12, "num_attention_heads": 12,
               "num_channels": 3, "image_size": 1024, "patch_size": 16, "qkv_bias": True, "use_abs_pos": True,
               "use_rel_pos": True, "window_size": 14, "global_attn_indexes": [2, 5, 8, 11], "mlp_dim": 3072}
_GOT_TEXT = {"vocab_size": 151860, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 24,
             "num_attention_heads": 16, "num_key_value_heads": 16, "max_position_embeddings": 32768,
             "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "rope_theta": 1000000.0, "use_sliding_window": False}
"""GotOcr2VisionConfig defaults and GotOcr2Config's text init_kwargs (transformers 5.24; the same in
configuration_pp_chart2table.py)."""


def _got_ocr2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """GotOcr2ForConditionalGeneration: Qwen2 text model, the SAM tower with its neck (hf_sam.py),
    and GotOcr2MultiModalProjector: two bias-free 3x3 stride-2 convs (output_channels -> 2 x it ->
    text hidden) and a biased Linear(text, text) on the (grid / 4)^2 tokens an image fills."""
    fields, _ = _text(c, text_mappers, "qwen2", _GOT_TEXT)
    _, v = _sub(c, "vision_config", "got_ocr2_vision")
    tower, side, out = sam_tower(HFConfig({**_GOT_VISION, **v.data}, v.source, v.path))
    t = fields["hidden"]
    half = _stride2(side)
    quarter = _stride2(half)
    tower["connector"] = [_conv("conv_upsampler1", out, 2 * out, 3, half * half, bias=False),
                          _conv("conv_upsampler2", 2 * out, t, 3, quarter * quarter, bias=False),
                          {**_linear("multimodal_projector", t, t, True), "rows": quarter * quarter}]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)  # the composite's own flag decides (not the text's)
    return fields


_FORMULA_VISION = {**_GOT_VISION, "image_size": 512, "post_conv_in_channels": 256, "post_conv_mid_channels": 512,
                   "post_conv_out_channels": 1024, "decoder_hidden_size": 512}
_FORMULA_TEXT = {"vocab_size": 50000, "max_position_embeddings": 2560, "encoder_layers": 12, "encoder_attention_heads": 16,
                 "decoder_layers": 8, "decoder_ffn_dim": 2048, "decoder_attention_heads": 16, "d_model": 512,
                 "activation_function": "gelu", "scale_embedding": True}
"""PPFormulaNetVisionConfig / PPFormulaNetTextConfig defaults (transformers 5.24)."""


def _stride2(side: int) -> int:
    return (side - 1) // 2 + 1  # Conv2d(k 3, stride 2, padding 1) output side


def _pp_formulanet(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """PPFormulaNetForConditionalGeneration: the SAM tower with its neck (hf_sam.py), its
    multi_modal_projector (two bias-free 3x3 stride-2 convs post_conv_in -> mid -> out channels,
    biased linear_1 (out -> out) and linear_2 (out -> decoder_hidden_size)) and MBartDecoder alone
    (mBART's pre-LN blocks, layernorm_embedding, final layer_norm, + 2 position rows) whose
    encoder_attn reads the projected tokens; lm_head untied (_tied_weights_keys empty)."""
    _, v = _sub(c, "vision_config", "pp_formulanet_vision")
    v = HFConfig({**_FORMULA_VISION, **v.data}, v.source, v.path)
    _, t = _sub(c, "text_config", "pp_formulanet_text")
    t = HFConfig({**_FORMULA_TEXT, **t.data, "tie_word_embeddings": True, "architectures": ["MBartForCausalLM"]},
                 t.source, t.path)
    fields = text_mappers["mbart"](t)
    tower, side, out = sam_tower(v)
    if v.size("post_conv_in_channels") != out:
        raise SpecError(f"{c.source}: vision_config.post_conv_in_channels ({v.size('post_conv_in_channels')}) must "
                        f"equal output_channels ({out})")
    if v.size("decoder_hidden_size") != fields["hidden"]:
        raise SpecError(f"{c.source}: vision_config.decoder_hidden_size ({v.size('decoder_hidden_size')}) must equal "
                        f"text_config.d_model ({fields['hidden']})")
    mid, wide, half = v.size("post_conv_mid_channels"), v.size("post_conv_out_channels"), _stride2(side)
    tokens = _stride2(half) ** 2
    tower["connector"] = [_conv("conv1", out, mid, 3, half * half, bias=False),
                          _conv("conv2", mid, wide, 3, tokens, bias=False),
                          {**_linear("linear_1", wide, wide, True), "rows": tokens},
                          {**_linear("linear_2", wide, fields["hidden"], True), "rows": tokens}]
    fields["vision"] = tower
    fields["seq2seq"] = {**fields["seq2seq"], "cross_memory": tokens}
    fields["tied_embeddings"] = False
    return fields


_UNLIMITED_TEXT = {"vocab_size": 129280, "hidden_size": 1280, "intermediate_size": 6848, "num_hidden_layers": 12,
                   "num_attention_heads": 10, "num_key_value_heads": 10, "max_position_embeddings": 32768,
                   "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
                   "n_group": 1, "n_routed_experts": 64, "n_shared_experts": 2, "routed_scaling_factor": 1.0,
                   "topk_group": 1, "topk_method": "greedy", "num_experts_per_tok": 6, "moe_intermediate_size": 896,
                   "sliding_window": 128}
_UNLIMITED_SAM = {**_GOT_VISION, "downsample_channels": [512, 1024]}
_UNLIMITED_CLIP = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
                   "image_size": 224, "patch_size": 14}
"""UnlimitedOcrTextConfig / UnlimitedOcrSamVisionConfig / UnlimitedOcrVisionEncoderConfig defaults (transformers 5.24)."""


def _unlimited_text(t: HFConfig, reference: bool = True) -> dict:
    """UnlimitedOcrTextModel (DeepseekOcr2TextModel without `reference`: every block full, no
    default mlp_layer_types): Llama-shaped MHA blocks (head_dim = hidden / heads), an MLP per
    mlp_layer_types entry (dense: intermediate_size SwiGLU; sparse: n_routed_experts SwiGLU experts
    of moe_intermediate_size behind a bias-free softmax router, top-k weights not renormalised,
    x routed_scaling_factor, plus one shared MLP of n_shared_experts x moe_intermediate_size);
    reference_sliding_attention blocks are causal over the whole prefill in training
    (create_reference_sliding_window_causal_mask without a cache keeps every earlier key): full."""
    layers, heads = t.size("num_hidden_layers"), t.size("num_attention_heads")
    default = ["sparse" if i >= t.integer("first_k_dense_replace", 1) else "dense" for i in range(layers)]
    kinds = t.texts("mlp_layer_types", None) or (default if reference else None)
    if kinds is None:  # DeepseekOcr2TextConfig leaves it None and DeepseekOcr2TextDecoderLayer indexes it
        raise SpecError(f"{t.source}: {t.path}mlp_layer_types: missing (no default: transformers 5.24 cannot build "
                        f"the model without it either)")
    if len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
        raise SpecError(f"{t.source}: {t.path}mlp_layer_types: {layers} entries of dense / sparse expected, got {kinds}")
    if reference:
        attention = t.texts("layer_types", None) or ["reference_sliding_attention"] * layers
        mixers = ("full_attention", "reference_sliding_attention")  # UnlimitedOcrTextModel's causal_mask_mapping keys
        if len(attention) != layers or set(attention) - set(mixers):
            raise SpecError(f"{t.source}: {t.path}layer_types: {layers} entries of {', '.join(mixers)} expected, "
                            f"got {attention}")
    method = t.text("topk_method")
    if method not in ("greedy", "group_limited_greedy"):
        raise SpecError(f"{t.source}: {t.path}topk_method: unsupported '{method}' (greedy, group_limited_greedy)")
    groups = t.integer("n_group") if method == "group_limited_greedy" else 1
    sparse = [i for i, kind in enumerate(kinds) if kind == "sparse"]
    shared = t.integer("n_shared_experts") or 0
    moe = None
    if sparse:
        if t.data.get("num_experts_per_tok") is None:
            raise SpecError(f"{t.source}: {t.path}num_experts_per_tok: missing (the routers' top-k)")
        moe = dict(num_experts=t.size("n_routed_experts"), top_k=t.size("num_experts_per_tok"),
                   expert_ffn_hidden=t.size("moe_intermediate_size"), router="softmax", expert_bias=False,
                   norm_topk_prob=False, router_groups=groups, router_group_top_k=t.integer("topk_group") if groups > 1 else 1,
                   shared_experts=1 if shared else 0,
                   shared_expert_ffn_hidden=shared * t.size("moe_intermediate_size") if shared else None,
                   routed_scaling=t.number("routed_scaling_factor"), **moe_placement(layers, sparse))
    data = {**t.data, "head_dim": t.size("hidden_size") // heads}
    return llama(HFConfig(data, t.source, t.path), moe=moe)


def _clip_on_features(v: HFConfig, tokens: int) -> list[dict]:
    """UnlimitedOcrVisionEncoder as tower layers: CLIP's blocks on the SAM feature map (no patch
    conv: a class embedding, a (patches + 1)-row position table interpolated to the grid,
    pre_layrnorm, LayerNorm / biased q, k, v, out / LayerNorm / fc1, fc2; no post norm)."""
    h, f, layers = v.size("hidden_size"), v.size("intermediate_size"), v.size("num_hidden_layers")
    positions = (v.size("image_size") // v.size("patch_size")) ** 2 + 1
    rows = dict(rows=tokens)
    return [dict(name="clip/class_embedding", kind="vector", in_features=h),
            dict(name="clip/position_embedding", kind="vector", in_features=positions * h),
            {**_norm("clip/pre_layrnorm", h), **rows},
            {**_norm("clip/layers/norms", h, copies=2 * layers), **rows},
            {**_linear("clip/layers/qkv", h, h, True, copies=3 * layers), **rows},
            dict(name="clip/layers/scores", kind="attention", in_features=h, keys=tokens, copies=layers, **rows),
            {**_linear("clip/layers/out_proj", h, h, True, copies=layers), **rows},
            {**_linear("clip/layers/fc1", h, f, True, copies=layers), **rows},
            {**_linear("clip/layers/fc2", f, h, True, copies=layers), **rows}]


def _unlimited_ocr(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """UnlimitedOcrForConditionalGeneration: the MoE text model above, UnlimitedOcrVisionModel (the
    SAM tower and neck, then its proj: two bias-free 3x3 stride-2 convs to downsample_channels; a
    CLIP encoder on that map, `_clip_on_features`), multi_modal_projector Linear(SAM channels + CLIP
    width, text, bias) on the grid's tokens (the class token dropped), and two learned text-width
    vectors (view_separator, image_newline); untied head. One image is one view at the SAM's
    image_size (the base mode; local crops are further views)."""
    _, t = _sub(c, "text_config", "unlimited_ocr_text")
    fields = _unlimited_text(HFConfig({**_UNLIMITED_TEXT, **t.data}, t.source, t.path))
    _, v = _sub(c, "vision_config", "unlimited_ocr_vision")
    _, sam = _sub(v, "sam_config", "unlimited_ocr_sam_vision_model")
    _, clip = _sub(v, "encoder_config", "unlimited_ocr_vision_encoder")
    sam = HFConfig({**_UNLIMITED_SAM, **sam.data}, sam.source, sam.path)
    tower, side, out = sam_tower(sam)
    mid, wide = sam.ints("downsample_channels")[:2] if len(sam.ints("downsample_channels")) >= 2 else (None, None)
    if mid is None:
        raise SpecError(f"{c.source}: vision_config.sam_config.downsample_channels: two channel counts expected")
    half = _stride2(side)
    grid = _stride2(half) ** 2
    clip = HFConfig({**_UNLIMITED_CLIP, **clip.data}, clip.source, clip.path)
    if clip.size("hidden_size") != wide:
        raise SpecError(f"{c.source}: vision_config.encoder_config.hidden_size ({clip.size('hidden_size')}) must equal "
                        f"sam_config.downsample_channels[-1] ({wide}): the CLIP blocks read the SAM map as embeddings")
    tower["tower"] += [_conv("sam_proj/conv1", out, mid, 3, half * half, bias=False),
                       _conv("sam_proj/conv2", mid, wide, 3, grid, bias=False), *_clip_on_features(clip, grid + 1)]
    h = fields["hidden"]
    tower["connector"] = [{**_linear("multi_modal_projector", wide + clip.size("hidden_size"), h, True), "rows": grid},
                          dict(name="view_separator_image_newline", kind="vector", in_features=h, copies=2)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


_OCR2_TEXT = {"vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
              "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "n_routed_experts": 64,
              "n_shared_experts": 2, "routed_scaling_factor": 1.0, "topk_method": "greedy",
              "moe_intermediate_size": 1407}
_OCR2_SAM = {**_GOT_VISION, "downsample_channels": None}
_OCR2_ENCODER = {"hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32, "num_attention_heads": 32,
                 "num_key_value_heads": None, "rms_norm_eps": 1e-6, "use_sliding_window": False}
"""DeepseekOcr2TextConfig / DeepseekOcr2SamVisionConfig / DeepseekOcr2VisionEncoderConfig defaults (transformers 5.24)."""


def _query_encoder(e: HFConfig, patches: int) -> tuple[list[dict], int]:
    """DeepseekOcr2VisionEncoder as tower layers: Qwen2-shaped blocks (RMSNorms, q / k / v with
    bias, o without, GQA, bias-free SwiGLU, 1-D rotary, a final norm) over the SAM patches
    followed by the learned queries (query_768_resolution, 144 rows, when patches <= 144, else
    query_1024_resolution, 256 rows; both tables built); (layers, queries)."""
    if e.flag("use_sliding_window"):
        raise SpecError(f"{e.source}: {e.path}use_sliding_window: true is not modelled (sliding vision blocks)")
    h, f, layers, heads = (e.size(k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                                 "num_attention_heads"))
    kv = e.integer("num_key_value_heads", None, nullable=True) or heads
    if h % heads or heads % kv:
        raise SpecError(f"{e.source}: {e.path}num_key_value_heads: {kv} must divide num_attention_heads ({heads}), "
                        f"which must divide hidden_size ({h})")
    queries = 144 if patches <= 144 else 256  # DeepseekOcr2VisionModel.forward
    n, d = patches + queries, h // heads
    rows = dict(rows=n)
    return [dict(name="encoder/queries", kind="vector", in_features=h, copies=144 + 256),
            {**_norm("encoder/layers/norms", h, "rmsnorm", copies=2 * layers), **rows},
            {**_linear("encoder/layers/q_proj", h, h, True, copies=layers), **rows},
            {**_linear("encoder/layers/kv_proj", h, kv * d, True, copies=2 * layers), **rows},
            dict(name="encoder/layers/scores", kind="attention", in_features=h, keys=n, copies=layers, **rows),
            {**_linear("encoder/layers/o_proj", h, h, False, copies=layers), **rows},
            {**_linear("encoder/layers/gate_up", h, f, False, copies=2 * layers), **rows},
            {**_linear("encoder/layers/down", f, h, False, copies=layers), **rows},
            {**_norm("encoder/norm", h, "rmsnorm"), **rows}], queries


def _deepseek_ocr2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """DeepseekOcr2ForConditionalGeneration: the MoE text model (`_unlimited_text` without reference
    blocks), DeepseekOcr2VisionModel (the SAM tower, neck and proj convs to downsample_channels,
    then `_query_encoder` over the patches and the queries, whose outputs the image keeps),
    multi_modal_projector Linear(encoder width, text, bias) on the queries, a view_separator
    vector; the head is untied unless tie_word_embeddings. One image is one view at the SAM's
    image_size (local crops are further views)."""
    _, t = _sub(c, "text_config", "deepseek_ocr2_text")
    fields = _unlimited_text(HFConfig({**_OCR2_TEXT, **t.data}, t.source, t.path), reference=False)
    _, v = _sub(c, "vision_config", "deepseek_ocr2_vision")
    _, sam = _sub(v, "sam_config", "deepseek_ocr2_sam_vision_model")
    _, enc = _sub(v, "encoder_config", "deepseek_ocr2_encoder")
    sam = HFConfig({**_OCR2_SAM, **sam.data}, sam.source, sam.path)
    enc = HFConfig({**_OCR2_ENCODER, **enc.data}, enc.source, enc.path)
    channels = sam.data.get("downsample_channels")
    if not isinstance(channels, list) or len(channels) != 2:
        raise SpecError(f"{c.source}: vision_config.sam_config.downsample_channels: two channel counts expected, "
                        f"got {channels!r}")
    mid, wide = sam.ints("downsample_channels")
    if wide != enc.size("hidden_size"):
        raise SpecError(f"{c.source}: vision_config.sam_config.downsample_channels[-1] ({wide}) must equal "
                        f"encoder_config.hidden_size ({enc.size('hidden_size')}): the encoder reads the SAM map")
    tower, side, out = sam_tower(sam)
    half = _stride2(side)
    patches = _stride2(half) ** 2
    encoder, queries = _query_encoder(enc, patches)
    tower["tower"] += [_conv("sam_proj/conv1", out, mid, 3, half * half, bias=False),
                       _conv("sam_proj/conv2", mid, wide, 3, patches, bias=False), *encoder]
    h = fields["hidden"]
    tower["connector"] = [{**_linear("multi_modal_projector", wide, h, True), "rows": queries},
                          dict(name="view_separator", kind="vector", in_features=h)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


OCR_MORE_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "got_ocr2": _got_ocr2, "pp_formulanet": _pp_formulanet, "unlimited_ocr": _unlimited_ocr,
    "deepseek_ocr2": _deepseek_ocr2,
    "pp_chart2table": _got_ocr2,  # PPChart2TableConfig: GotOcr2Config's fields and defaults (GotOcr2ForConditionalGeneration)
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
