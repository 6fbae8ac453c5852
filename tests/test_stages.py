"""Stage layout as data: blocks split evenly over virtual stages, units in forward order."""

from modelplan.plan.stages import stage_layers, stage_units
from modelplan.specs.transformer import MoESpec, TransformerSpec


def test_layers_split_evenly_over_virtual_stages():
    """8 blocks over pp * vpp = 4 stages: 2 each, stage 3 holds blocks 6 and 7."""
    assert [list(stage_layers(8, 4, v)) for v in range(4)] == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_units_of_a_tied_moe_model_on_two_stages():
    """Stage 0: embeddings then blocks; stage 1: blocks, head and the tied word-embedding copy.
    Block 1 is MoE (first_dense_layers = 1), so its routed experts are a unit of their own."""
    spec = TransformerSpec(layers=2, hidden=8, heads=2, ffn_hidden=8, vocab=8, tied_embeddings=True,
                           moe=MoESpec(num_experts=2, top_k=1, expert_ffn_hidden=4, first_dense_layers=1))
    assert stage_units(spec, 2) == [
        ["embedding/word", "embedding/extra", "layers/0"],
        ["layers/1", "layers/1/experts", "head", "embedding/word"],
    ]


def test_one_stage_holds_the_tied_embedding_once():
    """Without pipelining the tied head reuses the one word embedding."""
    spec = TransformerSpec(layers=1, hidden=8, heads=2, ffn_hidden=8, vocab=8, tied_embeddings=True)
    assert stage_units(spec, 1) == [["embedding/word", "embedding/extra", "layers/0", "head"]]
