"""The encoders of modelplan/specs/hf_encoders.py (distilbert, mpnet, ibert, deberta, deberta-v2,
modernbert, albert, flaubert, esm, eurobert, nomic_bert) and the options they use (specs/relative_attention.py, specs/layer_sharing.py):
total and trainable parameters equal sum(p.numel()) of transformers 5.24's module built on CPU
from a tiny config for every head read, and at the config class defaults (meta device); training
FLOPs equal FlopCounterMode's count of one eager forward + backward, less the terms named per test;
`count` and `plan --gpus 8` run and `verify` refuses the new options by name in one line; what is
not modelled is a one-line error naming the field."""

from __future__ import annotations

import pytest

from _hf_n17_checks import (assert_class_defaults, assert_count_plan, assert_count_plan_verify, assert_one_line_error,
                             assert_total_and_trainable_on_cpu, case_ids, class_defaults)
from _hf_reference import hf_numel, hf_training_flop_counts
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import block_of
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

BERT = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96, vocab_size=100,
            max_position_embeddings=40, num_labels=3)
"""A tiny BERT-shaped config in BERT's key names."""
DISTIL = dict(model_type="distilbert", n_layers=2, dim=64, n_heads=4, hidden_dim=96, vocab_size=100,
              max_position_embeddings=40, num_labels=3)
HEADS = ["ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
         "ForMultipleChoice"]
DEBERTA_V3 = dict(relative_attention=True, pos_att_type="p2c|c2p", position_biased_input=False, position_buckets=8,
                  norm_rel_ebd="layer_norm", share_att_key=True, max_relative_positions=-1)
"""deberta-v3-base's relative-attention keys (its published config.json), 8 buckets instead of 256."""
DEBERTA_V2_XL = dict(relative_attention=True, pos_att_type="p2c|c2p", position_buckets=8, share_att_key=False,
                     conv_kernel_size=3, conv_groups=1, legacy=False)
"""deberta-v2-xlarge's keys (its ConvLayer, separate position projections), 8 buckets."""

CASES = [dict(DISTIL, architectures=["DistilBert" + h], **({"num_labels": 2} if h == "ForQuestionAnswering" else {}))
         for h in HEADS]  # DistilBertForQuestionAnswering requires num_labels 2
CASES += [dict(BERT, model_type="mpnet", architectures=["MPNet" + h]) for h in HEADS]
CASES += [dict(BERT, model_type="ibert", architectures=["IBert" + h]) for h in HEADS]
CASES += [dict(BERT, model_type="deberta", architectures=["Deberta" + h], **extra) for h in HEADS[:5]
          for extra in ({}, dict(relative_attention=True, pos_att_type="c2p|p2c"),
                        dict(relative_attention=True, pos_att_type=["c2p"], max_relative_positions=8))]
CASES += [dict(BERT, model_type="deberta-v2", architectures=["DebertaV2" + h], **extra) for h in HEADS
          for extra in ({}, DEBERTA_V3, DEBERTA_V2_XL, dict(DEBERTA_V3, type_vocab_size=2, pos_att_type=["c2p"]))]
CASES += [dict(BERT, model_type="modernbert", architectures=["ModernBert" + h], pad_token_id=0, num_hidden_layers=4,
               **extra) for h in HEADS
          for extra in ({}, dict(norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True),
                        dict(decoder_bias=False, global_attn_every_n_layers=2, classifier_pooling="mean"))]
CASES += [dict(BERT, model_type="albert", architectures=["Albert" + h], num_hidden_layers=4, **extra)
          for h in HEADS + ["ForPreTraining"]
          for extra in (dict(embedding_size=32), dict(embedding_size=32, num_hidden_groups=2),
                        dict(embedding_size=64, num_hidden_groups=3))]

FLAUBERT = dict(model_type="flaubert", n_layers=2, emb_dim=64, n_heads=4, vocab_size=100, max_position_embeddings=40,
                num_labels=3, pad_token_id=0)
CASES += [dict(FLAUBERT, architectures=["Flaubert" + h], **extra)
          for h in ("WithLMHeadModel", "Model", "ForSequenceClassification", "ForTokenClassification",
                    "ForQuestionAnsweringSimple") for extra in ({}, dict(pre_norm=True), dict(n_langs=3))]

ESM = dict(BERT, model_type="esm", vocab_size=33, pad_token_id=1, mask_token_id=32)
CASES += [dict(ESM, architectures=["Esm" + h], **extra)
          for h in ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification")
          for extra in (dict(position_embedding_type="rotary"), dict(emb_layer_norm_before=True))]
"""ESM-2 (rotary, no embedding norm) and ESM-1b (learned positions, emb_layer_norm_before)."""

EUROBERT = dict(BERT, model_type="eurobert", num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                mask_token_id=3)
CASES += [dict(EUROBERT, architectures=["EuroBert" + h], **extra)
          for h in ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification")
          for extra in ({}, dict(mlp_bias=True, tie_word_embeddings=True, classifier_pooling="mean"))]
"""EuroBERT: Llama blocks both ways; 'late' pooling runs the dense and classifier on every token."""

NOMIC = dict(BERT, model_type="nomic_bert", head_dim=16, pad_token_id=0)
CASES += [dict(NOMIC, architectures=["NomicBert" + h])
          for h in ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification")]

MASKED_LM = {"distilbert": "DistilBertForMaskedLM", "mpnet": "MPNetForMaskedLM", "ibert": "IBertForMaskedLM",
             "deberta": "DebertaForMaskedLM", "deberta-v2": "DebertaV2ForMaskedLM",
             "modernbert": "ModernBertForMaskedLM", "albert": "AlbertForMaskedLM",
             "flaubert": "FlaubertWithLMHeadModel", "eurobert": "EuroBertForMaskedLM",
             "nomic_bert": "NomicBertForMaskedLM"}
"""transformers' MODEL_FOR_MASKED_LM_MAPPING_NAMES entry of each type."""


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=case_ids(CASES))
def test_total_and_trainable_equal_transformers_on_cpu(data):
    """Total and trainable parameters equal those of the transformers model built on CPU."""
    assert_total_and_trainable_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(MASKED_LM))
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults, built on the meta device as the masked-LM class."""
    assert_class_defaults(model_type, MASKED_LM[model_type])


@pytest.mark.torch
def test_esm_class_defaults_with_a_vocabulary_equal_transformers():
    """EsmConfig's defaults leave vocab_size None (refused in one line); with ESM-2's 33 tokens they
    count what transformers builds (EsmForMaskedLM, its contact head included)."""
    assert_one_line_error(class_defaults("esm"), "vocab_size: missing")
    data = {**class_defaults("esm"), "vocab_size": 33, "architectures": ["EsmForMaskedLM"]}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.torch
def test_deberta_v3_base_published_config_equals_transformers():
    """microsoft/deberta-v3-base's config.json (as published) counts what transformers builds."""
    data = dict(model_type="deberta-v2", architectures=["DebertaV2ForMaskedLM"], hidden_size=768,
                intermediate_size=3072, num_attention_heads=12, num_hidden_layers=12, vocab_size=128100,
                max_position_embeddings=512, type_vocab_size=0, layer_norm_eps=1e-7,
                **{**DEBERTA_V3, "position_buckets": 256})
    assert count_params(from_hf_config(data)).total == hf_numel(data)


BATCH, SEQ = 2, 12
FLOP_CASES = [d for d in CASES if d["architectures"][0].endswith(("ForMaskedLM", "ForSequenceClassification"))
              and d["model_type"] in ("distilbert", "mpnet", "ibert", "modernbert", "albert", "esm", "eurobert",
                                         "nomic_bert")]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", FLOP_CASES, ids=case_ids(FLOP_CASES))
def test_training_flops_equal_flop_counter(data):
    """One forward + backward of the HF module (eager) counts exactly our model FLOPs: ALBERT's
    shared blocks at every use, its factored embeddings and head; ModernBERT's classifier head's
    dense on the pooled rows only (at a length its local window covers: eager attention masks the
    square, it does not skip it)."""
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ)).model
    assert ours == sum(hf_training_flop_counts(data, BATCH, SEQ).values())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("extra", "positions", "projections"), [
    (dict(relative_attention=True, pos_att_type="c2p|p2c"), 2 * SEQ, 2),  # v1: att_span = min(seq, 40)
    (dict(relative_attention=True, pos_att_type=["c2p"], max_relative_positions=8), 16, 1),
])
def test_deberta_flops_but_the_per_sequence_position_projections(extra, positions, projections):
    """DeBERTa: FlopCounterMode equals ours less the position projections' repeats: transformers
    projects the P relative embeddings once a forward call ((P, h) @ (h, h) per projection and block,
    3x with backward), we once a sequence (He et al. 2021 eq. 4), so ours is (b - 1) of them higher."""
    data = dict(BERT, model_type="deberta", architectures=["DebertaForMaskedLM"], **extra)
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ)).model
    repeats = 3 * (BATCH - 1) * projections * 2 * positions * 64 * 64 * BERT["num_hidden_layers"]
    assert ours - repeats == sum(hf_training_flop_counts(data, BATCH, SEQ).values())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("extra", [DEBERTA_V3, DEBERTA_V2_XL], ids=["v3-shared", "v2-conv-separate"])
def test_deberta_v2_flops_but_the_per_sequence_position_projections(extra):
    """DeBERTa-v2 / v3: 2 x position_buckets relative positions whatever the length; ConvLayer
    counted as its GEMM-equivalent (t, 3h) @ (3h, h)."""
    data = dict(BERT, model_type="deberta-v2", architectures=["DebertaV2ForMaskedLM"], **extra)
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ)).model
    repeats = 3 * (BATCH - 1) * 2 * 2 * 16 * 64 * 64 * BERT["num_hidden_layers"]  # P = 2 x 8 buckets, c2p and p2c
    assert ours - repeats == sum(hf_training_flop_counts(data, BATCH, SEQ).values())


def test_deberta_v3_relative_flops_by_hand():
    """One deberta-v3 block at s = 512 over 2 x 256 positions (He et al. 2021 eq. 4): the two
    projections of the 512 embeddings, 2 x 2 x 512 x 768 x 768 a sequence, and the c2p + p2c
    scores, 2 x 2 x 512 x 512 x 768 a sequence."""
    data = dict(BERT, model_type="deberta-v2", hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                max_position_embeddings=512, **{**DEBERTA_V3, "position_buckets": 256})
    spec = from_hf_config(data)
    flops = block_forward_flops(spec, block_of(spec, 0), 512, 512)
    assert flops["attention/relative/proj"] == 2 * 2 * 512 * 768 * 768
    assert flops["attention/relative/score"] == 2 * 2 * 512 * 512 * 768


def test_modernbert_local_blocks_see_local_attention_plus_one_keys():
    """ModernBERT's sliding blocks see local_attention // 2 positions either side and their own
    (ModernBertAttention: a bidirectional window of sliding_window + 1 = 65): 129 keys, the
    global blocks (every third, from block 0) all 1024."""
    data = dict(BERT, model_type="modernbert", pad_token_id=0, num_hidden_layers=3, max_position_embeddings=1024)
    spec = from_hf_config(data)
    scores = [block_forward_flops(spec, block_of(spec, i), 1024, 1024)["attention/score"] for i in range(3)]
    assert scores == [2 * 1024 * 1024 * 128, 2 * 1024 * 129 * 128, 2 * 1024 * 129 * 128]


def test_albert_counts_each_weight_group_once_and_runs_every_block():
    """ALBERT with 4 blocks over 2 groups: the blocks' parameters are two blocks' (per_layer puts
    them at blocks 0 and 2), the FLOPs four blocks' (as one group each: Lan et al. 2020 sec. 3.1)."""
    shared = count_params(from_hf_config(dict(BERT, model_type="albert", num_hidden_layers=4, num_hidden_groups=2)))
    own = count_params(from_hf_config(dict(BERT, model_type="albert", num_hidden_layers=2, num_hidden_groups=2)))
    assert shared.breakdown["layers"] == own.breakdown["layers"]
    assert shared.per_layer[1] == shared.per_layer[3] == 0 and shared.per_layer[0] == shared.per_layer[2] > 0
    training = TrainingSpec(global_batch=2, seq_len=8)
    four = count_flops(from_hf_config(dict(BERT, model_type="albert", num_hidden_layers=4)), training)
    two = count_flops(from_hf_config(dict(BERT, model_type="albert")), training)
    assert four.breakdown["layers"] == 2 * two.breakdown["layers"]


COUNT_PLAN = [(dict(DISTIL, architectures=["DistilBertForMaskedLM"]), ("mlm_transform",)),
              (dict(BERT, model_type="mpnet", architectures=["MPNetForMaskedLM"]), ("extras.relative.bias_table",)),
              (dict(BERT, model_type="deberta", architectures=["DebertaForMaskedLM"], relative_attention=True,
                    pos_att_type="c2p|p2c"), ("extras.relative.disentangled", "extras.relative.qv_bias_only")),
              (dict(BERT, model_type="deberta-v2", architectures=["DebertaV2ForMaskedLM"], **DEBERTA_V2_XL),
               ("extras.relative.disentangled",)),
              (dict(BERT, model_type="modernbert", architectures=["ModernBertForMaskedLM"], pad_token_id=0),
               ("extras.no_input_norm_blocks",)),
              (dict(BERT, model_type="modernbert", architectures=["ModernBertForSequenceClassification"],
                    pad_token_id=0), ("extras.head_transform_bias=false",)),
              (dict(BERT, model_type="albert", architectures=["AlbertForMaskedLM"]), ("extras.weight_groups",))]


@pytest.mark.parametrize(("data", "features"), COUNT_PLAN, ids=[d["model_type"] for d, _ in COUNT_PLAN])
def test_count_plan_run_and_verify_names_the_features(tmp_path, data, features):
    """count and plan --gpus 8 exit 0; verify refuses the options the executor does not run, by name."""
    assert_count_plan_verify(tmp_path, data, *features)


def test_ibert_count_and_plan_run(tmp_path):
    """I-BERT's integer-only modules hold RoBERTa's tensors: count and plan run."""
    assert_count_plan(tmp_path, dict(BERT, model_type="ibert", architectures=["IBertForMaskedLM"]))


@pytest.mark.parametrize(("data", "message"), [
    (dict(DISTIL, sinusoidal_pos_embds=True), "sinusoidal_pos_embds: true is not modelled"),
    (dict(ESM, is_folding_model=True), "is_folding_model: true is not modelled"),
    (dict(ESM, position_embedding_type="relative_key"), "position_embedding_type: unsupported 'relative_key'"),
    (dict(BERT, model_type="deberta", talking_head=True), "talking_head: true is not modelled"),
    (dict(BERT, model_type="deberta-v2", embedding_size=32), "embedding_size: 32 != hidden_size"),
    (dict(BERT, model_type="deberta-v2", pooler_hidden_size=32), "pooler_hidden_size: 32 != hidden_size"),
    (dict(BERT, model_type="deberta-v2", relative_attention=True, pos_att_type="c2p|p2p"), "pos_att_type: unsupported"),
    (dict(BERT, model_type="albert", inner_group_num=2), "inner_group_num: 2 is not modelled"),
    (dict(BERT, model_type="albert", num_hidden_groups=3), r"num_hidden_groups: 3 must be in 1..num_hidden_layers"),
    (dict(BERT, model_type="modernbert", architectures=["ModernBertForNextSentencePrediction"]),
     "unsupported head 'ModernBertForNextSentencePrediction'"),
])
def test_unmodelled_is_a_one_line_error_naming_the_field(data, message):
    """What the spec cannot express is refused in one line naming the config key."""
    assert_one_line_error(data, message)


@pytest.mark.torch
def test_coverage_script_surveys_the_masked_lm_class(tmp_path):
    """benchmarks/hf_coverage.py runs a masked-LM mapping entry with its class in `architectures`:
    distilbert's class defaults as DistilBertForMaskedLM count transformers' total."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "hf_coverage.py"
    module_spec = importlib.util.spec_from_file_location("hf_coverage", path)
    coverage = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(coverage)
    assert coverage.extra_classes()["masked_lm"]["distilbert"] == "DistilBertForMaskedLM"
    kind, total = coverage.classify("distilbert", tmp_path, "DistilBertForMaskedLM")
    data = {**class_defaults("distilbert"), "architectures": ["DistilBertForMaskedLM"]}
    assert (kind, int(total)) == ("supported", hf_numel(data))


@pytest.mark.parametrize("extra", [DEBERTA_V3, DEBERTA_V2_XL, dict(relative_attention=True, pos_att_type="c2p|p2c")],
                         ids=["v3", "v2-xl", "v1"])
def test_planner_gemms_equal_the_counted_block_flops(extra):
    """The planner's GEMMs of a DeBERTa block (its position projections and c2p / p2c scores beside
    the q/k/v, scores, out and MLP) sum to count's block FLOPs at tp 1, and split over tp 2."""
    from modelplan.count.flops import layer_forward_flops
    from modelplan.plan.kernels import layer_kernels

    model_type = "deberta" if "max_relative_positions" not in extra and "position_buckets" not in extra else "deberta-v2"
    spec = from_hf_config(dict(BERT, model_type=model_type, **extra))
    s = 32
    counted = sum(layer_forward_flops(spec, 0, tokens=2 * s, seq_len=s).values())
    tp1 = layer_kernels(spec, 1, 2, s, 2, block=block_of(spec, 0), attention="eager")
    tp2 = layer_kernels(spec, 2, 2, s, 2, block=block_of(spec, 0), attention="eager")
    assert sum(g.flops for g in tp1.gemms) == counted == 2 * sum(g.flops for g in tp2.gemms)
