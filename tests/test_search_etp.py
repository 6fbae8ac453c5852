"""The search under an expert tensor-parallel size (`SearchSpace.etp`, `plan/etp_search.py`): its
step-time and memory floors stay below what it prices (the same plans as an exhaustive search),
each plan it ranks is what `estimate_plan` gives for that plan, and a list of sizes is the merge
of one search per size."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.search import SearchSpace, search_family_plans, search_plans
from modelplan.specs.load import load_model
from modelplan.specs.training import TrainingSpec

MIXTRAL = load_model("mixtral-8x7b")
TRAIN = TrainingSpec(global_batch=64, seq_len=2048, precision="bf16")
H100 = load_cluster("dgx-h100")
NARROW = dict(pp=[1, 2], zero=[1, 3], micro_batch=[1, 2], recompute=["selective", "full"], tp_overlap=["none"],
              dp_overlap=[True], offload_optimizer=["none"], offload_activations=[False], fsdp_shard_size=[],
              zeropp=[False], rank_order=["tp-cp-dp-pp"])


def _key(est):
    return est.plan.model_dump_json(), round(est.step.step_time_s, 12)


@pytest.mark.parametrize("etp", [1, 2])
def test_bounded_search_keeps_the_exhaustive_top_plans(etp):
    """Floors on (pruning) and off (every plan priced, `use_bound=False`) rank the same plans."""
    space = SearchSpace(tp=[2, 4], etp=[etp], **NARROW)
    fast = search_family_plans(MIXTRAL, TRAIN, H100, 32, space, top_k=5)
    full = search_family_plans(MIXTRAL, TRAIN, H100, 32, space, top_k=5, use_bound=False)
    assert [_key(e) for e in fast.best] == [_key(e) for e in full.best]
    assert all(e.plan.etp == etp for e in fast.best)


def test_ranked_plans_are_priced_as_estimate_plan_prices_them():
    """The search's figure for each plan under etp 1 is the one-plan estimate's."""
    space = SearchSpace(tp=[2], etp=[1], **NARROW)
    for est in search_plans(MIXTRAL, TRAIN, H100, 32, space, top_k=3).best:
        alone = estimate_plan(MIXTRAL, TRAIN, est.plan, H100, world_size=32)
        assert alone.step.step_time_s == pytest.approx(est.step.step_time_s, rel=1e-12)
        assert alone.peak_memory_bytes == pytest.approx(est.peak_memory_bytes, rel=1e-12)


def test_a_list_is_the_merge_of_one_search_per_size():
    """etp [tp, 1]: the fastest plan is the faster of the two single searches' best."""
    base = dict(tp=[2], **NARROW)
    both = search_plans(MIXTRAL, TRAIN, H100, 32, SearchSpace(etp=["tp", 1], **base), top_k=3)
    each = [search_plans(MIXTRAL, TRAIN, H100, 32, SearchSpace(etp=[e], **base), top_k=3).best[0]
            for e in ("tp", 1)]
    assert both.best[0].step.step_time_s == min(e.step.step_time_s for e in each)


def test_default_is_megatron_cores_etp():
    """No etp named: the experts split over tp (Megatron-core's default), every plan etp None."""
    space = SearchSpace(tp=[2], **NARROW)
    assert {e.plan.etp for e in search_plans(MIXTRAL, TRAIN, H100, 32, space, top_k=20).best} == {None}
