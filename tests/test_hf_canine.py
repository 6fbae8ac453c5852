"""CANINE (modelplan/specs/hf_canine.py): every head class equals transformers 5.24's own module
sum(p.numel()) at the class defaults (meta device) and on a small config on CPU."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_default_totals
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

HEADS = ["CanineForSequenceClassification", "CanineForMultipleChoice", "CanineForTokenClassification",
         "CanineForQuestionAnswering", "CanineModel"]
SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
         "num_hash_functions": 4, "num_hash_buckets": 64, "downsampling_rate": 2, "upsampling_kernel_size": 3,
         "type_vocab_size": 4}


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("cls", HEADS)
def test_class_defaults_equal_transformers(cls):
    """Class defaults (12 deep blocks + 2 character blocks of 768, 8 x 16384 hash rows): equal."""
    ours, theirs = class_default_totals("canine", cls)
    assert ours == theirs


@pytest.mark.torch
@pytest.mark.slow
def test_small_config_equals_transformers_on_cpu():
    """A small config built for real on CPU: total equals sum(p.numel())."""
    ours, theirs = class_default_totals("canine", "CanineForSequenceClassification", "cpu", **SMALL)
    assert ours == theirs


def test_convs_by_hand():
    """The small config's convs (modeling_canine.py): CharactersToMolecules Conv1d(32, 32, 2) = 32 x 32
    x 2 + 32 = 2,080; ConvProjection Conv1d(64, 32, 3) = 64 x 32 x 3 + 32 = 6,176; four hash tables of
    64 x 8 = 2,048 as the token table; 2 + 2 blocks."""
    c = count_params(from_hf_config({**SMALL, "model_type": "canine"}))
    b = c.breakdown
    assert (b["embedding/side/chars_to_molecules/conv"], b["embedding/side/projection/conv"]) == (2080, 6176)
    assert (b["embedding/token"], len(c.per_layer)) == (2048, 4)


def test_uneven_hash_shards_are_a_one_line_error():
    """num_hash_functions not dividing hidden_size is refused naming the key."""
    assert_one_line_error({**SMALL, "model_type": "canine", "num_hash_functions": 3}, r"num_hash_functions: 3")
