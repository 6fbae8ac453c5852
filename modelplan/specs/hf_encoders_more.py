"""HF config mappers of more BERT-shaped encoders (transformers 5.24 modeling code): gte and
jina_embeddings_v3 (post-LN rotary blocks), tapas (seven token-type tables), yoso, mra and
nystromformer (BERT's modules, their approximate attention parameter-free but for the value conv),
fnet (Fourier mixing: MLP-only blocks), convbert (span-based dynamic convolution heads), squeezebert
(grouped 1x1 convs) and luke (entity tables and queries): BERT's encoder (`hf_gpt._bert`) with the
groups each modeling file adds as `extras.side` (specs/encoder_side.py); heads BERT's where the
classes are (their classification heads' dense + out_proj the size of BERT's pooler + classifier).

The tables here also hold, for `hf.MAPPERS` in one entry, the document encoders
(`hf_encoders_layout`), the Llama / ModernBERT-shaped encoders and composites (`hf_encoders_llama`),
MobileBERT (`hf_mobilebert`) and the heads of big_bird, t5gemma / t5gemma2 and modernbert-decoder
(`hf_encoder_heads_more`)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_side import layer_norm, linear, table
from modelplan.specs.hf_canine import CANINE_HEADS, CANINE_MAPPERS
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_encoder_fields import defaulted, pooled_always, rope_theta_of, with_side
from modelplan.specs.hf_encoder_heads_more import HEADS_MORE
from modelplan.specs.hf_encoders_layout import LAYOUT_HEADS, LAYOUT_MAPPERS
from modelplan.specs.hf_encoders_llama import LLAMA_ENCODER_HEADS, LLAMA_ENCODER_MAPPERS
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_mobilebert import MOBILEBERT_HEADS, MOBILEBERT_MAPPERS

_bert = GPT_MAPPERS["bert"]


def _gte(c: HFConfig) -> dict:
    """GteModel (gte-multilingual): BERT's post-LN blocks (q/k/v/o biased, post_attention_layernorm,
    post_mlp_layernorm) with rotary q/k (GteConfig.default_theta 160000), no position table, a
    gated MLP (gate_proj, up_proj bias-free; down_proj with bias), token types (1), the embedding
    LayerNorm; no pooler in GteModel (its sequence classifier adds one); MLM head as BERT's."""
    c = defaulted(c, type_vocab_size=1, max_position_embeddings=8192, layer_norm_eps=1e-12)
    fields = {**_bert(c), "position": "rotary", "rope_theta": rope_theta_of(c, 160000.0), "gated_mlp": True,
              "mlp_bias": False, "pooler": False}
    return with_side(fields, block=[dict(name="down_proj_bias", params=fields["hidden"])])  # GteMLP.down_proj.bias


def _jina_v3(c: HFConfig) -> dict:
    """JinaEmbeddingsV3Model: XLM-RoBERTa's post-LN blocks (biased q/k/v/o, fc1/fc2) with rotary q/k
    (JinaEmbeddingsV3Config.default_theta 20000), no position table, token types (1), its pooler.
    The published checkpoint's task LoRA adapters are not modules of transformers' port: none
    counted."""
    c = defaulted(c, type_vocab_size=1, max_position_embeddings=8194, layer_norm_eps=1e-5)
    return {**_bert(c), "position": "rotary", "rope_theta": rope_theta_of(c, 20000.0)}


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
    return {**_bert(defaulted(c, max_position_embeddings=1024)), "type_vocab": sum(sizes)}


def _offset_bert(conv: str | None, type_vocab: int = 1) -> Callable[[HFConfig], dict]:
    """YosoModel / MraModel / NystromformerModel: BERT's modules with max_position_embeddings + 2
    position rows, `type_vocab` token types, no pooler (their classification heads' dense is the pooler's
    size); `conv` names the key of a depthwise Conv2d(heads, heads, (k, 1), groups=heads,
    bias=False) over each head's values (YOSO conv_window, Nystromformer conv_kernel_size): heads x k
    weights, k multiply-adds per value element. Their attention is counted as full softmax
    attention (s x s scores and context): YOSO's use_expectation path (the default) runs those
    matmuls, Nystromformer runs them where num_landmarks equals the length; its landmark
    approximation elsewhere, YOSO's LSH kernels and MRA's block-sparse approximation do fewer (not
    modelled: an upper bound)."""
    def mapper(c: HFConfig) -> dict:
        c = defaulted(c, type_vocab_size=type_vocab, max_position_embeddings=4096 if conv == "conv_window" else 512)
        fields = {**_bert(c), "pooler": False, "extras": {"position_offset": 2}}
        kernel = c.integer(conv, 65 if conv == "conv_kernel_size" else None) if conv else None
        if not kernel:
            return fields
        heads, h = fields["heads"], fields["hidden"]
        return with_side(fields, block=[dict(name="value_conv", params=heads * kernel, macs=kernel * h)])
    return mapper


def _fnet(c: HFConfig) -> dict:
    """FNetModel (Lee-Thorp et al. 2022): BERT's embeddings then embeddings.projection Linear(h, h)
    with bias (extras.input_width = h), blocks of a parameter-free Fourier transform (its
    output LayerNorm) and BERT's MLP with its LayerNorm: two norms a block, no attention; its pooler;
    heads as BERT's (FFTs are not GEMMs: no FLOPs counted for the mixing)."""
    c = defaulted(c, type_vocab_size=4, layer_norm_eps=1e-12, hidden_act="gelu_new", num_attention_heads=1)
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
    return with_side(fields, block=block)


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
    return with_side(fields, block=block)


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
    return with_side(fields, embedding=embedding, block=block)


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


def _luke_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """LUKE's heads: BERT's (LukeForMaskedLM's lm_head, its decoder untied, LukeModel's pooler kept; the pooled ...ForSequenceClassification /
    ...ForMultipleChoice; ...ForTokenClassification and ...ForQuestionAnswering without the pooler)
    plus, for the masked LM, entity_predictions (transform dense h -> E with bias, LayerNorm(E), a bias
    per entity, its decoder tied to the entity table, or its own (entity_vocab, E) untied); the entity
    heads keep the pooler and add classifier Linear(h | 2h | 3h, num_labels) (the pair's without
    bias) on one entity (pair, span) a sequence."""
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
        entities = c.integer("entity_vocab_size", 500000)
        decoder = 0 if c.flag("tie_word_embeddings", True) else e * entities  # tied to the entity table only then
        head = [dict(name="entity_predictions", params=h * e + e + 2 * e + entities + decoder)]
        side = {**fields["extras"]["side"], "head": head}  # LukeForMaskedLM keeps the pooler, unties lm_head.decoder
        return {**fields, "pooler": True, "extras": {**fields["extras"], "side": side, "head_untied": True}}
    return fields


ENCODERS_MORE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "gte": _gte, "jina_embeddings_v3": _jina_v3, "tapas": _tapas,
    "yoso": _offset_bert("conv_window"), "mra": _offset_bert(None), "nystromformer": _offset_bert("conv_kernel_size", 2),
    "fnet": _fnet, "convbert": _convbert, "squeezebert": _squeezebert, "luke": _luke,
    **LAYOUT_MAPPERS, **LLAMA_ENCODER_MAPPERS, **MOBILEBERT_MAPPERS, **CANINE_MAPPERS,
}

ENCODERS_MORE_HEADS: dict[str, Callable[..., dict]] = {
    "fnet": pooled_always, "squeezebert": pooled_always, "convbert": _convbert_head, "luke": _luke_head,
    "yoso": _qa_two_labels, "mra": _qa_two_labels, "nystromformer": _qa_two_labels,
    **LAYOUT_HEADS, **LLAMA_ENCODER_HEADS, **HEADS_MORE, **MOBILEBERT_HEADS, **CANINE_HEADS,
}
"""Types whose head classes `hf.apply_head` would misread."""

ENCODERS_MORE_UNMODELLED: dict[str, str] = {
    "layoutlmv2": "LayoutLMv2's visual backbone (a detectron2 ResNet-FPN and its visual_proj over the image)",
    "perceiver": "Perceiver IO's latent array (cross-attention from num_latents latents to the inputs, latent "
                 "self-attention blocks, the output queries' decoder)",
    "neomme": "NeoMME's value embeddings, exclusive self-attention with sigmoid-gated projections and patch "
              "embeddings",
}
