"""Conformer speech encoders (modelplan/specs/hf_conformer.py, specs/conformer.py, count/conformer.py):
wav2vec2-conformer, wav2vec2-bert, parakeet_ctc / parakeet_encoder and lasr_ctc / lasr_encoder
(hf_conformer_ctc.py). Expected totals are sum(p.numel()) of transformers 5.24's
classes built on CPU from small configs (and on the meta device from the class defaults); one
block's Conformer parts and their FLOPs are worked by hand from Gulati et al. 2020 fig. 1 / the
HF modules; count / plan --gpus 8 run and verify refuses the new feature in one line."""

from __future__ import annotations

import pytest

from _hf_n17_checks import (assert_class_defaults, assert_count_plan_verify, assert_one_line_error,
                            assert_total_on_cpu)
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

_SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
          "conv_depthwise_kernel_size": 5, "vocab_size": 20, "num_labels": 3, "classifier_proj_size": 8}
_CONV = {"conv_dim": [16, 16], "conv_kernel": [10, 3], "conv_stride": [5, 2], "num_conv_pos_embeddings": 16,
         "num_conv_pos_embedding_groups": 4}

CASES = [
    {"model_type": "wav2vec2-conformer", "architectures": ["Wav2Vec2ConformerForCTC"], **_SMALL, **_CONV},
    {"model_type": "wav2vec2-conformer", "architectures": ["Wav2Vec2ConformerForSequenceClassification"], **_SMALL,
     **_CONV, "position_embeddings_type": "rotary", "use_weighted_layer_sum": True},
    {"model_type": "wav2vec2-conformer", "architectures": ["Wav2Vec2ConformerModel"], **_SMALL, **_CONV,
     "position_embeddings_type": None, "mask_time_prob": 0.0},
    {"model_type": "wav2vec2-conformer", "architectures": ["Wav2Vec2ConformerForPreTraining"], **_SMALL, **_CONV,
     "codevector_dim": 16, "proj_codevector_dim": 8, "num_codevectors_per_group": 10},
    {"model_type": "wav2vec2-bert", "architectures": ["Wav2Vec2BertForCTC"], **_SMALL,
     "feature_projection_input_dim": 24},
    {"model_type": "wav2vec2-bert", "architectures": ["Wav2Vec2BertForSequenceClassification"], **_SMALL,
     "feature_projection_input_dim": 24, "position_embeddings_type": "relative", "use_weighted_layer_sum": True},
    {"model_type": "wav2vec2-bert", "architectures": ["Wav2Vec2BertModel"], **_SMALL,
     "feature_projection_input_dim": 24, "position_embeddings_type": "rotary", "mask_time_prob": 0.0},
]
_NEMO = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
         "conv_kernel_size": 5, "subsampling_conv_channels": 8, "num_mel_bins": 16, "subsampling_conv_kernel_size": 3}
CASES += [
    {"model_type": "parakeet_ctc", "architectures": ["ParakeetForCTC"], "vocab_size": 20,
     "encoder_config": {"model_type": "parakeet_encoder", **_NEMO, "subsampling_factor": 4}},
    {"model_type": "parakeet_ctc", "architectures": ["ParakeetForCTC"], "vocab_size": 20,
     "encoder_config": {"model_type": "parakeet_encoder", **_NEMO, "attention_bias": False,
                        "convolution_bias": False}},
    {"model_type": "parakeet_encoder", "architectures": ["ParakeetEncoder"], **_NEMO, "subsampling_factor": 4},
    {"model_type": "lasr_ctc", "architectures": ["LasrForCTC"], "vocab_size": 20,
     "encoder_config": {"model_type": "lasr_encoder", **_NEMO, "conv_kernel_size": 4}},
    {"model_type": "lasr_encoder", "architectures": ["LasrEncoder"], **_NEMO, "attention_bias": True,
     "convolution_bias": True},
]
IDS = [f"{d['architectures'][0]}-{i}" for i, d in enumerate(CASES)]


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_total_equals_transformers_on_cpu(data):
    """modelplan's total = sum(p.numel()) of the class built on CPU."""
    assert_total_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "cls"), [("wav2vec2-conformer", "Wav2Vec2ConformerForSequenceClassification"),
                                                 ("parakeet_ctc", "ParakeetForCTC"), ("lasr_ctc", "LasrForCTC"),
                                                 ("wav2vec2-bert", "Wav2Vec2BertForSequenceClassification"),
                                                 ("wav2vec2-bert", "Wav2Vec2BertModel")])
def test_class_defaults_equal_transformers(model_type, cls):
    """The config class defaults (24 blocks of 1024 for Wav2Vec2-BERT), meta device."""
    assert_class_defaults(model_type, cls)


def test_conformer_block_parts_by_hand():
    """h 32, f 48, kernel 5, 4 heads of 8: ffn1 2 x 32 x 48 + 48 + 32 and its LayerNorm 64; the conv
    module's LayerNorm 64, pointwise1 32 x 64, depthwise 32 x 5, BatchNorm 64, pointwise2 32 x 32
    (bias-free convs); final_layer_norm 64; linear_pos 32 x 32 and pos_bias_u / v 2 x 32
    (Wav2Vec2ConformerEncoderLayer)."""
    b = count_params(from_hf_config(CASES[0])).breakdown
    assert b["layers/conformer/ffn1"] == 2 * (2 * 32 * 48 + 48 + 32)
    assert b["layers/conformer/ffn1_norm"] == b["layers/conformer/block_norm"] == 2 * 64
    assert b["layers/conformer/conv"] == 2 * (64 + 32 * 64 + 32 * 5 + 64 + 32 * 32)
    assert b["layers/conformer/relative"] == 2 * (32 * 32 + 2 * 32)


def test_distance_table_by_hand():
    """Wav2Vec2-BERT's relative_key: (64 + 8 + 1) x head_dim 8 per block (distance_embedding)."""
    b = count_params(from_hf_config(CASES[4])).breakdown
    assert b["layers/conformer/relative"] == 2 * 73 * 8


def test_conformer_flops_by_hand():
    """One clip of s = 10 frames, h 32, f 48, kernel 5: ffn1 2 x 2 s h f, the conv module
    2 s (h 2h + h k + h h) (pointwise, depthwise, pointwise), Transformer-XL's position projection
    2 (2s - 1) h h and scores 2 s (2s - 1) h, per block."""
    f = count_flops(from_hf_config(CASES[0]), TrainingSpec(global_batch=1, seq_len=10)).breakdown
    s, h = 10, 32
    assert f["layers/conformer/ffn1"] == 2 * 2 * 2 * s * h * 48
    assert f["layers/conformer/conv"] == 2 * 2 * s * (h * 2 * h + h * 5 + h * h)
    assert f["layers/conformer/relative_proj"] == 2 * 2 * 19 * h * h
    assert f["layers/conformer/relative_score"] == 2 * 2 * s * 19 * h


def test_parakeet_front_flops_by_hand():
    """ParakeetEncoderSubsamplingConv2D, factor 4, k 3, stride 2, 16 mel bins, C 8, h 32, per encoder
    frame: conv0 on 2 time x 8 frequency positions, 2 x 9 x 8 each; the depthwise conv on 1 x 4,
    2 x 9 x 8; the pointwise 2 x 8 x 8 on 1 x 4; the linear 2 x (8 x 16 / 4) x 32."""
    f = count_flops(from_hf_config(CASES[7]), TrainingSpec(global_batch=1, seq_len=10)).breakdown
    per_frame = 2 * 16 * 9 * 8 + 2 * 4 * 9 * 8 + 2 * 4 * 8 * 8 + 2 * 32 * 32
    assert f["embedding/front"] == 10 * per_frame


def test_lasr_block_norms_bias_free_by_hand():
    """LASR's five bias-free LayerNorms a block (32 each) and the final out_norm (32); the conv
    module bias-free with a 4-tap depthwise conv: 32 x 64 + 32 x 4 + BatchNorm 64 + 32 x 32."""
    b = count_params(from_hf_config(CASES[10])).breakdown
    assert b["layers/norm"] + b["layers/conformer/ffn1_norm"] + b["layers/conformer/block_norm"] == 2 * 4 * 32
    assert b["layers/conformer/conv"] == 2 * (32 + 32 * 64 + 32 * 4 + 64 + 32 * 32)
    assert b["final_norm"] == 32


@pytest.mark.parametrize("data", CASES[:1] + CASES[4:5] + CASES[7:8] + CASES[10:11],
                         ids=IDS[:1] + IDS[4:5] + IDS[7:8] + IDS[10:11])
def test_count_plan_run_and_verify_refuses(data, tmp_path):
    """count and plan --gpus 8 exit 0; verify refuses the Conformer blocks in one line."""
    assert_count_plan_verify(tmp_path, data, "extras.conformer")


def test_bad_configs_one_line():
    """A CTC head without vocab_size, an even depthwise kernel, Wav2Vec2-BERT's adapter, an unknown
    position type, an unmodelled head: one line naming the field."""
    assert_one_line_error({**CASES[0], "vocab_size": None}, "vocab_size: missing")
    assert_one_line_error({**CASES[0], "conv_depthwise_kernel_size": 4}, "conv_depthwise_kernel_size: 4 must be odd")
    assert_one_line_error({**CASES[4], "add_adapter": True}, "add_adapter: true is not modelled")
    assert_one_line_error({**CASES[4], "position_embeddings_type": "alibi"}, "position_embeddings_type")
    assert_one_line_error({**CASES[4], "architectures": ["Wav2Vec2BertForXVector"]}, "architectures")
    assert_one_line_error({**CASES[7], "architectures": ["ParakeetForTDT"]}, "architectures")
    bad = {**CASES[7], "encoder_config": {**CASES[7]["encoder_config"], "subsampling_factor": 6}}
    assert_one_line_error(bad, "subsampling_factor: 6")


def test_planner_prices_the_conformer_gemms():
    """plan/extras.conformer_kernels: ffn1 (t, h) @ (h, f) and back, the conv module's pointwise
    (t, h) @ (h, 2h) and (t, h) @ (h, h) for t = 10 tokens, h 32, f 48: 2 t (2 h f + 3 h^2) FLOPs;
    the plan's note then names only the unpriced relative positions."""
    from modelplan.plan.extras import conformer_kernels

    gemms, _ = conformer_kernels(from_hf_config(CASES[0]), 10, 2)
    assert sum(g.flops for g in gemms) == 2 * 10 * (2 * 32 * 48 + 3 * 32 * 32)
