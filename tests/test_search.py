"""Plan search (modelplan.plan.search): enumeration, pruning, ranking, impossible requests."""

from __future__ import annotations

import math

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.count.params import count_params
from modelplan.errors import PlanInfeasible, SpecError
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.search import IntRange, SearchSpace, search_plans
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec

A100 = load_cluster("dgx-a100")
GPT2 = load_model("gpt2")
TRAIN = TrainingSpec(global_batch=64, seq_len=1024)


def test_every_field_fixed_evaluates_that_one_plan():
    """Fixing tp, pp, dp, vpp, micro-batch, schedule, SP, recompute, ZeRO, the overlap, offload
    and placement choices and the stage split (search_split off: the default split) leaves one
    candidate."""
    space = SearchSpace(tp=[2], pp=[2], dp=[4], vpp=[2], micro_batch=[2], schedule=["interleaved"],
                        sequence_parallel=[True], recompute=["selective"], zero=[1], tp_overlap=["none"],
                        dp_overlap=[True], offload_optimizer=["none"], offload_activations=[False],
                        rank_order=["tp-cp-dp-pp"], search_split=False)
    result = search_plans(GPT2, TRAIN, A100, 16, space)
    want = Plan(dp=4, tp=2, pp=2, vpp=2, micro_batch=2, schedule="interleaved", sequence_parallel=True,
                recompute="selective", zero=1, tp_overlap="none", dp_overlap=True)
    assert [e.plan for e in result.best] == [want]
    assert result.evaluated == 1 and result.candidates == 1


def test_fixed_plan_matches_estimate_plan():
    """The search and estimate_plan price a plan identically (one evaluator)."""
    plan = Plan(dp=8, micro_batch=4, recompute="none", zero=0)
    space = SearchSpace(tp=[1], pp=[1], micro_batch=[4], recompute=["none"], zero=[0], sequence_parallel=[False])
    found = search_plans(GPT2, TRAIN, A100, 8, space).best[0]
    assert found.step.step_time_s == pytest.approx(estimate_plan(GPT2, TRAIN, plan, A100).step.step_time_s)


def test_best_is_at_least_as_fast_as_any_given_plan():
    """The full search's winner is no slower than a hand-picked valid plan of the same GPUs."""
    best = search_plans(GPT2, TRAIN, A100, 8).best[0]
    hand = estimate_plan(GPT2, TRAIN, Plan(dp=2, tp=4, micro_batch=1, recompute="full"), A100)
    assert best.step.step_time_s <= hand.step.step_time_s


def test_ranked_fastest_first():
    """Top-k is sorted by predicted step time."""
    times = [e.step.step_time_s for e in search_plans(GPT2, TRAIN, A100, 8, top_k=5).best]
    assert times == sorted(times) and len(times) == 5


def test_ranges_restrict_the_search():
    """--pp 2..4 keeps every returned plan's pp within 2..4."""
    result = search_plans(GPT2, TRAIN, A100, 16, SearchSpace(pp=IntRange(lo=2, hi=4)), top_k=10)
    assert all(2 <= e.plan.pp <= 4 for e in result.best)


def test_rejections_are_counted_by_reason():
    """tp 5 does not divide GPT-2's 12 heads: its plans are counted under 'tp vs heads'."""
    training = TrainingSpec(global_batch=80, seq_len=1024)
    result = search_plans(GPT2, training, A100, 40, SearchSpace(tp=[1, 5], pp=[1], micro_batch=[1]))
    assert result.rejected["tp vs heads"] > 0
    assert "tp (5) must divide heads (12)" in result.examples["tp vs heads"]
    assert all(e.plan.tp == 1 for e in result.best)


def test_too_few_gpus_names_the_minimum():
    """GPT-3 175B: 18 bytes x P of model states over the A100 80GB's 81,920 MiB of device memory
    (NVML, Modal's table) - 1 GB reserved (model states are contiguous buffers: no fragmentation
    allowance)."""
    spec = load_model("gpt3-175b")
    params = count_params(spec).total
    need = math.ceil(18 * params / (81920 * 2**20 - 1e9))
    with pytest.raises(PlanInfeasible) as exc:
        search_plans(spec, TrainingSpec(global_batch=64, seq_len=2048), A100, 8)
    assert str(exc.value).startswith(f"needs at least {need} GPUs of 80 GB: weights+gradients+optimizer states")


def test_unfactorable_gpu_count_is_one_line():
    """13 GPUs: tp 13 breaks 12 heads, pp 13 exceeds 12 layers, dp 13 breaks a batch of 64."""
    with pytest.raises(PlanInfeasible) as exc:
        search_plans(GPT2, TRAIN, A100, 13)
    assert str(exc.value).startswith("no valid plan of 13 GPUs: ") and "\n" not in str(exc.value)


def test_network_specs_are_planned():
    """MLP/CNN/RNN specs are planned since issue 8 (details in tests/test_net_plan.py)."""
    result = search_plans(load_model("mlp"), TRAIN, A100, 8)
    assert result.best and result.best[0].plan.world_size == 8


def test_moe_models_are_planned():
    """MoE specs are planned (details in tests/test_plan_moe.py): every ranked plan's ep divides
    both dp and the 8 experts."""
    moe = GPT2.model_copy(update={"moe": MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=3072)})
    result = search_plans(moe, TRAIN, A100, 8, top_k=5)
    assert result.best and all(e.plan.dp % e.plan.ep == 0 and 8 % e.plan.ep == 0 for e in result.best)


def test_searched_split_lightens_the_last_stage_behind_a_large_head():
    """GPT-2 on pp 4 (12 blocks, 3 per stage by default): its output layer (50257 x 768 per
    token) outweighs a block (12 h^2), so the search takes blocks off the last stage; the plan
    names the split, the slowest stage is faster than with the default split, and the estimate
    of that plan reproduces the searched step time."""
    from modelplan.plan.estimate import estimate_plan

    space = SearchSpace(tp=[1], pp=[4], dp=[4], micro_batch=[2], schedule=["1f1b"], recompute=["none"],
                        zero=[0], sequence_parallel=[False])
    best = search_plans(GPT2, TRAIN, A100, 16, space).best[0]
    assert best.plan.last_stage_layers is not None and best.plan.last_stage_layers < 3
    even = estimate_plan(GPT2, TRAIN, best.plan.model_copy(update={"last_stage_layers": None}), A100, world_size=16)
    assert best.step.step_time_s < even.step.step_time_s
    again = estimate_plan(GPT2, TRAIN, best.plan, A100, world_size=16)
    assert again.step.step_time_s == pytest.approx(best.step.step_time_s)


def test_one_search_loop_for_every_family():
    """Issue 12 item 3 (one search): the candidate walk (`candidates.walk`), the bounded loop
    (`Ranking.best_first`) and a `Ranking` are called in one function of the package,
    `search.search_family_plans`, which runs every family's search program; a second search
    loop would have to call one of them elsewhere."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "modelplan"
    sites = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text())
        walks = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 and n.module == "modelplan.plan.candidates" for a in n.names if a.name == "walk"}
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for call in ast.walk(fn):
                if not isinstance(call, ast.Call):
                    continue
                f = call.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if (name in walks and isinstance(f, ast.Name)) or name in ("best_first", "Ranking") or (
                        isinstance(f, ast.Attribute) and name == "walk" and getattr(f.value, "id", "") == "candidates"):
                    sites.add((path.relative_to(package).as_posix(), fn.name, name))
    assert sites == {("plan/search.py", "search_family_plans", n) for n in ("walk", "best_first", "Ranking")}, sites
