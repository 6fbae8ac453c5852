"""The encoders of modelplan/specs/hf_encoders_more.py (gte, jina_embeddings_v3, layoutlm, tapas,
yoso, mra, nystromformer, fnet, convbert, markuplm, lilt) and the side groups they use
(specs/encoder_side.py): total and trainable parameters equal sum(p.numel()) of transformers 5.24's
module built on CPU from a tiny config for every head class, and at the config class defaults (meta
device); training FLOPs equal FlopCounterMode's count of one eager forward + backward, less the terms
named per test; `count` and `plan --gpus 8` run and `verify` refuses `extras.side` by name in one
line; what is not modelled is a one-line error naming the field."""

from __future__ import annotations

import pytest

from _hf_n17_checks import (assert_class_defaults, assert_count_plan_verify, assert_one_line_error,
                             assert_total_and_trainable_on_cpu, case_ids)
from _hf_reference import hf_training_flop_counts
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

BERT = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96, vocab_size=100,
            max_position_embeddings=40, num_labels=3)
"""A tiny BERT-shaped config in BERT's key names."""
HEADS = ["ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
         "ForMultipleChoice", "ForPreTraining"]
PREFIX = {"gte": "Gte", "jina_embeddings_v3": "JinaEmbeddingsV3", "layoutlm": "LayoutLM", "tapas": "Tapas",
          "yoso": "Yoso", "mra": "Mra", "nystromformer": "Nystromformer", "fnet": "FNet", "convbert": "ConvBert",
          "markuplm": "MarkupLM", "lilt": "Lilt", "squeezebert": "SqueezeBert",
          "luke": "Luke", "mobilebert": "MobileBert"}
"""Each type's class-name prefix."""
CLASSES = {"gte": HEADS[:4], "jina_embeddings_v3": HEADS[:5], "layoutlm": HEADS[:5], "tapas": HEADS[:3],
           "yoso": HEADS[:6], "mra": HEADS[:6], "nystromformer": HEADS[:6], "fnet": HEADS, "convbert": HEADS[:6],
           "markuplm": HEADS[1:5], "lilt": HEADS[1:5], "squeezebert": HEADS[:6],
           "luke": HEADS[:6] + ["ForEntityClassification", "ForEntityPairClassification", "ForEntitySpanClassification"],
           "mobilebert": HEADS + ["ForNextSentencePrediction"]}
"""The head classes transformers 5.24 ships per type (TapasForQuestionAnswering is refused)."""
VARIANTS = {
    "gte": [{}, dict(type_vocab_size=2, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})],
    "jina_embeddings_v3": [{}],
    "layoutlm": [{}, dict(max_2d_position_embeddings=20)],
    "tapas": [{}, dict(type_vocab_sizes=[3, 4])],
    "yoso": [{}, dict(conv_window=3)],
    "mra": [dict(max_position_embeddings=64)],  # MraSelfAttention needs max_position_embeddings of 32-blocks
    "nystromformer": [{}, dict(conv_kernel_size=5)],
    "fnet": [{}],
    "convbert": [{}, dict(embedding_size=64, head_ratio=4, conv_kernel_size=5), dict(hidden_size=32, head_ratio=8)],
    "markuplm": [{}, dict(max_depth=5, xpath_unit_hidden_size=8)],
    "lilt": [dict(hidden_size=96), dict(hidden_size=96, channel_shrink_ratio=2, max_2d_position_embeddings=30)],
    "squeezebert": [dict(embedding_size=64), dict(embedding_size=64, q_groups=2, k_groups=1, v_groups=4,
                                                  post_attention_groups=2, intermediate_groups=2, output_groups=2)],
    "luke": [dict(entity_vocab_size=50, entity_emb_size=16),
             dict(entity_vocab_size=50, entity_emb_size=64, use_entity_aware_attention=False)],
    "mobilebert": [dict(embedding_size=16, intra_bottleneck_size=32),
                   dict(embedding_size=16, intra_bottleneck_size=32, trigram_input=False, key_query_shared_bottleneck=False,
                        num_feedforward_networks=2, classifier_activation=False),
                   dict(embedding_size=64, intra_bottleneck_size=16, use_bottleneck_attention=True,
                        normalization_type="layer_norm")],
}
"""Per type: the configs read (LiLT's layout tables are h // 6 wide and must concatenate to h: h = 96)."""

CASES = [dict(BERT, model_type=t, architectures=[PREFIX[t] + h], **extra)
         for t, heads in CLASSES.items() for h in heads for extra in VARIANTS[t]]

DEFAULTS = {"gte": "GteForMaskedLM", "jina_embeddings_v3": "JinaEmbeddingsV3ForMaskedLM",
            "layoutlm": "LayoutLMForMaskedLM", "tapas": "TapasForMaskedLM", "yoso": "YosoForMaskedLM",
            "mra": "MraForMaskedLM", "nystromformer": "NystromformerForMaskedLM", "fnet": "FNetForMaskedLM",
            "convbert": "ConvBertForMaskedLM", "markuplm": "MarkupLMForSequenceClassification",
            "lilt": "LiltForSequenceClassification", "squeezebert": "SqueezeBertForMaskedLM",
            "luke": "LukeForMaskedLM", "mobilebert": "MobileBertForMaskedLM"}
"""transformers' masked-LM mapping entry of each type (its sequence classifier where it has none)."""


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=case_ids(CASES))
def test_total_and_trainable_equal_transformers_on_cpu(data):
    """Total and trainable parameters equal those of the transformers model built on CPU."""
    assert_total_and_trainable_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(DEFAULTS))
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults, built on the meta device as the mapping's class."""
    assert_class_defaults(model_type, DEFAULTS[model_type])


BATCH, SEQ = 2, 12


def _flops(data: dict) -> tuple[int, dict[str, int]]:
    """(our training FLOPs, FlopCounterMode's by aten op) of `data` at BATCH x SEQ."""
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ)).model
    return ours, hf_training_flop_counts(data, BATCH, SEQ)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", [
    dict(BERT, model_type="gte", architectures=["GteForMaskedLM"]),
    dict(BERT, model_type="jina_embeddings_v3", architectures=["JinaEmbeddingsV3ForMaskedLM"]),
    dict(BERT, model_type="tapas", architectures=["TapasForSequenceClassification"]),
    dict(BERT, model_type="markuplm", architectures=["MarkupLMForSequenceClassification"]),
    dict(BERT, model_type="luke", architectures=["LukeForSequenceClassification"], entity_vocab_size=50,
         entity_emb_size=16),
    dict(BERT, model_type="mobilebert", architectures=["MobileBertForMaskedLM"], embedding_size=16,
         intra_bottleneck_size=32),
    dict(BERT, model_type="mobilebert", architectures=["MobileBertForSequenceClassification"], embedding_size=16,
         intra_bottleneck_size=32),
], ids=lambda d: d["architectures"][0])
def test_training_flops_equal_flop_counter(data):
    """One forward + backward of the HF module (eager) counts exactly our model FLOPs (MarkupLM's
    XPath MLP per token, GTE's gated MLP, rotary blocks; LUKE's word-only forward; MobileBERT's
    bottleneck blocks and its trigram embedding)."""
    ours, ref = _flops(data)
    assert ours == sum(ref.values())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["layoutlm", "fnet"])
def test_masked_lm_flops_but_the_pooler_backward(model_type):
    """LayoutLM / FNet (SqueezeBERT: below) keep their pooler under the masked-LM head: its output is not in the loss, so
    autograd runs no backward through it; ours counts it 3x forward: 2 x (b, h) @ (h, h) x 2 more."""
    data = dict(BERT, model_type=model_type, architectures=[PREFIX[model_type] + "ForMaskedLM"])
    ours, ref = _flops(data)
    assert ours - 2 * (2 * BATCH * 64 * 64) == sum(ref.values())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", [
    dict(BERT, model_type="convbert", architectures=["ConvBertForMaskedLM"], embedding_size=64),
    dict(BERT, model_type="nystromformer", architectures=["NystromformerForMaskedLM"]),
    dict(BERT, model_type="squeezebert", architectures=["SqueezeBertForSequenceClassification"], embedding_size=64),
], ids=["convbert", "nystromformer", "squeezebert"])
def test_conv_flops_with_the_backward_at_twice_the_forward(data):
    """ConvBERT's separable key conv, Nystromformer's value conv and SqueezeBERT's grouped 1x1 convs:
    FlopCounterMode's forward convolution equals ours; its convolution_backward is replaced by 2x the
    forward (grad input and grad weight, the convention every GEMM here follows), the rest equal."""
    ours, ref = _flops(data)
    assert ours == sum(ref.values()) - ref["aten.convolution_backward"] + 2 * ref["aten.convolution"]


@pytest.mark.torch
@pytest.mark.slow
def test_lilt_flops_but_the_last_layout_tail():
    """LiLT: the last block's layout stream past its scores (layout value, context, attention output,
    intermediate and output; w = 24, f / r = 24) never reaches the text-stream loss, so autograd runs
    no backward there: ours is 2 x their forward higher."""
    data = dict(BERT, model_type="lilt", architectures=["LiltForSequenceClassification"], hidden_size=96)
    ours, ref = _flops(data)
    t, w = BATCH * SEQ, 24
    tail = 2 * t * w * w + 2 * t * SEQ * w + 2 * t * w * w + 2 * 2 * t * w * 24  # value, context, out, MLP
    assert ours - 2 * tail == sum(ref.values())


COUNT_PLAN = [dict(BERT, model_type=t, architectures=[PREFIX[t] + CLASSES[t][0]], **VARIANTS[t][-1])
              for t in ("gte", "layoutlm", "convbert", "markuplm", "lilt", "nystromformer", "squeezebert", "mobilebert")]


@pytest.mark.parametrize("data", COUNT_PLAN, ids=[d["model_type"] for d in COUNT_PLAN])
def test_count_plan_run_and_verify_names_the_side_groups(tmp_path, data):
    """count and plan --gpus 8 exit 0; verify refuses the side groups the executor does not run, by name."""
    assert_count_plan_verify(tmp_path, data, "extras.side")


def test_layoutlm_tables_by_hand():
    """LayoutLM's x / y / h / w tables: 4 x max_2d_position_embeddings x h over BERT's embedding
    (Xu et al. 2020 sec. 2.2: four 2-D position embedding layers)."""
    layout = count_params(from_hf_config(dict(BERT, model_type="layoutlm", max_2d_position_embeddings=10)))
    bert = count_params(from_hf_config(dict(BERT, model_type="bert")))
    assert layout.total - bert.total == 4 * 10 * 64


@pytest.mark.parametrize(("data", "message"), [
    (dict(BERT, model_type="tapas", architectures=["TapasForQuestionAnswering"]),
     "'TapasForQuestionAnswering' is not modelled"),
    (dict(BERT, model_type="tapas", type_vocab_sizes=[3, "x"]), "type_vocab_sizes: expected a list"),
    (dict(BERT, model_type="convbert", num_groups=2), "num_groups: 2 is not modelled"),
    (dict(BERT, model_type="squeezebert", embedding_size=32), "embedding_size: 32 != hidden_size"),
    (dict(BERT, model_type="mobilebert", use_bottleneck=False), "use_bottleneck: false is not modelled"),
    (dict(BERT, model_type="mobilebert", embedding_size=128), r"embedding_size: 128 > hidden_size \(64\)"),
    (dict(BERT, model_type="squeezebert", embedding_size=64, q_groups=3), r"q_groups: 3 must divide"),
    (dict(BERT, model_type="squeezebert", embedding_size=64, output_groups=2), "output_groups: 2 != intermediate_groups"),
    (dict(BERT, model_type="convbert", architectures=["ConvBertForMultipleChoice"], summary_use_proj=True,
          summary_proj_to_labels=True), "summary_proj_to_labels: true is not modelled"),
])
def test_unmodelled_is_a_one_line_error_naming_the_field(data, message):
    """What the spec cannot express is refused in one line naming the config key."""
    assert_one_line_error(data, message)


TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96, vocab_size=100,
            num_labels=3)
HEAD_CASES = [
    dict(TINY, model_type="big_bird", architectures=["BigBirdForSequenceClassification"], max_position_embeddings=64),
    dict(TINY, model_type="big_bird", architectures=["BigBirdForQuestionAnswering"], max_position_embeddings=64),
    dict(TINY, model_type="big_bird", architectures=["BigBirdForMaskedLM"], max_position_embeddings=64),
    dict(TINY, model_type="modernbert-decoder", architectures=["ModernBertDecoderForSequenceClassification"],
         pad_token_id=0),
    dict(TINY, model_type="modernbert-decoder", architectures=["ModernBertDecoderForSequenceClassification"],
         pad_token_id=0, classifier_bias=True, norm_bias=True),
]
"""The heads of already supported types added here (hf_encoders_more: big_bird_task_head, _modernbert_decoder_head)."""


@pytest.mark.torch
@pytest.mark.parametrize("data", HEAD_CASES, ids=case_ids(HEAD_CASES))
def test_added_heads_equal_transformers_on_cpu(data):
    """BigBird's classification / QA heads and ModernBERT-decoder's sequence classifier count what
    transformers builds."""
    assert_total_and_trainable_on_cpu(data)


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "architecture", "extra"), [
    ("t5gemma", "T5GemmaForSequenceClassification", {}),
    ("t5gemma", "T5GemmaForSequenceClassification", {"is_encoder_decoder": False}),
    ("t5gemma", "T5GemmaForTokenClassification", {}),
    ("t5gemma2", "T5Gemma2ForSequenceClassification", {}),
    ("t5gemma2", "T5Gemma2ForTokenClassification", {}),
    ("modernbert-decoder", "ModernBertDecoderForSequenceClassification", {}),
])
def test_added_heads_class_defaults_equal_transformers(model_type, architecture, extra):
    """T5Gemma / T5Gemma2's score.out_proj over the bare model (the encoder alone when
    is_encoder_decoder is false) at the config class defaults, on the meta device."""
    from _hf_n17_checks import class_defaults
    from _hf_reference import hf_numel

    data = {**class_defaults(model_type), **extra, "architectures": [architecture]}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.torch
@pytest.mark.slow
def test_added_head_flops_equal_flop_counter():
    """ModernBERT-decoder's sequence classifier: its prediction head and classifier on every token,
    exactly FlopCounterMode's; BigBird's: ours less the pooler's backward (computed, not in the loss:
    2 x (b, h) @ (h, h) twice more)."""
    ours, ref = _flops(HEAD_CASES[3])
    assert ours == sum(ref.values())
    ours, ref = _flops(HEAD_CASES[0])
    assert ours - 2 * (2 * BATCH * 64 * 64) == sum(ref.values())


def test_esm_without_a_vocabulary_names_its_source():
    """EsmConfig's vocab_size default is None: a one-line error saying so."""
    assert_one_line_error(dict(BERT, model_type="esm", vocab_size=None), "EsmConfig's default is None")


LLAMA_TINY = dict(num_hidden_layers=3, hidden_size=64, intermediate_size=96, num_attention_heads=4, vocab_size=100,
                  num_labels=3)
LLAMA_CASES = [dict(LLAMA_TINY, model_type="esmc", architectures=["Esmc" + h], **extra)
               for h in ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification")
               for extra in ({}, {"tie_word_embeddings": True})]
LLAMA_CASES += [dict(LLAMA_TINY, model_type="ultrabert", architectures=["Ultrabert" + h], num_key_value_heads=2,
                     **extra)
                for h in ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification",
                          "ForQuestionAnswering")
                for extra in ({}, {"tie_word_embeddings": True, "prediction_head_size": 32})]
"""ESM C (EsmcForMaskedLM never ties its decoder) and Ultrabert, Llama-shaped encoders."""


@pytest.mark.torch
@pytest.mark.parametrize("data", LLAMA_CASES, ids=case_ids(LLAMA_CASES))
def test_llama_shaped_encoders_equal_transformers_on_cpu(data):
    """ESM C's LayerNorms (biased in the blocks, bias-free q/k and final norms) and Ultrabert's
    prediction head count what transformers builds."""
    assert_total_and_trainable_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "architecture"), [
    ("esmc", "EsmcForMaskedLM"), ("esmc", "EsmcForSequenceClassification"),
    ("ultrabert", "UltrabertForMaskedLM"), ("ultrabert", "UltrabertForSequenceClassification")])
def test_llama_shaped_encoders_class_defaults_and_flops(model_type, architecture):
    """At the class defaults (meta device) the totals equal transformers'; on a tiny config one
    eager forward + backward counts exactly our FLOPs (Ultrabert's sliding blocks: eager attention
    masks the square, so at 12 tokens every key is scored)."""
    assert_class_defaults(model_type, architecture)
    extra = {"num_key_value_heads": 2, "prediction_head_size": 32} if model_type == "ultrabert" else {}
    ours, ref = _flops(dict(LLAMA_TINY, model_type=model_type, architectures=[architecture], **extra))
    assert ours == sum(ref.values())


def test_ultrabert_sliding_blocks_see_the_window_on_either_side():
    """Ultrabert's sliding blocks attend to |i - j| <= sliding_window (transformers masking_utils
    sliding_window_bidirectional_overlay): 2 x 128 + 1 = 257 keys at 1024 tokens; every third block
    (the default layer_types) sees all 1024."""
    from modelplan.count.block_flops import block_forward_flops
    from modelplan.count.blocks import block_of

    spec = from_hf_config(dict(LLAMA_TINY, model_type="ultrabert", max_position_embeddings=1024))
    d = 16
    scores = [block_forward_flops(spec, block_of(spec, i), 1024, 1024)["attention/score"] for i in range(3)]
    assert scores == [2 * 2 * 1024 * 257 * 4 * d] * 2 + [2 * 2 * 1024 * 1024 * 4 * d]


def test_esmc_grouped_query_attention_is_refused():
    """EsmcConfig refuses num_key_value_heads != num_attention_heads: so does the loader, in one line."""
    assert_one_line_error(dict(LLAMA_TINY, model_type="esmc", num_key_value_heads=2), "num_key_value_heads: 2")


V3 = dict(BERT, model_type="layoutlmv3", coordinate_size=12, shape_size=8, input_size=32, patch_size=8)
"""A tiny LayoutLMv3: 4 x 12 + 2 x 8 = 64 box columns, a 4 x 4 patch grid."""
V3_CASES = [dict(V3, architectures=["LayoutLMv3" + h], **extra)
            for h in ("Model", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")
            for extra in ({}, {"num_labels": 12, "visual_embed": False, "has_spatial_attention_bias": False})]


@pytest.mark.torch
@pytest.mark.parametrize("data", V3_CASES, ids=case_ids(V3_CASES))
def test_layoutlmv3_equals_transformers_on_cpu(data):
    """LayoutLMv3's box tables, image side and relative-bias tables count what transformers builds
    (token classification with 10+ labels: the per-token classification head)."""
    assert_total_and_trainable_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
def test_layoutlmv3_text_only_flops_equal_flop_counter():
    """A text-only forward + backward (no pixel_values): FlopCounterMode's count exactly (the
    relative / spatial biases are bucket lookups, no GEMM)."""
    ours, ref = _flops(dict(V3, architectures=["LayoutLMv3ForSequenceClassification"]))
    assert ours == sum(ref.values())


@pytest.mark.torch
@pytest.mark.parametrize("model_type", ["modernvbert", "ultravbert"])
@pytest.mark.parametrize("head", ["ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification"])
@pytest.mark.parametrize("tied", [False, True])
def test_vision_bert_composites_class_defaults_equal_transformers(model_type, head, tied):
    """ModernVBert / UltraVBert at the class defaults (meta device): the SigLIP tower (its pooling head
    for ModernVBert), the pixel-shuffle connector, the text encoder and each head; the composite's
    tie_word_embeddings ties the masked-LM head."""
    from _hf_n17_checks import class_defaults
    from _hf_reference import hf_numel

    prefix = {"modernvbert": "ModernVBert", "ultravbert": "UltraVBert"}[model_type]
    data = {**class_defaults(model_type), "architectures": [prefix + head], "tie_word_embeddings": tied}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.parametrize(("data", "message"), [
    (dict(V3, coordinate_size=16), r"coordinate_size, shape_size: 4 x 16 \+ 2 x 8 must equal hidden_size \(64\)"),
    (dict(V3, text_embed=False), "text_embed: false is not modelled"),
])
def test_layoutlmv3_bad_box_widths_are_one_line_errors(data, message):
    """LayoutLMv3 concatenates the six box lookups to h: other widths cannot run, refused by name."""
    assert_one_line_error(data, message)


def test_mobilebert_huge_ffn_count_is_refused_at_once():
    """MobileBertLayer builds num_feedforward_networks - 1 FFNs; the mapper lists each, so 10**7
    ran for minutes (a hang): above MAX_LAYERS (10,000) it is one line naming the key."""
    import time

    import transformers
    from modelplan.errors import SpecError
    from modelplan.specs.hf import from_hf_config

    data = {**transformers.MobileBertConfig().to_dict(), "architectures": ["MobileBertForMaskedLM"],
            "num_feedforward_networks": 10**7}
    start = time.perf_counter()
    with pytest.raises(SpecError, match="num_feedforward_networks"):
        from_hf_config(data)
    assert time.perf_counter() - start < 5
