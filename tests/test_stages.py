"""Stage layout as data: blocks split over virtual stages (evenly when they divide, first and
last stage lighter otherwise), units in forward order."""

import pytest

from modelplan.plan.stages import split_layers, stage_layers, stage_units
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


def test_llama3_405b_on_16_stages():
    """126 layers on 16 stages: first and last hold 7, the other 14 hold 8 (Dubey et al. 2024,
    sec. 3.3.2: one layer fewer on the first and the last stage)."""
    assert split_layers(126, 16) == (7,) + (8,) * 14 + (7,)


def test_bloom_on_12_stages():
    """70 layers on 12 stages: 70 = 5 + 10 x 6 + 5 (the 10 extra layers go to the middle stages)."""
    assert split_layers(70, 12) == (5,) + (6,) * 10 + (5,)


def test_remainder_beyond_the_middle_goes_to_the_last_then_the_first_stage():
    """7 layers on 4 stages: 1 each, +1 to the 2 middle stages, then the last: (1, 2, 2, 2)."""
    assert split_layers(7, 4) == (1, 2, 2, 2)
    assert split_layers(3, 2) == (1, 2)


def test_uneven_stages_cover_every_layer_once():
    """stage_layers of an uneven split are contiguous and cover 0..layers-1."""
    covered = [i for v in range(5) for i in stage_layers(23, 5, v)]
    assert covered == list(range(23))


def test_fewer_layers_than_stages_is_an_error():
    """Every stage needs a layer."""
    with pytest.raises(ValueError, match=r"layers \(3\) must be >= pipeline stages \(4\)"):
        split_layers(3, 4)


def test_planner_counts_the_blocks_of_each_uneven_stage():
    """10 dense blocks on pp 4: the pipeline ranks hold 2, 3, 3, 2 blocks (what the stage times
    and stage memories multiply)."""
    from modelplan.plan.pipeline import schedule_layout
    from modelplan.plan.stages import rank_blocks

    spec = TransformerSpec(layers=10, hidden=8, heads=2, ffn_hidden=8, vocab=8)
    blocks = rank_blocks(spec, schedule_layout("1f1b", 4), [(1,)] * 4)
    assert [(b.dense, b.moe, b.dense_run) for b in blocks] == [(2, 0, 2), (3, 0, 3), (3, 0, 3), (2, 0, 2)]
    assert [(b.embedding, b.head) for b in blocks] == [(1, 0), (0, 0), (0, 0), (0, 1)]


def test_fixed_first_and_last_stage_blocks():
    """Megatron --decoder-first/last-pipeline-num-layers: 126 layers on 16 stages with 6 + 6 leave
    114 for the 14 middle stages: 8 each and the 2 extra to the latest middle ones first
    (..., 9, 9, 8) by split_layers' own rule; a fixed last stage alone gives the rest to the
    first 15 stages."""
    assert split_layers(126, 16, (6, 6)) == (6,) + (8,) * 11 + (9, 9, 8, 6)
    assert sum(split_layers(126, 16, (None, 5))) == 126 and split_layers(126, 16, (None, 5))[-1] == 5
    assert split_layers(10, 2, (4, 6)) == (4, 6)
    with pytest.raises(ValueError, match="each stage needs >= 1"):
        split_layers(10, 4, (5, 4))


def test_fixed_split_flows_to_units_and_plan_validation():
    """The plan's first / last stage blocks decide which blocks each stage holds, and a split that
    leaves a stage empty is a plan problem naming the numbers."""
    from modelplan.plan.validate import split_problem

    spec = TransformerSpec(layers=6, hidden=8, heads=2, ffn_hidden=8, vocab=8)
    units = stage_units(spec, 3, (1, 1))
    assert [u for u in units[1] if u.startswith("layers/")] == ["layers/1", "layers/2", "layers/3", "layers/4"]
    assert split_problem(6, 3, 1, (4, 2)) is not None
    assert split_problem(6, 1, 1, (3, None)).message == "first_stage_layers / last_stage_layers need pp > 1"


def test_verify_executes_a_fixed_split():
    """GPT-2 scaled down on pp 4 with 2 blocks on the first stage and 1 on the last (5 blocks:
    2 + 1 + 1 + 1): the executed step equals the single-device reference, and each rank holds
    the parameters the cost side counts for that split (verify's held-elements rows)."""
    from modelplan.execute.verify import verify
    from modelplan.specs.load import load_model
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    plan = Plan(dp=1, pp=4, micro_batch=1, first_stage_layers=2, last_stage_layers=1)
    report = verify(load_model("gpt2"), TrainingSpec(global_batch=8, seq_len=64), plan)
    assert report.passed
    assert report.model.layers == 5
    assert {r.name for r in report.rows} >= {"loss", "gradients", "held weights"}
