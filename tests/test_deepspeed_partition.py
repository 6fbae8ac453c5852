"""DeepSpeed's default pipeline partition (`plan/deepspeed_partition.py`) against DeepSpeed's own
`deepspeed.runtime.utils.partition_balanced` and a hand-worked BLOOM-176B split."""

from __future__ import annotations

import random

import pytest

from modelplan.plan.deepspeed_partition import parameters_split, partition_balanced
from modelplan.specs.transformer import TransformerSpec

# BLOOM paper (arXiv 2211.05100) sec. 3 / BigScience tr11 config: 70 layers, hidden 14336, vocab 250880
BLOOM = TransformerSpec(name="BLOOM-176B", layers=70, hidden=14336, heads=112, ffn_hidden=57344, vocab=250880,
                        max_positions=2048, position="alibi", norm="layernorm", norm_bias=True, qkv_bias=True,
                        attn_out_bias=True, mlp_bias=True, gated_mlp=False, activation="gelu",
                        tied_embeddings=True, embedding_norm=True, dropout=False)


@pytest.mark.parametrize("seed", range(6))
def test_partition_balanced_is_deepspeeds(seed):
    """Random layer weights (zeros included, as DeepSpeed's parameter-free lambda layers) split
    into 2..8 parts: the same boundaries as DeepSpeed's own function."""
    utils = pytest.importorskip("deepspeed.runtime.utils")
    rng = random.Random(seed)
    weights = [rng.choice([0, rng.randint(1, 10**6)]) for _ in range(rng.randint(3, 40))]
    for parts in range(2, 9):
        assert partition_balanced(weights, parts) == list(utils.partition_balanced(weights, parts))


def test_bloom_parameters_partition_lightens_both_embedding_stages():
    """BLOOM-176B on pp 12: 2 x 3.6B embedding copies (tied, counted at both ends) + 70 x 2.47B
    blocks = 179.8B, ~15.0B a stage; a middle stage of 6 blocks holds 14.8B, an end stage of 5
    blocks plus an embedding 15.9B (6 would be 18.4B): 5 + 6 x 10 + 5 = 70."""
    assert parameters_split(BLOOM, tp=4, num_stages=12) == (5, *[6] * 10, 5)
