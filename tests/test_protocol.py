"""`plan/protocol.py`: one evaluator protocol for every family, one estimate entry, and the plain
search over it alone (`search_family_plans`). Expected values: the bounded transformer search
explores a superset of the protocol search's plans (every sp / recompute / overlap variant besides the defaults), so its best
step can only be as fast or faster; a search's plan priced again through `estimate_plan` gives
the same step (the same evaluator behind both entries)."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.protocol import PlanEvaluator
from modelplan.plan.search import search_family_plans, search_plans
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
    plain = search_family_plans(spec, training, H100, 8, top_k=1)
    bounded = search_plans(spec, training, H100, 8, top_k=1)
    assert plain.best and plain.best[0].fits
    assert bounded.best[0].step.step_time_s <= plain.best[0].step.step_time_s * (1 + 1e-12)


@pytest.mark.parametrize("name", ["lstm-lm", "gpt2"])
def test_a_searched_plan_priced_again_is_the_same(name):
    """The plain search's best plan, estimated through `estimate_plan`, has the same step time."""
    spec, training = load_model(name), TrainingSpec(global_batch=64, seq_len=1024)
    best = search_family_plans(spec, training, H100, 4, top_k=1).best[0]
    again = estimate_plan(spec, training, best.plan, H100, world_size=4)
    assert again.step.step_time_s == pytest.approx(best.step.step_time_s, rel=1e-12)
    assert again.throughput_unit == family_of(spec).throughput_unit
