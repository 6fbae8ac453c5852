"""The search over cp_comm_type (`plan/cp_search.py`): a run that names no exchange gets every
cp > 1 plan priced under each exchange its engine runs (presets/frameworks: Megatron-LM
`--cp-comm-type` p2p | all_gather | a2a; torchtitan / PyTorch rotate methods allgather |
alltoall; DeepSpeed Ulysses only) and keeps the cheapest. The expected choice comes from
`estimate_plan` of the same plan under each fixed type, not from the search.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.plan.cp_search import cp_only, searched_cp_types
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.search import SearchSpace, search_plans, search_transformer_plans
from modelplan.plan.space import IntRange
from modelplan.specs.training import TrainingSpec
from test_plan_cp import gpt, ideal_cluster

LONG = TrainingSpec(global_batch=8, seq_len=32768)


@pytest.mark.parametrize("framework, types", [
    ("megatron", ("p2p", "all_gather", "a2a")),  # Megatron's default p2p first
    ("torchtitan", ("all_gather", "p2p")),
    ("deepspeed", ("a2a",)),  # Ulysses only
])
def test_each_engine_searches_the_types_it_runs(framework, types):
    assert searched_cp_types(LONG.model_copy(update={"framework": framework}), None, 8) == types


def test_one_type_when_fixed_short_or_cp_one():
    """The run's own type, a sequence below LONG_SEQUENCE (cp not searched), or --cp 1."""
    assert searched_cp_types(LONG.model_copy(update={"cp_comm_type": "a2a"}), None, 8) == ("a2a",)
    assert searched_cp_types(LONG.model_copy(update={"seq_len": 4096}), None, 8) == ("p2p",)
    assert searched_cp_types(LONG, SearchSpace(cp=[1]), 8) == ("p2p",)
    assert len(searched_cp_types(LONG.model_copy(update={"seq_len": 4096}), SearchSpace(cp=[1, 2]), 8)) == 3


def test_each_cp_plan_gets_its_cheapest_type():
    """Every ranked cp > 1 plan names the type whose fixed-type estimate is the fastest, with that
    estimate's step time, and says so in a note; cp 1 plans name none."""
    spec = gpt()
    result = search_plans(spec, LONG, ideal_cluster(), 8, SearchSpace(cp=[1, 2, 4]), top_k=6)
    assert any(e.plan.cp > 1 for e in result.best)
    for est in result.best:
        if est.plan.cp == 1:
            assert est.cp_comm_type is None
            continue
        fixed = {}
        for kind in ("p2p", "all_gather", "a2a"):
            one = estimate_plan(spec, LONG.model_copy(update={"cp_comm_type": kind}), est.plan, ideal_cluster())
            if one.fits:
                fixed[kind] = one.step.step_time_s
        cheapest = min(fixed, key=fixed.get)
        assert est.cp_comm_type == cheapest
        assert est.step.step_time_s == pytest.approx(fixed[cheapest], rel=1e-12)
        assert any(n.startswith(f"cp_comm_type {cheapest}: the cheapest") for n in est.notes)
    times = [e.step.step_time_s for e in result.best]
    assert times == sorted(times)
    assert len({e.plan.model_dump_json() for e in result.best}) == len(result.best)  # each plan once


def test_a_fixed_type_is_not_searched():
    """--cp-comm-type a2a: every cp plan is priced as a2a only, no choice shown."""
    result = search_plans(gpt(), LONG.model_copy(update={"cp_comm_type": "a2a"}), ideal_cluster(), 8,
                          SearchSpace(cp=[2]), top_k=3)
    assert all(e.cp_comm_type is None and not any("the cheapest context-parallel" in n for n in e.notes)
               for e in result.best)


def test_plan_document_records_the_chosen_type(tmp_path):
    """`plan -o` writes the searched type into the document's training (the export then uses it)."""
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(app, ["plan", "llama-3-8b", "--gpus", "64", "--cluster", "dgx-h100", "--seq",
                                      "65536", "--batch", "64", "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["plan"]["cp"] > 1 and doc["training"]["cp_comm_type"] in ("p2p", "all_gather", "a2a")
    assert f"cp_comm_type {doc['training']['cp_comm_type']}: the cheapest" in result.output


def test_other_types_search_cp_above_one_only():
    """`cp_only`: the user's cp values above 1 (a range from 2), by default every divisor of the
    GPU count above 1 that divides seq_len (8 GPUs, seq 32768: 2, 4, 8); None without any."""
    assert cp_only(LONG, None, 8).cp == [2, 4, 8]
    assert cp_only(LONG.model_copy(update={"seq_len": 6000}), None, 8).cp == [2, 4, 8]  # 6000 = 2^4 x 375
    assert cp_only(LONG.model_copy(update={"seq_len": 32766}), None, 8).cp == [2]  # 32766 = 2 x 16383
    assert cp_only(LONG, SearchSpace(cp=[1, 2, 4]), 8).cp == [2, 4]
    assert cp_only(LONG, SearchSpace(cp=IntRange(lo=1, hi=4)), 8).cp == IntRange(lo=2, hi=4)
    assert cp_only(LONG, SearchSpace(cp=[1]), 8) is None


def test_searching_cp_above_one_keeps_the_whole_space_s_plans():
    """The merged top-k equals that of searching the whole space under every exchange and keeping
    each plan's cheapest (the rule stated in `cp_search.py`, applied here by hand)."""
    spec, cluster, space = gpt(), ideal_cluster(), SearchSpace(cp=[1, 2, 4])
    result = search_plans(spec, LONG, cluster, 8, space, top_k=6)
    cheapest: dict[str, float] = {}
    for kind in ("p2p", "all_gather", "a2a"):
        whole = search_transformer_plans(spec, LONG.model_copy(update={"cp_comm_type": kind}), cluster, 8, space,
                                         top_k=6)
        for est in whole.best:
            if est.plan.cp == 1 and kind != "p2p":
                continue  # the default's search has every cp 1 plan
            key = est.plan.model_dump_json()
            cheapest[key] = min(cheapest.get(key, float("inf")), est.step.step_time_s)
    want = sorted(cheapest.items(), key=lambda kv: kv[1])[:6]
    assert [(e.plan.model_dump_json(), e.step.step_time_s) for e in result.best] == want
