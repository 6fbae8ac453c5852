"""HF config mappers of more BERT-shaped encoders (transformers 5.24 modeling code): gte and
jina_embeddings_v3 (post-LN rotary blocks), layoutlm (2-D position tables), markuplm (XPath
embeddings), tapas (seven token-type tables), yoso, mra and nystromformer (BERT's modules, their
approximate attention parameter-free but for Nystromformer's value conv), fnet (Fourier mixing:
MLP-only blocks) and convbert (span-based dynamic convolution heads). Each is BERT's encoder
(`hf_gpt._bert`) with the groups its modeling file adds as `extras.side` (specs/encoder_side.py);
heads are BERT's (`hf.apply_head`), their classification heads' dense + out_proj the size of
BERT's pooler + classifier."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_side import layer_norm, linear, table
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS

_bert = GPT_MAPPERS["bert"]


def _with(c: HFConfig, **keys) -> HFConfig:
    """`c` with some keys defaulted (the config class defaults BERT's mapper would read otherwise)."""
    return HFConfig({**keys, **c.data}, c.source, c.path, c.defaults)


def _side(fields: dict, embedding: list[dict] | None = None, block: list[dict] | None = None,
          head: list[dict] | None = None) -> dict:
    """`fields` with side groups added to its extras."""
    extras = dict(fields.get("extras") or {})
    extras["side"] = {"embedding": embedding or [], "block": block or [], "head": head or []}
    return {**fields, "extras": extras}


def _rope_theta(c: HFConfig, default: float) -> float:
    """rope_parameters.rope_theta, else rope_theta, else the config class's default_theta."""
    nested = c.sub("rope_parameters")
    if nested is not None and nested.has("rope_theta"):
        return nested.number("rope_theta")
    return c.number("rope_theta", default)


def _gte(c: HFConfig) -> dict:
    """GteModel (gte-multilingual): BERT's post-LN blocks (q/k/v/o biased, post_attention_layernorm,
    post_mlp_layernorm) with rotary q/k (GteConfig.default_theta 160000), no position table, a
    gated MLP (gate_proj, up_proj bias-free; down_proj with bias), token types (1), the embedding
    LayerNorm; no pooler in GteModel (its sequence classifier adds one); MLM head as BERT's."""
    c = _with(c, type_vocab_size=1, max_position_embeddings=8192, layer_norm_eps=1e-12)
    fields = {**_bert(c), "position": "rotary", "rope_theta": _rope_theta(c, 160000.0), "gated_mlp": True,
              "mlp_bias": False, "pooler": False}
    return _side(fields, block=[dict(name="down_proj_bias", params=fields["hidden"])])  # GteMLP.down_proj.bias


def _jina_v3(c: HFConfig) -> dict:
    """JinaEmbeddingsV3Model: XLM-RoBERTa's post-LN blocks (biased q/k/v/o, fc1/fc2) with rotary q/k
    (JinaEmbeddingsV3Config.default_theta 20000), no position table, token types (1), its pooler.
    The published checkpoint's task LoRA adapters are not modules of transformers' port: none
    counted."""
    c = _with(c, type_vocab_size=1, max_position_embeddings=8194, layer_norm_eps=1e-5)
    return {**_bert(c), "position": "rotary", "rope_theta": _rope_theta(c, 20000.0)}


def _layoutlm(c: HFConfig) -> dict:
    """LayoutLMModel: BERT's modules plus x / y / h / w position tables, each
    Embedding(max_2d_position_embeddings, h), summed into the embedding (Xu et al. 2020 sec. 2.2)."""
    fields = _bert(c)
    rows = c.integer("max_2d_position_embeddings", 1024)
    return _side(fields, embedding=[table("xywh_position", rows, fields["hidden"], copies=4)])


def _tapas(c: HFConfig) -> dict:
    """TapasModel: BERT's modules with one token-type table per entry of type_vocab_sizes
    (token_type_embeddings_0..6, each h wide: their rows add up as one table's); TapasForQuestionAnswering's
    cell-selection and aggregation weights are not modelled."""
    names = c.texts("architectures", None) or [""]
    if names[0].endswith("ForQuestionAnswering"):
        raise SpecError(f"{c.source}: architectures: '{names[0]}' is not modelled (TAPAS's cell-selection "
                        f"output_weights / column_output_weights and aggregation classifier)")
    sizes = c.data.get("type_vocab_sizes", [3, 256, 256, 2, 256, 256, 10])  # TapasConfig's default
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n > 0 for n in sizes):
        raise SpecError(f"{c.source}: type_vocab_sizes: expected a list of positive integers, got {sizes!r}")
    return {**_bert(_with(c, max_position_embeddings=1024)), "type_vocab": sum(sizes)}


def _offset_bert(conv: str | None, type_vocab: int = 1) -> Callable[[HFConfig], dict]:
    """YosoModel / MraModel / NystromformerModel: BERT's modules with max_position_embeddings + 2
    position rows, `type_vocab` token types, no pooler (their classification heads' dense is the pooler's
    size); `conv` names the key of a depthwise Conv2d(heads, heads, (k, 1), groups=heads,
    bias=False) over each head's values (YOSO conv_window, Nystromformer conv_kernel_size): heads x k
    weights, k multiply-adds per value element."""
    def mapper(c: HFConfig) -> dict:
        c = _with(c, type_vocab_size=type_vocab, max_position_embeddings=4096 if conv == "conv_window" else 512)
        fields = {**_bert(c), "pooler": False, "extras": {"position_offset": 2}}
        kernel = c.integer(conv, 65 if conv == "conv_kernel_size" else None) if conv else None
        if not kernel:
            return fields
        heads, h = fields["heads"], fields["hidden"]
        return _side(fields, block=[dict(name="value_conv", params=heads * kernel, macs=kernel * h)])
    return mapper


def _fnet(c: HFConfig) -> dict:
    """FNetModel (Lee-Thorp et al. 2022): BERT's embeddings then embeddings.projection Linear(h, h)
    with bias (extras.input_width = h), blocks of a parameter-free Fourier transform (its
    output LayerNorm) and BERT's MLP with its LayerNorm: two norms a block, no attention; its pooler;
    heads as BERT's (FFTs are not GEMMs: no FLOPs counted for the mixing)."""
    c = _with(c, type_vocab_size=4, layer_norm_eps=1e-12, hidden_act="gelu_new", num_attention_heads=1)
    fields = _bert(c)
    return {**fields, "layer_types": ["mlp"] * fields["layers"], "mlp": False, "norms_per_layer": 2,
            "extras": {"input_width": fields["hidden"]}}


def _convbert(c: HFConfig) -> dict:
    """ConvBertModel (Jiang et al. 2020): BERT's modules at embedding_size with
    embeddings_project Linear(E, h) when E != h; each block's attention runs heads // head_ratio
    heads (query / key / value h -> h / head_ratio, biased) beside the span-based dynamic
    convolution: key_conv_attn_layer (depthwise Conv1d(h, h, k, groups=h, bias=False), pointwise
    Conv1d(h, h / r, 1, bias=False), bias (h / r, 1)), conv_kernel_layer Linear(h / r, heads_c x k),
    conv_out_layer Linear(h, h / r); attention.output.dense reads both halves (h x h); the MLP is
    BERT's (num_groups 1: grouped linears refused)."""
    if c.integer("num_groups", 1) != 1:
        raise SpecError(f"{c.source}: num_groups: {c.integer('num_groups')} is not modelled (ConvBERT's grouped "
                        f"intermediate / output linears)")
    fields = _bert(c)
    h, heads = fields["hidden"], fields["heads"]
    ratio, k = c.integer("head_ratio", 2), c.integer("conv_kernel_size", 9)
    local = max(heads // ratio, 1)  # ConvBertSelfAttention.num_attention_heads (1 when head_ratio > heads)
    if h % local:
        raise SpecError(f"{c.source}: hidden_size: {h} must be divisible by num_attention_heads // head_ratio ({local})")
    d = h // local // 2  # attention_head_size
    half = local * d  # all_head_size = h / head_ratio
    embedding = c.integer("embedding_size", 768)  # ConvBertConfig's default
    fields.update(heads=local, head_dim=d, extras={"input_width": embedding} if embedding != h else None)
    block = [
        dict(name="conv/key_depthwise", params=h * k, macs=h * k, kept=h),  # SeparableConv1D.depthwise
        linear("conv/key_pointwise", h, half, bias=False),  # SeparableConv1D.pointwise
        dict(name="conv/key_bias", params=half),  # SeparableConv1D.bias (h / r, 1)
        linear("conv/kernel", half, local * k),  # conv_kernel_layer
        linear("conv/out", h, half),  # conv_out_layer
        dict(name="conv/unfold", macs=half * k),  # the (h / r) x k unfolded span times its kernel
        linear("conv/output_share", h - half, h, bias=False),  # output.dense's rows reading the conv half
    ]
    return _side(fields, block=block)


def _grouped(name: str, n_in: int, n_out: int, groups: int) -> dict:
    """nn.Conv1d(n_in, n_out, 1, groups) with bias over every token: n_in / groups x n_out weights."""
    return dict(name=name, params=n_in // groups * n_out + n_out, macs=n_in // groups * n_out, kept=n_in)


def _squeezebert(c: HFConfig) -> dict:
    """SqueezeBertModel (Iandola et al. 2020): BERT's embeddings, its pooler and heads; every block's
    q / k / v (q_groups, k_groups, v_groups), post-attention (post_attention_groups), intermediate
    (intermediate_groups) and output (output_groups) linears are grouped 1x1 Conv1d with bias, held as
    side groups beside the block's two LayerNorms (the blocks read as mixer-free `mlp` layers whose MLP,
    of width f / groups, has the grouped intermediate / output convs' weights and multiply-adds; the
    attention scores QK^T and AV, 2 x h multiply-adds a token a key, are a side group too)."""
    fields = _bert(c)
    h, f, layers = fields["hidden"], fields["ffn_hidden"], fields["layers"]
    if c.integer("embedding_size", 768) != h:
        raise SpecError(f"{c.source}: embedding_size: {c.integer('embedding_size')} != hidden_size ({h}) "
                        f"(SqueezeBertEncoder asserts they are equal)")
    groups = {key: c.integer(key, default) for key, default in (("q_groups", 4), ("k_groups", 4), ("v_groups", 4),
              ("post_attention_groups", 1), ("intermediate_groups", 4), ("output_groups", 4))}
    widths = {"q_groups": (h, h), "k_groups": (h, h), "v_groups": (h, h), "post_attention_groups": (h, h),
              "intermediate_groups": (h, f), "output_groups": (f, h)}
    for key, g in groups.items():
        if g <= 0 or any(w % g for w in widths[key]):
            raise SpecError(f"{c.source}: {key}: {g} must divide the conv's channels {widths[key]}")
    g = groups["intermediate_groups"]
    if groups["output_groups"] != g:
        raise SpecError(f"{c.source}: output_groups: {groups['output_groups']} != intermediate_groups ({g}) is not "
                        f"modelled (the MLP is read as one of width intermediate_size / groups)")
    block = [_grouped("attention/" + k[0], h, h, groups[k]) for k in ("q_groups", "k_groups", "v_groups")]
    block += [dict(name="attention/scores", macs_per_key=2 * h), _grouped("attention/out", h, h, groups["post_attention_groups"]),
              dict(name="mlp/in_bias", params=f - f // g, kept=f - f // g)]  # the rest of intermediate's f biases, inputs
    # the MLP: Linear(h, f / g) and Linear(f / g, h) hold h f / g weights each, as the grouped 1x1 convs do
    fields = {**fields, "layer_types": ["mlp"] * layers, "mlp": False, "norms_per_layer": 2, "ffn_hidden": f // g}
    return _side(fields, block=block)


def _luke(c: HFConfig) -> dict:
    """LukeModel (Yamada et al. 2020): RoBERTa's text modules and pooler beside LukeEntityEmbeddings
    (entity_embeddings (entity_vocab_size, E), entity_embedding_dense Linear(E, h, bias=False) when
    E != h, its own position and token-type tables, LayerNorm) and, with use_entity_aware_attention,
    each block's w2e_query / e2w_query / e2e_query Linear(h, h). FLOPs and memory are a word-only
    forward's (entity tokens joining the sequence are not modelled)."""
    fields = _bert(c)
    h, e = fields["hidden"], c.integer("entity_emb_size", 256)
    embedding = [table("entity/token", c.integer("entity_vocab_size", 500000), e),
                 table("entity/position", fields["max_positions"], h), table("entity/token_type", fields["type_vocab"], h),
                 layer_norm("entity/norm", h)]
    if e != h:
        embedding.append(dict(name="entity/dense", params=e * h))
    block = [dict(name="entity_queries", params=3 * (h * h + h))] if c.flag("use_entity_aware_attention", True) else []
    return _side(fields, embedding=embedding, block=block)


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
    return _side(fields, embedding=embedding)


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
    return _side(fields, embedding=embedding, block=block)


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
    fields = {**llama(_with(c, max_position_embeddings=2048)), "arch": "encoder", "norm": "layernorm",
              "norm_bias": False, "norm_eps": 1e-5, "qk_norm": True, "qk_norm_scope": "all_heads"}
    return _side(fields, block=[dict(name="norm_biases", params=2 * fields["hidden"])])  # the two block LayerNorms' biases


def _ultrabert(c: HFConfig) -> dict:
    """UltrabertModel: Llama's blocks (RMSNorm, rotary, gated MLP, GQA) attending both ways, its
    sliding_attention blocks (every block but each third by default, layer_types) seeing the keys
    within sliding_window on either side (create_bidirectional_sliding_window_mask: |i - j| <=
    sliding_window), the final norm."""
    from modelplan.specs.hf_llama import llama

    fields = {**llama(_with(c, max_position_embeddings=32768)), "arch": "encoder"}
    layers, window = fields["layers"], c.integer("sliding_window", 128)
    kinds = c.texts("layer_types", None) or ["sliding_attention" if (i + 1) % 3 else "full_attention"
                                             for i in range(layers)]
    rope = c.sub("rope_parameters")
    full = rope.sub("full_attention") if rope is not None and rope.has("full_attention") else rope
    theta = full.number("rope_theta", 2560000.0) if full is not None else 2560000.0  # UltrabertConfig's full_attention base
    return {**fields, "layer_types": kinds, "sliding_window": 2 * window + 1, "rope_theta": theta}


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
    fields = _bert(_with(c, layer_norm_eps=1e-5))
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
    return _side({**fields, "pooler": False}, embedding=embedding)


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


ENCODERS_MORE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "gte": _gte, "jina_embeddings_v3": _jina_v3, "layoutlm": _layoutlm, "tapas": _tapas,
    "yoso": _offset_bert("conv_window"), "mra": _offset_bert(None), "nystromformer": _offset_bert("conv_kernel_size", 2),
    "fnet": _fnet, "convbert": _convbert, "markuplm": _markuplm, "lilt": _lilt,
    "esmc": _esmc, "ultrabert": _ultrabert, "layoutlmv3": _layoutlmv3,
    "modernvbert": _modernvbert, "ultravbert": _ultravbert, "squeezebert": _squeezebert,
    "luke": _luke,
}


def _pooled_always(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BERT's heads over a body that keeps its pooler under every head (LayoutLMModel builds
    LayoutLMPooler whatever the head; so do FNet and SqueezeBERT)."""
    return {**apply_head(fields, c, architecture(c)), "pooler": True}


def _qa_two_labels(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BERT's heads; ...ForQuestionAnswering sets num_labels 2 before building qa_outputs (YOSO, MRA,
    Nystromformer)."""
    fields = apply_head(fields, c, architecture(c))
    if (architecture(c) or "").endswith("ForQuestionAnswering"):
        return {**fields, "classifier": {"num_labels": 2, "per_token": True}}
    return fields


def _convbert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BERT's heads without a pooler in ConvBertModel: ConvBertForMultipleChoice's sequence_summary is
    the first token, with Linear(h, h) only under summary_use_proj (XLM's SequenceSummary), then
    classifier Linear(h, 1)."""
    name = architecture(c) or ""
    fields = apply_head(fields, c, name)
    if name.endswith("ForMultipleChoice"):
        if c.flag("summary_use_proj", False) and c.flag("summary_proj_to_labels", False):
            raise SpecError(f"{c.source}: summary_proj_to_labels: true is not modelled (a num_labels-wide summary)")
        return {**fields, "pooler": c.flag("summary_use_proj", False)}
    return {**fields, "pooler": False} if name.endswith("Model") else fields


def big_bird_task_head(fields: dict, c: HFConfig, name: str) -> dict:
    """BigBirdForSequenceClassification: the pooler (computed, unused) beside BigBirdClassificationHead,
    dense h x h on the first token then out_proj Linear(h, num_labels); BigBirdForQuestionAnswering:
    no pooler, BigBirdForQuestionAnsweringHead on every token (intermediate Linear(h, f), output
    Linear(f, h) and LayerNorm(h), qa_outputs Linear(h, 2): the class sets num_labels 2)."""
    h, f = fields["hidden"], fields["ffn_hidden"]
    if name.endswith("ForSequenceClassification"):
        head = [linear("classification/dense", h, h, per_sequence=True)]
        return {**fields, "extras": {**(fields.get("extras") or {}), "side": {"head": head}}}
    if name.endswith("ForQuestionAnswering"):
        head = [linear("qa/intermediate", h, f), linear("qa/output", f, h), layer_norm("qa/norm", h)]
        return {**fields, "pooler": False, "classifier": {"num_labels": 2, "per_token": True},  # config.num_labels = 2
                "extras": {**(fields.get("extras") or {}), "side": {"head": head}}}
    return fields


def _t5gemma_classifier(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """T5Gemma / T5Gemma2 ...ForSequenceClassification and ...ForTokenClassification: the bare model
    (T5GemmaModel, or T5GemmaEncoderModel when is_encoder_decoder is false) and score.out_proj
    Linear(h, num_labels) with bias on every last-stack token (the sequence classifier then picks
    each sequence's last non-pad row); the other heads as `hf.apply_head` reads them."""
    name = architecture(c)
    if name is None or not name.endswith(("ForSequenceClassification", "ForTokenClassification")):
        return apply_head(fields, c, name)
    return {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False,
            "classifier": {"num_labels": c.num_labels(), "per_token": True}}


def _modernbert_decoder_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """ModernBertDecoderForSequenceClassification: the decoder, its ModernBertDecoderPredictionHead
    (dense h x h with classifier_bias, LayerNorm: the MLM transform) and classifier Linear(h, num_labels,
    bias=classifier_bias) on every token (the last non-pad row's logits are picked); the causal LM and
    the bare model as hf_n18small_heads reads them."""
    from modelplan.specs.hf_n18small import N18SMALL_HEADS

    name = architecture(c) or ""
    if not name.endswith("ForSequenceClassification"):
        return N18SMALL_HEADS["modernbert-decoder"](fields, c, apply_head, architecture)
    return {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False,
            "classifier": {"num_labels": c.num_labels(), "bias": c.flag("classifier_bias", False), "per_token": True}}


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
        return _side({**fields, "lm_head": True, "lm_head_bias": False}, head=head)
    if name.endswith("Model"):
        return bare
    if name.endswith("ForSequenceClassification"):
        return {**bare, "classifier": {"num_labels": c.num_labels()}}
    if name.endswith(("ForTokenClassification", "ForQuestionAnswering")):
        labels = 2 if name.endswith("ForQuestionAnswering") else c.num_labels()  # GenericForQuestionAnswering: Linear(h, 2)
        return {**bare, "classifier": {"num_labels": labels, "per_token": True}}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for ultrabert (UltrabertForMaskedLM, "
                    f"UltrabertModel, ...ForSequenceClassification, ...ForTokenClassification, ...ForQuestionAnswering)")


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


def _modernvbert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """ModernBERT's heads (`hf_encoders._modernbert_head`) under ModernVBert's class names."""
    from modelplan.specs.hf_encoders import ENCODER_HEADS

    return ENCODER_HEADS["modernbert"](fields, c, apply_head, architecture)


def _luke_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """LUKE's heads: BERT's (LukeForMaskedLM's lm_head, its decoder untied, LukeModel's pooler kept; the pooled ...ForSequenceClassification /
    ...ForMultipleChoice; ...ForTokenClassification and ...ForQuestionAnswering without the pooler)
    plus, for the masked LM, entity_predictions (transform dense h -> E with bias, LayerNorm(E), a bias
    per entity, its decoder tied to the entity table); the entity heads keep the pooler and add
    classifier Linear(h | 2h | 3h, num_labels) (the pair's without bias) on one entity (pair, span) a
    sequence."""
    names = c.texts("architectures", None) or ["LukeModel"]
    name, h, labels = names[0], fields["hidden"], c.num_labels()
    entity = {"ForEntityClassification": (1, True), "ForEntityPairClassification": (2, False),
              "ForEntitySpanClassification": (3, True)}
    for suffix, (width, bias) in entity.items():
        if name.endswith(suffix):
            head = [linear("entity_classifier", width * h, labels, bias=bias, per_sequence=True)]
            fields = apply_head(fields, c, "LukeModel")
            return {**fields, "extras": {**fields["extras"], "side": {**fields["extras"]["side"], "head": head}}}
    fields = apply_head(fields, c, architecture(c))
    if name.endswith("ForMaskedLM"):
        e = c.integer("entity_emb_size", 256)
        head = [dict(name="entity_predictions", params=h * e + e + 2 * e + c.integer("entity_vocab_size", 500000))]
        side = {**fields["extras"]["side"], "head": head}  # LukeForMaskedLM keeps the pooler, unties lm_head.decoder
        return {**fields, "pooler": True, "extras": {**fields["extras"], "side": side, "head_untied": True}}
    return fields


ENCODERS_MORE_HEADS: dict[str, Callable[..., dict]] = {
    "luke": _luke_head,
    "modernvbert": _modernvbert_head, "ultravbert": _ultrabert_head,
    "layoutlmv3": _layoutlmv3_head,
    "esmc": _esmc_head, "ultrabert": _ultrabert_head,
    "modernbert-decoder": _modernbert_decoder_head,
    "t5gemma": _t5gemma_classifier, "t5gemma2": _t5gemma_classifier,
    "layoutlm": _pooled_always, "fnet": _pooled_always, "squeezebert": _pooled_always, "convbert": _convbert_head, "yoso": _qa_two_labels, "mra": _qa_two_labels, "nystromformer": _qa_two_labels,
}
"""Types whose head classes `hf.apply_head` would misread."""

ENCODERS_MORE_UNMODELLED: dict[str, str] = {
    "layoutlmv2": "LayoutLMv2's visual backbone (a detectron2 ResNet-FPN and its visual_proj over the image)",
    "canine": "CANINE's downsampled deep stack (the character encoder, a strided conv to molecules, the deep "
              "encoder at 1 / downsampling_rate of the sequence, the upsampling conv and final character encoder)",
    "perceiver": "Perceiver IO's latent array (cross-attention from num_latents latents to the inputs, latent "
                 "self-attention blocks, the output queries' decoder)",
    "neomme": "NeoMME's value embeddings, exclusive self-attention with sigmoid-gated projections and patch "
              "embeddings",
}
"""Masked-LM / classification types transformers 5.24 ships whose mechanism the spec cannot express exactly."""
