"""The encoder-decoders of modelplan/specs/hf_seq2seq_more.py (umt5, longt5, switch_transformers,
led, t5gemma, m2m_100, nllb-moe) and longformer: total and trainable parameters equal sum(p.numel()) of
transformers 5.24's module built on
CPU from a tiny config for each head read, and at the config class defaults (meta device);
training FLOPs equal FlopCounterMode's count of one eager forward + backward, less the terms
named per test; `count` and `plan --gpus 8` run and `verify` refuses the new options by name;
what is not modelled is a one-line error naming the field."""

from __future__ import annotations

import pytest

from _hf_n17_checks import (assert_class_defaults, assert_count_plan_verify, assert_one_line_error,
                             assert_total_and_trainable_on_cpu, case_ids)
from _hf_reference import hf_training_flop_counts
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import block_of
from modelplan.count.flops import count_flops
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

T5 = dict(num_layers=2, d_model=64, num_heads=4, d_kv=16, d_ff=96, vocab_size=100, decoder_start_token_id=0)
"""A tiny T5-shaped config in T5's key names."""
LED = dict(model_type="led", encoder_layers=2, decoder_layers=1, d_model=64, encoder_attention_heads=4,
           decoder_attention_heads=4, encoder_ffn_dim=96, decoder_ffn_dim=96, vocab_size=100,
           max_encoder_position_embeddings=64, max_decoder_position_embeddings=32, attention_window=8,
           decoder_start_token_id=2)
SWITCH = dict(T5, model_type="switch_transformers", num_experts=4, num_sparse_encoder_layers=1,
              num_sparse_decoder_layers=1)

CASES = [dict(T5, model_type="umt5", architectures=["UMT5" + h], **extra)
         for h in ("ForConditionalGeneration", "Model", "EncoderModel")
         for extra in ({}, dict(num_decoder_layers=3, d_kv=8, feed_forward_proj="relu"))]
CASES += [dict(T5, model_type="longt5", architectures=["LongT5" + h], local_radius=3, **extra)
          for h in ("ForConditionalGeneration", "Model", "EncoderModel")
          for extra in ({}, dict(encoder_attention_type="transient-global", global_block_size=4),
                        dict(encoder_attention_type="transient-global", feed_forward_proj="gated-gelu"))]
CASES += [dict(SWITCH, architectures=["SwitchTransformers" + h], **extra)
          for h in ("ForConditionalGeneration", "Model", "EncoderModel")
          for extra in ({}, dict(num_layers=4, num_decoder_layers=2, num_sparse_encoder_layers=4,
                                 num_sparse_decoder_layers=0, router_bias=True),
                        dict(num_decoder_layers=3))]
CASES += [dict(LED, architectures=["LED" + h], **extra) for h in ("ForConditionalGeneration", "Model")
          for extra in ({}, dict(decoder_layers=2, attention_window=[4, 4]))]

GEMMA_STACK = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                   num_hidden_layers=2, vocab_size=100, layer_types=["sliding_attention", "full_attention"],
                   sliding_window=16)
"""One tiny Gemma 2 stack in T5GemmaModuleConfig's key names."""
T5GEMMA = dict(model_type="t5gemma", vocab_size=100, decoder_start_token_id=0, encoder=GEMMA_STACK, decoder=GEMMA_STACK)
CASES += [dict(T5GEMMA, architectures=["T5Gemma" + h]) for h in ("ForConditionalGeneration", "Model")]
CASES += [dict(T5GEMMA, architectures=["T5GemmaForConditionalGeneration"],
               decoder=dict(GEMMA_STACK, num_hidden_layers=4, layer_types=["sliding_attention", "full_attention"] * 2)),
          dict(T5GEMMA, architectures=["T5GemmaEncoderModel"], is_encoder_decoder=False)]

M2M = dict(model_type="m2m_100", encoder_layers=2, decoder_layers=1, d_model=64, encoder_attention_heads=4,
           decoder_attention_heads=4, encoder_ffn_dim=96, decoder_ffn_dim=96, vocab_size=100,
           max_position_embeddings=32,
           decoder_start_token_id=2, encoder_layerdrop=0.0, decoder_layerdrop=0.0)
"""A tiny M2M100 / NLLB config, LayerDrop off (FlopCounterMode would see a random number of blocks)."""
CASES += [dict(M2M, architectures=["M2M100" + h], **extra) for h in ("ForConditionalGeneration", "Model")
          for extra in ({}, dict(scale_embedding=False))]
NLLB_MOE = dict(M2M, model_type="nllb-moe", encoder_layers=4, decoder_layers=4, num_experts=4, encoder_sparse_step=2,
                decoder_sparse_step=2)
CASES += [dict(NLLB_MOE, architectures=[arch], **extra) for arch in ("NllbMoeForConditionalGeneration", "NllbMoeModel")
          for extra in ({}, dict(decoder_layers=3, decoder_sparse_step=3, router_bias=True),
                        dict(decoder_layers=2, decoder_sparse_step=0))]
"""NLLB-MoE: sparse blocks at (i + 1) % step == 0 in each stack (its FLOPs are top-2, not the
dense-dispatch of transformers' eager NllbMoeSparseMLP, so no FlopCounterMode comparison)."""
LONGFORMER = dict(model_type="longformer", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                  intermediate_size=96, vocab_size=100, max_position_embeddings=40, attention_window=[8, 8],
                  num_labels=3)
CASES += [dict(LONGFORMER, architectures=["Longformer" + h],
               **({"num_labels": 2} if h == "ForQuestionAnswering" else {}))
          for h in ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification",
                    "ForQuestionAnswering", "ForMultipleChoice")]

CASES += [dict(T5, model_type=t, architectures=[prefix + h], num_labels=3)
          for t, prefix in (("t5", "T5"), ("mt5", "MT5"), ("umt5", "UMT5"))
          for h in ("ForSequenceClassification", "ForQuestionAnswering", "ForTokenClassification")]
"""The T5 family's classifier heads: T5ClassificationHead on the decoder, qa_outputs per decoder token,
the encoder alone with a per-token classifier."""
BART = dict(encoder_layers=2, decoder_layers=1, d_model=64, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=96, decoder_ffn_dim=96, vocab_size=100, max_position_embeddings=32, num_labels=3)
CASES += [dict(BART, model_type=t, architectures=[prefix + h]) for t, prefix, heads in (
    ("bart", "Bart", ("ForSequenceClassification", "ForQuestionAnswering")),
    ("mbart", "MBart", ("ForSequenceClassification", "ForQuestionAnswering")),
    ("plbart", "PLBart", ("ForSequenceClassification",)),
    ("mvp", "Mvp", ("ForSequenceClassification", "ForQuestionAnswering"))) for h in heads]
CASES += [dict(LED, architectures=["LEDForQuestionAnswering"], num_labels=3)]
"""The BART family's classifier heads (BartClassificationHead on the decoder, qa_outputs) and LED's."""

SEQ2SEQ_LM = {"umt5": "UMT5ForConditionalGeneration", "longt5": "LongT5ForConditionalGeneration",
              "switch_transformers": "SwitchTransformersForConditionalGeneration", "led": "LEDForConditionalGeneration",
              "t5gemma": "T5GemmaForConditionalGeneration",
              "m2m_100": "M2M100ForConditionalGeneration", "longformer": "LongformerForMaskedLM",
              "nllb-moe": "NllbMoeForConditionalGeneration"}
"""transformers' MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES entry of each type (Longformer's masked LM)."""


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=case_ids(CASES))
def test_total_and_trainable_equal_transformers_on_cpu(data):
    """Total and trainable parameters equal those of the transformers model built on CPU."""
    assert_total_and_trainable_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(SEQ2SEQ_LM))
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults (Switch's 12 decoder blocks whatever num_layers says), meta device."""
    assert_class_defaults(model_type, SEQ2SEQ_LM[model_type])


BATCH, SEQ, DEC = 2, 12, 7
FLOP_CASES = [d for d in CASES if d["architectures"][0].endswith("ForConditionalGeneration")
              and d["model_type"] in ("umt5", "switch_transformers")
              or d["architectures"] == ["LongT5ForConditionalGeneration"] and "encoder_attention_type" not in d
              or d["model_type"] in ("t5gemma", "m2m_100")
              and d["architectures"][0].endswith("ForConditionalGeneration")]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", FLOP_CASES, ids=case_ids(FLOP_CASES))
def test_training_flops_equal_flop_counter(data):
    """One forward + backward of the HF module (eager) counts exactly our model FLOPs (T5Gemma's
    cross-attention between its two norms; LongT5's
    local blocks at a length of 3 x block_len: every query then sees the 12 keys we count; Switch's
    top-1 experts, no token over expert_capacity 64)."""
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ, decoder_seq_len=DEC)).model
    assert ours == sum(hf_training_flop_counts(data, BATCH, SEQ, DEC).values())


@pytest.mark.torch
@pytest.mark.slow
def test_longt5_transient_global_flops_but_the_one_hot_gradient():
    """LongT5 transient-global: FlopCounterMode equals ours less the one input gradient autograd
    skips, that of the one-hot block assignment in the global aggregation (its input is a
    constant): 2 t (s / g) h per encoder block (Guo et al. 2022 sec. 3.1.2)."""
    data = dict(T5, model_type="longt5", architectures=["LongT5ForConditionalGeneration"], local_radius=3,
                encoder_attention_type="transient-global", global_block_size=4)
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ, decoder_seq_len=DEC)).model
    skipped = 2 * 2 * BATCH * SEQ * (SEQ // 4) * 64
    assert ours - skipped == sum(hf_training_flop_counts(data, BATCH, SEQ, DEC).values())


def test_led_encoder_blocks_see_the_window_and_the_decoder_everything():
    """LED at s = 4096 with attention_window 512: each encoder query scores 2 x 256 + 1 keys
    (Beltagy et al. 2020 sec. 3.1), each decoder query all 64 decoder positions."""
    spec = from_hf_config(dict(LED, attention_window=512, max_encoder_position_embeddings=4096))
    encoder = block_forward_flops(spec, block_of(spec, 0), 4096, 4096)
    decoder = block_forward_flops(spec, block_of(spec, spec.layers), 64, 64, 4096, 4096)
    assert encoder["attention/score"] == 2 * 4096 * 513 * (64 + 64)
    assert decoder["attention/score"] == 2 * 64 * 64 * (64 + 64)


def test_longformer_queries_see_the_window():
    """Longformer-base at s = 4096, attention_window 512: 2 x 256 + 1 keys a query in every block."""
    spec = from_hf_config(dict(LONGFORMER, attention_window=512, max_position_embeddings=4098))
    flops = block_forward_flops(spec, block_of(spec, 0), 4096, 4096)
    assert flops["attention/score"] == 2 * 4096 * 513 * (64 + 64)


def test_longt5_local_keys_and_transient_global_summaries_by_hand():
    """LongT5 at s = 4096, local_radius 127 (block_len 128: 3 x 128 keys), global_block_size 16:
    256 summaries a sequence, scored by every query (QK^T and AV), k / v projected once each."""
    spec = from_hf_config(dict(T5, model_type="longt5", encoder_attention_type="transient-global"))
    flops = block_forward_flops(spec, block_of(spec, 0), 4096, 4096)
    assert flops["attention/score"] == 2 * 4096 * 384 * (64 + 64)
    assert flops["attention/relative/global_score"] == 2 * 4096 * 256 * (64 + 64)
    assert flops["attention/relative/global_kv"] == 2 * 256 * 64 * 2 * 64


def test_switch_sparse_blocks_follow_the_sparse_step():
    """Switch-base (12 + 12 blocks, 6 sparse each: step 2): blocks 1, 3, ..., 11 of each stack are
    Switch layers (SwitchTransformersStack: i % step == 1)."""
    spec = from_hf_config(dict(SWITCH, num_layers=12, num_decoder_layers=12, num_sparse_encoder_layers=6,
                               num_sparse_decoder_layers=6))
    assert [i for i in range(24) if spec.is_moe_layer(i)] == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23]


COUNT_PLAN = [(dict(T5, model_type="umt5"), ("extras.relative.bias_table",)),
              (dict(T5, model_type="longt5", encoder_attention_type="transient-global"),
               ("extras.relative.encoder_sliding", "extras.relative.transient_global")),
              (dict(SWITCH), ("arch=encoder_decoder",)),
              (dict(LED), ("extras.relative.encoder_sliding", "extras.relative.global_projections")),
              (dict(T5GEMMA), ("extras.encoder_token_table", "extras.cross_post_norm")),
              (dict(M2M), ("arch=encoder_decoder",)),
              (dict(LONGFORMER), ("extras.relative.global_projections",))]


@pytest.mark.parametrize(("data", "features"), COUNT_PLAN, ids=[d["model_type"] for d, _ in COUNT_PLAN])
def test_count_plan_run_and_verify_names_the_features(tmp_path, data, features):
    """count and plan --gpus 8 exit 0; verify refuses the options the executor does not run, by name."""
    assert_count_plan_verify(tmp_path, data, *features)


@pytest.mark.parametrize(("data", "message"), [
    (dict(T5, model_type="longt5", encoder_attention_type="global"), "encoder_attention_type: unsupported 'global'"),
    (dict(LED, attention_window=[8, 16]), r"attention_window: \[8, 16\]"),
    (dict(LONGFORMER, attention_window=[8, 16]), r"attention_window: \[8, 16\]"),
    (dict(LED, architectures=["LEDForCausalLM"]), "LED's decoder alone is not modelled"),
    (dict(T5GEMMA, decoder=dict(GEMMA_STACK, hidden_size=32)), r"decoder.hidden \(32\) != encoder.hidden \(64\)"),
    (dict(T5GEMMA, architectures=["T5GemmaForQuestionAnswering"]), "'T5GemmaForQuestionAnswering' not modelled"),
])
def test_unmodelled_is_a_one_line_error_naming_the_field(data, message):
    """What the spec cannot express is refused in one line naming the config key."""
    assert_one_line_error(data, message)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "architecture"), [("bart", "BartForSequenceClassification"),
                                                          ("t5", "T5ForSequenceClassification")])
def test_classifier_class_defaults_equal_transformers(model_type, architecture):
    """facebook/bart-large-mnli's class and T5's classifier at their config class defaults."""
    assert_class_defaults(model_type, architecture)


def test_planner_gemms_equal_the_counted_block_flops_of_transient_global():
    """The planner's GEMMs of a LongT5 transient-global encoder block (local window, the global
    summaries' aggregation, k / v and scores) sum to count's block FLOPs (at s = the 12-key window:
    eager attention scores the whole square and masks it)."""
    from modelplan.count.flops import layer_forward_flops
    from modelplan.plan.kernels import layer_kernels

    spec = from_hf_config(dict(T5, model_type="longt5", local_radius=3, encoder_attention_type="transient-global",
                               global_block_size=4))
    s = 12
    counted = sum(layer_forward_flops(spec, 0, tokens=2 * s, seq_len=s).values())
    kernels = layer_kernels(spec, 1, 2, s, 2, block=block_of(spec, 0), attention="eager")
    assert sum(g.flops for g in kernels.gemms) == counted
