"""HF config mappers of standalone vision encoders over patches (`specs.encoder_inputs.PatchInput`):
ViT (and ViT-MSN), DeiT, DINOv2 (with registers), DINOv3, BEiT (data2vec-vision), I-JEPA, the
Audio Spectrogram Transformer and the CLIP / SigLIP / SigLIP 2 vision models; the helpers the
image-text pairs (hf_image_text) and the speech encoders (hf_audio) share.

The head is the class `architectures[0]` names, as transformers 5.24 builds it (modeling_vit.py,
modeling_deit.py, modeling_dinov2.py, modeling_dinov3_vit.py, modeling_beit.py, modeling_clip.py,
modeling_siglip.py, modeling_siglip2.py, modeling_audio_spectrogram_transformer.py); without
`architectures`, the base model (ViTModel, ..., CLIPVisionModel). A head class outside
`HEADS` is refused naming the supported ones.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_inputs import PatchInput
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18vlm_base import CLASS_DEFAULTS

Mapper = Callable[[HFConfig], dict]

HEADS: dict[str, tuple[str, ...]] = {
    "vit": ("ViTModel", "ViTForImageClassification"),
    "vit_msn": ("ViTMSNModel", "ViTMSNForImageClassification"),
    "deit": ("DeiTModel", "DeiTForImageClassification", "DeiTForImageClassificationWithTeacher"),
    "dinov2": ("Dinov2Model", "Dinov2ForImageClassification"),
    "dinov2_with_registers": ("Dinov2WithRegistersModel", "Dinov2WithRegistersForImageClassification"),
    "ijepa": ("IJepaModel", "IJepaForImageClassification"),
    "dinov3_vit": ("DINOv3ViTModel",),
    "beit": ("BeitModel", "BeitForImageClassification"),
    "data2vec-vision": ("Data2VecVisionModel", "Data2VecVisionForImageClassification"),
    "audio-spectrogram-transformer": ("ASTModel", "ASTForAudioClassification"),
    "clip_vision_model": ("CLIPVisionModel", "CLIPVisionModelWithProjection"),
    "siglip_vision_model": ("SiglipVisionModel",),
    "siglip2_vision_model": ("Siglip2VisionModel",),
}
"""model_type -> the classes whose head is modelled; the first is the base model."""


_VIT_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
             "image_size": 224, "patch_size": 16, "num_channels": 3}
_DEFAULTS: dict[str, dict] = {
    "vit": _VIT_BASE,
    "ijepa": _VIT_BASE,
    "beit": _VIT_BASE,
    "audio-spectrogram-transformer": {**_VIT_BASE, "frequency_stride": 10, "time_stride": 10, "max_length": 1024,
                                      "num_mel_bins": 128},
    "data2vec-vision": _VIT_BASE,
    "dinov2_with_registers": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                              "image_size": 224, "patch_size": 16, "num_channels": 3, "num_register_tokens": 4},
    "dinov3_vit": {"hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 6, "intermediate_size": 1536,
                   "image_size": 224, "patch_size": 16, "num_channels": 3},
    "dinov2": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "image_size": 224,
               "patch_size": 14, "num_channels": 3},
    "clip_vision_model": {**CLASS_DEFAULTS["clip_vision_model"], "projection_dim": 512},
    "siglip_vision_model": CLASS_DEFAULTS["siglip_vision_model"],
    "siglip2_vision_model": CLASS_DEFAULTS["siglip2_vision_model"],
}
"""Size defaults of the config classes (transformers 5.24 AutoConfig.for_model; DeiTConfig's and
ViTMSNConfig's are ViTConfig's): a save with use_diff leaves out what equals them."""


def with_defaults(c: HFConfig, kind: str, defaults: dict[str, dict] = _DEFAULTS) -> HFConfig:
    """`c` over its config class's size defaults."""
    return HFConfig({**defaults[kind], **c.data}, c.source, c.path)


def architecture(c: HFConfig, model_type: str, heads: dict[str, tuple[str, ...]] = HEADS) -> str:
    """architectures[0], else the base model; a class outside `heads` is a one-line error."""
    names = c.texts("architectures", None)
    name = names[0] if names else heads[model_type][0]
    if name not in heads[model_type]:
        raise SpecError(f"{c.source}: architectures: '{name}' not modelled (supported: "
                        f"{', '.join(heads[model_type])}; without architectures: {heads[model_type][0]})")
    return name


def linear(name: str, n_in: int, n_out: int, bias: bool = True, rows: int | None = 1) -> dict:
    """A head layer: Linear(n_in, n_out) on `rows` rows per sequence (None: every token)."""
    return dict(name=name, kind="linear", in_features=n_in, out_features=n_out, bias=bias, rows=rows)


def labels(c: HFConfig) -> int:
    """num_labels; a 0-label classifier is nn.Identity in these classes (refused: no layer)."""
    labels = c.num_labels()
    if labels < 1:
        raise SpecError(f"{c.source}: num_labels: {labels} builds no classifier (nn.Identity); at least 1 is needed")
    return labels


def _encoder(c: HFConfig, ffn: int, patches: dict, image_size: int, *, qkv_bias: bool = True,
             activation: str = "gelu", **fields) -> dict:
    """A pre-LN ViT encoder over one image: LayerNorm (with bias) / biased attention and fc1-fc2
    blocks, one learned position row per patch and prefix token, a final LayerNorm."""
    patch = c.size("patch_size")
    if patch > min(patches.get("input_size") or [image_size]):
        raise SpecError(f"{c.source}: patch_size: {patch} exceeds image_size {patches.get('input_size') or image_size}")
    inputs = dict(modality="image", channels=c.size("num_channels"), patch_size=patch, image_size=image_size, **patches)
    # one position row per patch and prefix token (register tokens have none); validated by the spec
    rows = PatchInput.model_construct(**inputs).patches + inputs.get("prefix_tokens", 1)
    return dict(
        arch="encoder", layers=c.size("num_hidden_layers"), hidden=c.size("hidden_size"),
        heads=c.divisor("num_attention_heads"), ffn_hidden=ffn, vocab=1,  # no token table (inputs)
        position="learned", max_positions=rows, norm="layernorm", norm_bias=True, norm_placement="pre",
        norm_eps=c.number("layer_norm_eps", 1e-12), qkv_bias=qkv_bias, attn_out_bias=True, mlp_bias=True,
        gated_mlp=False, activation=c.activation(activation, "hidden_act"), lm_head=False,
        tied_embeddings=False, inputs=inputs, **{"final_norm": True, **fields})


def _ast(c: HFConfig) -> dict:
    """Audio Spectrogram Transformer: ViT's blocks over a num_mel_bins x max_length spectrogram cut
    by Conv2d(1, h, patch_size, stride (frequency_stride, time_stride)) into overlapping patches,
    cls and distillation tokens, (patches + 2) positions, a final LayerNorm; ASTForAudioClassification:
    ASTMLPHead (LayerNorm, Linear(h, num_labels)) on the mean of the two tokens."""
    name = architecture(c, "audio-spectrogram-transformer")
    c = with_defaults(c, "audio-spectrogram-transformer")
    size = [c.size("num_mel_bins"), c.size("max_length")]
    h = c.size("hidden_size")
    head = ([dict(name="classifier/layernorm", kind="layernorm", in_features=h, bias=True),
             linear("classifier/dense", h, labels(c))] if name.endswith("Classification") else [])
    fields = HFConfig({**c.data, "num_channels": 1}, c.source, c.path)
    return _encoder(fields, c.size("intermediate_size"),
                    dict(prefix_tokens=2, input_size=size, head=head,
                         patch_stride=[c.divisor("frequency_stride"), c.divisor("time_stride")]),
                    max(size), qkv_bias=c.flag("qkv_bias", True))


def _vit(c: HFConfig) -> dict:
    """ViTModel (cls token, ViTPooler dense(h, pooler_output_size) + tanh on it), ViTMSNModel (no
    pooler) or ...ForImageClassification (no pooler, Linear(h, num_labels) on the cls token)."""
    c = with_defaults(c, "vit")
    name, h = architecture(c, c.text("model_type")), c.size("hidden_size")
    head = ([linear("pooler", h, c.integer("pooler_output_size", h, nullable=True) or h)] if name == "ViTModel"
            else [linear("classifier", h, labels(c))] if name.endswith("ForImageClassification") else [])
    return _encoder(c, c.size("intermediate_size"), dict(head=head), c.size("image_size"),
                    qkv_bias=c.flag("qkv_bias", True))


def _deit(c: HFConfig) -> dict:
    """DeiT: ViT's blocks behind cls and distillation tokens (patches + 2 positions); DeiTModel's
    pooler, DeiTForImageClassification's classifier on the cls token, or ...WithTeacher's
    cls_classifier and distillation_classifier."""
    c = with_defaults(c, "vit")
    name, h = architecture(c, "deit"), c.size("hidden_size")
    if name == "DeiTModel":
        head = [linear("pooler", h, c.integer("pooler_output_size", h, nullable=True) or h)]
    elif name == "DeiTForImageClassification":
        head = [linear("classifier", h, labels(c))]
    else:
        head = [linear("cls_classifier", h, labels(c)), linear("distillation_classifier", h, labels(c))]
    return _encoder(c, c.size("intermediate_size"), dict(prefix_tokens=2, head=head), c.size("image_size"),
                    qkv_bias=c.flag("qkv_bias", True))


def _dinov2(c: HFConfig) -> dict:
    """DINOv2: cls and mask tokens, LayerScale on both branches (2h a block: counted as the block's
    per-channel residual weights), fc1-fc2 of int(h mlp_ratio) or the SwiGLU FFN (weights_in
    Linear(h, 2 f'), weights_out Linear(f', h), f' = (int(2/3 int(h mlp_ratio)) + 7) // 8 * 8);
    Dinov2ForImageClassification: Linear(2h, num_labels) on [cls, mean of the patches]; DINOv2
    with registers: num_register_tokens learned tokens after the cls token, without position rows."""
    c = with_defaults(c, c.text("model_type"))
    kind = c.text("model_type")
    name, h = architecture(c, kind), c.size("hidden_size")
    inner = int(h * c.number("mlp_ratio", 4, positive=True))  # Dinov2MLP / Dinov2SwiGLUFFN hidden_features
    swiglu = c.flag("use_swiglu_ffn", False)
    ffn = (int(inner * 2 / 3) + 7) // 8 * 8 if swiglu else inner
    head = [linear("classifier", 2 * h, labels(c))] if name.endswith("ForImageClassification") else []
    registers = c.integer("num_register_tokens", 4) if kind == "dinov2_with_registers" else 0
    fields = _encoder(c, ffn, dict(mask_token=True, register_tokens=registers, head=head), c.size("image_size"),
                      qkv_bias=c.flag("qkv_bias", True), residual_weights=True)
    if swiglu:
        fields.update(gated_mlp=True, activation="silu")
    return fields


def _dinov3(c: HFConfig) -> dict:
    """DINOv3ViTModel: cls, register and mask tokens, 2-D rotary positions (no table), q / k / v / o
    biases as query_bias / key_bias / value_bias / proj_bias (biased q and v over a bias-free k
    counted as the input's qv_bias), LayerScale on both branches (the blocks' residual weights,
    2h), up-down or gated MLP with mlp_bias, a final LayerNorm."""
    architecture(c, "dinov3_vit")
    c = with_defaults(c, "dinov3_vit")
    q, k, v = (c.flag(key, default) for key, default in (("query_bias", True), ("key_bias", False), ("value_bias", True)))
    if not (q == k == v or (q and v and not k)):
        raise SpecError(f"{c.source}: key_bias: query_bias {q} / key_bias {k} / value_bias {v} not modelled "
                        f"(all equal, or biased q and v over a bias-free k)")
    gated = c.flag("use_gated_mlp", False)
    fields = _encoder(c, c.size("intermediate_size"),
                      dict(register_tokens=c.integer("num_register_tokens", 0), mask_token=True, qv_bias=q and not k),
                      c.size("image_size"), qkv_bias=q and k, residual_weights=True)
    fields.update(position="rotary", rope_theta=c.number("rope_theta", 100.0, positive=True), norm_eps=c.number(
        "layer_norm_eps", 1e-5), attn_out_bias=c.flag("proj_bias", True), mlp_bias=c.flag("mlp_bias", True),
        gated_mlp=gated)
    fields.pop("max_positions")
    return fields


def _beit(c: HFConfig) -> dict:
    """BEiT / data2vec-vision: cls token (mask token with use_mask_token), a learned table only with
    use_absolute_position_embeddings, biased q and v over a bias-free k, relative position bias
    tables (per block, or shared), LayerScale lambda_1 / lambda_2 when layer_scale_init_value > 0
    (the blocks' residual weights, 2h); the final LayerNorm (use_mean_pooling false) or the
    pooler's LayerNorm over the mean patch (true, built when add_pooling_layer: BeitModel,
    ...ForImageClassification; Data2VecVisionModel has none); ...ForImageClassification:
    Linear(h, num_labels) on the pooled token."""
    kind = c.text("model_type")
    name = architecture(c, kind)
    c = with_defaults(c, kind)
    h, mean = c.size("hidden_size"), c.flag("use_mean_pooling", True)
    pooler = name != "Data2VecVisionModel"  # add_pooling_layer
    shared = c.flag("use_shared_relative_position_bias", False)
    relative = "shared" if shared else "block" if c.flag("use_relative_position_bias", False) else "none"
    head = [linear("classifier", h, labels(c))] if name.endswith("ForImageClassification") else []
    fields = _encoder(c, c.size("intermediate_size"),
                      dict(mask_token=c.flag("use_mask_token", False), qv_bias=True, relative_bias=relative, head=head),
                      c.size("image_size"), qkv_bias=False,
                      residual_weights=(c.number("layer_scale_init_value", 0.1) or 0) > 0,
                      final_norm=not mean or pooler)
    if not c.flag("use_absolute_position_embeddings", False):
        fields.update(position="none")
        fields.pop("max_positions")
    return fields


def _ijepa(c: HFConfig) -> dict:
    """I-JEPA: ViT's blocks over the patches alone (no cls token, one position per patch), no
    pooler; IJepaForImageClassification: Linear(h, num_labels) on the mean of the patches."""
    c = with_defaults(c, "ijepa")
    name, h = architecture(c, "ijepa"), c.size("hidden_size")
    head = [linear("classifier", h, labels(c))] if name.endswith("ForImageClassification") else []
    return _encoder(c, c.size("intermediate_size"), dict(prefix_tokens=0, head=head), c.size("image_size"),
                    qkv_bias=c.flag("qkv_bias", True))


def clip_vision(c: HFConfig, head: list[dict] | None = None) -> dict:
    """CLIPVisionModel: bias-free patch conv, class embedding, pre_layrnorm, blocks, post_layernorm
    on the pooled class token; ...WithProjection adds visual_projection Linear(h, projection_dim,
    bias=False); `head`: a composite's classifier instead (architectures not read)."""
    c = with_defaults(c, "clip_vision_model")
    h = c.size("hidden_size")
    if head is None:
        name = architecture(c, "clip_vision_model")
        head = [linear("visual_projection", h, c.size("projection_dim"), bias=False)] if name.endswith("Projection") else []
    return _encoder(c, c.size("intermediate_size"), dict(patch_bias=False, head=head), c.size("image_size"),
                    activation="quick_gelu", embedding_norm=True)


def siglip_vision(c: HFConfig, kind: str = "siglip_vision_model", head: list[dict] | None = None) -> dict:
    """SiglipVisionModel: biased patch conv, one position per patch (no class token), blocks,
    post_layernorm, the attention-pooling head when vision_use_head; Siglip2VisionModel: a biased
    Linear(C p^2, h) patch embedding (the conv's count and FLOPs) and num_patches position rows, an
    image of sqrt(num_patches)^2 patches. `head`: a composite's classifier (architectures not read)."""
    if head is None:
        architecture(c, kind)
    c = with_defaults(c, kind)
    image_size = c.size("image_size") if kind == "siglip_vision_model" else None
    if image_size is None:
        rows = c.size("num_patches")
        side = int(round(rows ** 0.5))
        if side * side != rows:
            raise SpecError(f"{c.source}: {c.path}num_patches: must be a square, got {rows}")
        image_size = side * c.size("patch_size")
    return _encoder(c, c.size("intermediate_size"),
                    dict(prefix_tokens=0, pooling_head=c.flag("vision_use_head", True), head=head or []),
                    image_size, activation="gelu_pytorch_tanh")


VISION_MODEL_MAPPERS: dict[str, Mapper] = {
    "vit": _vit, "vit_msn": _vit, "deit": _deit, "dinov2": _dinov2, "dinov2_with_registers": _dinov2, "ijepa": _ijepa,
    "dinov3_vit": _dinov3, "beit": _beit, "data2vec-vision": _beit, "audio-spectrogram-transformer": _ast,
    "clip_vision_model": clip_vision, "siglip_vision_model": siglip_vision,
    "siglip2_vision_model": lambda c: siglip_vision(c, "siglip2_vision_model"),
}
