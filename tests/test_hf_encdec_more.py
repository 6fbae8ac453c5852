"""The text encoder-decoders of modelplan/specs/hf_encdec_more.py (BigBird-Pegasus).

Independent sources: transformers 5.24's own modules built from the same config (sum(p.numel())
on the meta device for the total and the trainable), and the block-sparse encoder's attention
FLOPs worked by hand from Zaheer et al. 2020 sec. 2 ((5 + r) x block_size keys per query)."""

from __future__ import annotations

import json

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import hf_model
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

SMALL = dict(d_model=16, encoder_layers=2, decoder_layers=3, encoder_attention_heads=2, decoder_attention_heads=2,
             encoder_ffn_dim=24, decoder_ffn_dim=24, vocab_size=100, max_position_embeddings=256, block_size=8,
             num_random_blocks=2)
HEADS = ["BigBirdPegasusForConditionalGeneration", "BigBirdPegasusModel", "BigBirdPegasusForCausalLM"]


def small(head: str, **overrides) -> dict:
    """The config.json transformers writes for a small BigBird-Pegasus, naming `head`."""
    from _hf_reference import transformers_module

    cfg = transformers_module().AutoConfig.for_model("bigbird_pegasus", **{**SMALL, **overrides})
    return {**json.loads(cfg.to_json_string(use_diff=False)), "architectures": [head]}


def hf_params(data: dict) -> tuple[int, int]:
    params = list(hf_model(data).parameters())
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


def mine(data: dict) -> tuple[int, int]:
    counts = count_params(from_hf_config(data, "config.json"))
    return counts.total, counts.trainable


@pytest.mark.torch
@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("use_bias", [False, True])
def test_small_config_equals_transformers(head, use_bias):
    """Each head of a small config counts exactly (the causal LM's head is never tied)."""
    data = small(head, use_bias=use_bias)
    assert mine(data) == hf_params(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("head", HEADS)
def test_class_defaults_equal_transformers(head):
    """BigBirdPegasusConfig's defaults (the full-size model) count exactly on the meta device."""
    data = {**class_defaults("bigbird_pegasus"), "architectures": [head]}
    assert mine(data) == hf_params(data)


def test_block_sparse_encoder_scores_by_hand():
    """256 source tokens, block 8, 2 random blocks: each encoder query scores (5 + 2) x 8 = 56 keys,
    QK^T and AV 4 x 56 x 16 FLOPs a token in each of 2 blocks; the 3 decoder blocks score their 16
    target tokens in full (4 x 16 x 16 x 16 each); original_full scores all 256 source keys."""
    data = small(HEADS[0], use_bias=False)
    training = TrainingSpec(seq_len=256, global_batch=1, decoder_seq_len=16)
    decoder = 3 * 4 * 16 * 16 * 16
    sparse = count_flops(from_hf_config(data), training).breakdown["layers/attention/score"]
    assert sparse == 2 * 4 * 256 * 56 * 16 + decoder
    full = count_flops(from_hf_config({**data, "attention_type": "original_full"}), training)
    assert full.breakdown["layers/attention/score"] == 2 * 4 * 256 * 256 * 16 + decoder


def test_count_and_plan_run(tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` succeed on the config.json."""
    assert_count_plan(tmp_path, {"model_type": "bigbird_pegasus", **SMALL, "architectures": [HEADS[0]]})


def test_unknown_attention_type_is_a_one_line_error():
    """An attention_type other than block_sparse / original_full is a one-line error naming it."""
    assert_one_line_error({"model_type": "bigbird_pegasus", **SMALL, "attention_type": "sliding"},
                          r"attention_type: unsupported 'sliding'")
