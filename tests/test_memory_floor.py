"""The search's memory floor (modelplan.plan.memory_floor): never above a plan's priced peak,
equal to it where it leaves nothing out, and the searches with and without it rank the same plans."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.errors import PlanInfeasible
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.memory_floor import MemoryFloor
from modelplan.plan.search import SearchSpace, search_family_plans, search_plans
from modelplan.plan.search_transformer import RELIEF_REACH
from modelplan.plan.search_ext import DpVariant
from modelplan.specs.load import load_model
from modelplan.specs.training import TrainingSpec

A100 = load_cluster("dgx-a100")
H100 = load_cluster("dgx-h100")
LONG = TrainingSpec(global_batch=64, seq_len=8192)


def _floor(ev: Evaluator, cls: tuple, zero: int, shard: int | None = None) -> float:
    tp, pp, dp, vpp, mb, sched, sp, rc, ep, cp = cls
    floors = MemoryFloor(ev, True, RELIEF_REACH)
    states = floors.states_bytes(tp, pp, dp, ep, cp, sched, vpp, [(zero, DpVariant(shard, False))], False)
    over = floors.exceeds(cls, states, False, 0.0)  # a zero budget: every floor exceeds it
    assert over is not None
    return over[0]


def test_floor_is_the_first_rank_s_memory_when_nothing_is_left_out():
    """A dense model of one block kind, 1F1B, no offload, Megatron (no DP buckets): the floor is
    rank 0's priced memory itself (to the 1e-12 shave)."""
    ev = Evaluator(load_model("llama-3-8b"), LONG, A100)
    cls = (2, 4, 1, 1, 1, "1f1b", True, "selective", 1, 1)
    point = PlanPoint(2, 4, 1, 1, 1, "1f1b", True, "selective", 1)
    first, _, _ = ev.memories(point)
    assert first.stage == 0
    assert _floor(ev, cls, zero=1) == pytest.approx(first.total, rel=1e-9)


@pytest.mark.parametrize("model, schedule, vpp", [
    ("llama-3-8b", "1f1b", 1),
    ("llama-3-8b", "interleaved", 2),
    ("deepseek-v2-lite", "1f1b", 1),  # 27 blocks, a dense first block: uneven, two kinds
    ("deepseek-v2-lite", "interleaved", 3),
    ("jamba-v0.1", "interleaved", 2),  # Mamba and attention blocks, MoE every second
])
def test_floor_never_exceeds_the_peak_under_any_split_or_zero(model, schedule, vpp):
    """For every micro-batch, recompute and ZeRO stage, the floor is at most the peak the search
    prices under each stage split it tries (`split_candidates`) that can matter: the fastest,
    and the relief splits when the fastest is within RELIEF_REACH of the budget."""
    spec = load_model(model)
    ev = Evaluator(spec, LONG, A100)
    tp, pp, dp, ep = 2, 4, 1, 1
    checked = 0
    for mb in (1, 2):
        for rc in ("none", "selective", "full"):
            for zero in (0, 1, 2, 3):
                cls = (tp, pp, dp, vpp, mb, schedule, True, rc, ep, 1)
                floor = _floor(ev, cls, zero)
                splits = ev.split_candidates(tp, True, mb, rc, pp, ep, 1, schedule, vpp)
                for split in splits[:1]:
                    point = PlanPoint(tp, pp, dp, vpp, mb, schedule, True, rc, zero, ep, 1, split=split)
                    first, last = ev.memory(point)
                    assert floor <= max(first.total, last.total)
                    checked += 1
    assert checked == 24


@pytest.mark.parametrize("model, gpus, training, cluster, space", [
    ("llama-3-8b", 8, LONG, A100, None),
    ("llama-3-8b", 16, LONG, H100, SearchSpace(schedule=["1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe"])),
    ("deepseek-v2-lite", 8, TrainingSpec(global_batch=32, seq_len=16384), A100, None),
    ("jamba-v0.1", 16, TrainingSpec(global_batch=32, seq_len=8192), A100, SearchSpace(offload_optimizer=["none"])),
])
def test_search_ranks_the_same_plans_with_and_without_the_floor(model, gpus, training, cluster, space):
    """The floor only drops plans that cannot fit: the top plans and their numbers are those of
    the search without it."""
    spec = load_model(model)
    args = (spec, training, cluster, gpus, space, None, 5, True)
    with_floor, without = search_family_plans(*args, floors=True), search_family_plans(*args, floors=False)
    assert [e.model_dump() for e in with_floor.best] == [e.model_dump() for e in without.best]
    assert with_floor.candidates == without.candidates
    assert with_floor.rejected["out of memory"] > without.rejected.get("out of memory", 0)


def test_no_plan_fits_names_the_same_nearest_blocker():
    """When nothing fits, the error is the one the search without the floor gives (it is run
    again without it, for the exact smallest need)."""
    spec, training = load_model("llama-3-70b"), TrainingSpec(global_batch=16, seq_len=32768)
    space = SearchSpace(cp=[1], recompute=["none"], offload_activations=[False], offload_optimizer=["none"])
    with pytest.raises(PlanInfeasible) as without:
        search_family_plans(spec, training, H100, 16, space, None, 5, True, floors=False)
    with pytest.raises(PlanInfeasible) as searched:
        search_plans(spec, training, H100, 16, space)
    assert str(searched.value) == str(without.value)
    assert "the smallest needs" in str(searched.value)
