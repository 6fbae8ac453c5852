"""`plan/protocol.py`: one evaluator protocol for every family, one estimate entry, and the plain
search's program over it alone (`protocol_search`, run by `search_family_plans`). Expected values: the bounded transformer search
explores a superset of the protocol search's plans (every sp / recompute / overlap variant besides the defaults), so its best
step can only be as fast or faster; a search's plan priced again through `estimate_plan` gives
the same step (the same evaluator behind both entries)."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.plan.estimate import estimate_plan
from modelplan.specs.plan import Plan
from modelplan.plan.protocol import PlanEvaluator
from modelplan.plan.search import protocol_search, search_family_plans, search_plans
from modelplan.specs.family import family_of
from modelplan.specs.load import load_model
from modelplan.specs.training import TrainingSpec

H100 = load_cluster("dgx-h100")


@pytest.mark.parametrize("name", ["mlp", "resnet-18", "gpt2"])
def test_every_family_evaluator_implements_the_protocol(name):
    """The registry's evaluator of a network and of a transformer is a `PlanEvaluator`."""
    spec = load_model(name)
    ev = family_of(spec).call("evaluator", spec, TrainingSpec(global_batch=8, seq_len=128), H100, None)
    assert isinstance(ev, PlanEvaluator)
    assert ev.units >= 1


def test_plain_search_of_a_transformer_never_beats_the_bounded_one():
    """GPT-2 small on 8 H100s (batch 64, seq 1024): the plain search over the shared candidates
    finds a fitting plan; the bounded search's best is at most as slow."""
    spec, training = load_model("gpt2"), TrainingSpec(global_batch=64, seq_len=1024)
    plain = search_family_plans(spec, training, H100, 8, top_k=1, program=protocol_search)
    bounded = search_plans(spec, training, H100, 8, top_k=1)
    assert plain.best and plain.best[0].fits
    assert bounded.best[0].step.step_time_s <= plain.best[0].step.step_time_s * (1 + 1e-12)


@pytest.mark.parametrize("name", ["lstm-lm", "gpt2"])
def test_a_searched_plan_priced_again_is_the_same(name):
    """The plain search's best plan, estimated through `estimate_plan`, has the same step time."""
    spec, training = load_model(name), TrainingSpec(global_batch=64, seq_len=1024)
    best = search_family_plans(spec, training, H100, 4, top_k=1, program=protocol_search).best[0]
    again = estimate_plan(spec, training, best.plan, H100, world_size=4)
    assert again.step.step_time_s == pytest.approx(best.step.step_time_s, rel=1e-12)
    assert again.throughput_unit == family_of(spec).throughput_unit


def _every_plan_priced(spec, training, gpus):
    """The plans of `candidates.walk` that fit, each priced, in walk order (no bound)."""
    from modelplan.plan.candidates import Candidates, walk
    from modelplan.plan.space import SearchSpace

    ev = family_of(spec).call("evaluator", spec, training, H100, None)
    cands = Candidates(SearchSpace(), gpus, H100.gpus_per_node, training.global_batch, ev.units, ev.max_microbatches)
    plans = [Plan(dp=g.dp, tp=g.tp, pp=g.pp, vpp=vpp, micro_batch=g.micro_batch, schedule=sched, zero=zero)
             for g in walk(ev, cands, lambda problem, at: None) for sched, vpp in g.schedules for zero in cands.zeros]
    priced = [(p, ev.estimate(p)) for p in plans]
    return ev, [(p, e) for p, e in priced if e.fits]


@pytest.mark.parametrize("name,gpus", [("resnet-18", 8), ("lstm-lm", 8), ("mlp", 4)])
def test_a_network_step_floor_never_exceeds_its_step(name, gpus):
    """`step_floor_s` is a lower bound of every candidate's priced step (what lets the search skip it)."""
    spec, training = load_model(name), TrainingSpec(global_batch=256)
    ev, priced = _every_plan_priced(spec, training, gpus)
    assert priced
    for plan, est in priced:
        assert ev.step_floor_s(plan) <= est.step.step_time_s, plan


@pytest.mark.parametrize("name,gpus", [("resnet-18", 8), ("lstm-lm", 8), ("small-cnn", 8)])
def test_the_bounded_network_search_keeps_the_plans_of_pricing_every_one(name, gpus):
    """The bounded search's top 5 (ties to the plan walked first) and its best plan's notes are
    those of pricing every candidate, while it prices fewer."""
    spec, training = load_model(name), TrainingSpec(global_batch=256)
    ev, priced = _every_plan_priced(spec, training, gpus)
    order = sorted(range(len(priced)), key=lambda i: (priced[i][1].step.step_time_s, i))
    res = search_family_plans(spec, training, H100, gpus, top_k=5)
    assert [b.plan for b in res.best] == [priced[i][0] for i in order[:5]]
    best_of = {}
    for i in order:  # the first (fastest) of each axis
        plan, est = priced[i]
        for axis, member in (("tp", plan.tp > 1), ("pp", plan.pp > 1), ("dp", plan.tp == plan.pp == 1)):
            best_of.setdefault(axis, est) if member else None
    best = priced[order[0]][1]
    assert res.best[0].notes == best.notes + ev.search_notes(best, best_of)
    assert res.evaluated < len(priced) and res.bounded > 0
