"""Untied encoder-decoders' own token tables (`Seq2SeqSpec.own_token_tables`) in the plan's and the
memory count's model states, not only in `count`'s parameter total.

Hand-worked from transformers' BartForConditionalGeneration with tie_word_embeddings false
(BartModel._tied_weights_keys ties encoder / decoder embed_tokens and lm_head to `shared` only when
tied): it holds four vocab x d_model tables where the tied model holds one, so untying adds
3 V d parameters. Megatron-style vocab-parallel tables split each over tp (V / tp rows per rank),
and ZeRO-1 shards optimizer states over dp.
"""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.count.memory import count_memory
from modelplan.plan.estimate import estimate_plan
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

V, D = 10_000, 64
BART = {"model_type": "bart", "d_model": D, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "vocab_size": V,
        "max_position_embeddings": 64, "architectures": ["BartForConditionalGeneration"]}
TRAINING = TrainingSpec(global_batch=8, seq_len=64)  # bf16 weights (2 B), fp32 grads (4 B), Adam m, v (8 B)
EXTRA = 3 * V * D
"""shared is the tied table; untied adds encoder embed_tokens, decoder embed_tokens and lm_head."""


def _specs():
    return (from_hf_config({**BART, "tie_word_embeddings": True}),
            from_hf_config({**BART, "tie_word_embeddings": False}))


def test_spec_keeps_two_own_tables():
    """The untied spec states the stacks' two own tables (the fourth is the untied lm_head)."""
    tied, untied = _specs()
    assert untied.seq2seq.own_token_tables == 2 and not untied.tied_embeddings
    assert tied.seq2seq is None or tied.seq2seq.own_token_tables == 0


@pytest.mark.parametrize(("plan", "per_rank"), [
    (Plan(), EXTRA),  # one rank holds all three tables
    (Plan(tp=2), EXTRA // 2),  # vocab-split: V / 2 rows of each table per rank
])
def test_plan_weights_and_gradients_hold_the_tables(plan, per_rank):
    """Plan memory: untied minus tied weights are 2 B x the tables' elements per rank, gradients 4 B x."""
    cluster = load_cluster("dgx-h100")
    tied, untied = (estimate_plan(s, TRAINING, plan, cluster).memory[0] for s in _specs())
    assert untied.weights - tied.weights == 2 * per_rank
    assert untied.gradients - tied.gradients == 4 * per_rank


def test_zero1_shards_the_tables_optimizer_states():
    """ZeRO-1 over dp 2: the tables' fp32 master, m and v (12 B each) are halved; weights stay whole."""
    cluster = load_cluster("dgx-h100")
    tied, untied = (estimate_plan(s, TRAINING, Plan(dp=2, zero=1), cluster).memory[0] for s in _specs())
    assert untied.optimizer - tied.optimizer == 12 * EXTRA // 2
    assert untied.weights - tied.weights == 2 * EXTRA


def test_count_memory_holds_the_tables():
    """`modelplan count`'s memory: weights, gradients and optimizer states of the three tables."""
    tied, untied = (count_memory(s, TRAINING, 1) for s in _specs())
    assert untied.weights - tied.weights == 2 * EXTRA
    assert untied.gradients - tied.gradients == 4 * EXTRA
    assert untied.optimizer - tied.optimizer == 8 * EXTRA
