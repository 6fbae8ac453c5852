"""DualPipe (DeepSeek-AI 2024, DeepSeek-V3 Technical Report, sec. 3.2.1 and table 2;
deepseek-ai/DualPipe) against the report's own bubble, parameter and activation figures, planned
and verified like 1F1B."""

from __future__ import annotations

import pytest

from modelplan.comm.ops import Axis, Collective
from modelplan.execute.verify import verify
from modelplan.plan.commlist import communication_list
from modelplan.plan.pipeline import ActionKind, pipeline_schedule, schedule_problem
from modelplan.plan.pipeline.profile import held_peak, simulate
from modelplan.plan.shard import rank_elements
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

F, B, W = ActionKind.F, ActionKind.B, ActionKind.W


def idle(pp: int, m: int, t_f: float, t_b: float, t_w: float) -> float:
    timeline = simulate(pipeline_schedule("dualpipe", pp, m), t_f, t_b, t_w)
    return timeline.makespan - max(timeline.busy(r) for r in range(pp))


def paper_bubble(pp: int, t_f: float, t_b: float, t_w: float) -> float:
    """Table 2: (PP/2 - 1)(F&B + B - 3W), B the full backward (t_b + t_w), F&B = F + B on a clock
    where the overlapped pair's compute adds up."""
    full = t_b + t_w
    return (pp / 2 - 1) * ((t_f + full) + full - 3 * t_w)


@pytest.mark.parametrize("pp", [2, 4, 6, 8, 16])
@pytest.mark.parametrize("t_f,t_b,t_w", [(1.0, 1.0, 1.0), (2.0, 2.0, 1.0), (1.0, 1.0, 0.5)])
def test_bubble_is_the_reports(pp, t_f, t_b, t_w):
    """The busiest rank idles (PP/2 - 1)(F&B + B - 3W) (DeepSeek-V3 report, table 2), for 2 pp and
    5 pp micro-batches."""
    for m in (2 * pp, 6 * pp):
        assert idle(pp, m, t_f, t_b, t_w) == pytest.approx(paper_bubble(pp, t_f, t_b, t_w))


@pytest.mark.parametrize("pp", [4, 8, 16])
def test_middle_ranks_first_pair_runs_apart_and_can_only_help(pp):
    """The reference does not overlap the middle ranks' first F&B pair ("to further reduce bubble
    size"): with backwards longer than forwards the bubble is one forward below table 2's."""
    assert idle(pp, 4 * pp, 1.0, 2.0, 1.0) == pytest.approx(paper_bubble(pp, 1.0, 2.0, 1.0) - 1.0)


@pytest.mark.parametrize("pp,m", [(2, 4), (4, 8), (8, 16), (8, 40)])
def test_activations_are_pp_plus_1(pp, m):
    """Every rank holds PP + 1 stage activations at its peak (report, table 2: PP + 1, against
    1F1B's PP)."""
    assert [held_peak(a) for a in pipeline_schedule("dualpipe", pp, m).actions] == [pp + 1] * pp
    assert max(held_peak(a) for a in pipeline_schedule("1f1b", pp, m).actions) == pp


def test_parameters_are_twice_1f1b():
    """Two copies of every stage (report, table 2: parameters 2x): summed over the pipeline, an
    untied model's held weights are twice 1F1B's, and every unit's gradient is all-reduced between
    the two ranks that hold it (rank r and pp - 1 - r)."""
    spec, training = load_model("llama-3-8b"), TrainingSpec(global_batch=16, seq_len=8)
    held = {s: sum(e.weights for e in rank_elements(spec, Plan(pp=4, schedule=s), training)) for s in ("1f1b", "dualpipe")}
    assert held["dualpipe"] == 2 * held["1f1b"]
    items = communication_list(spec, training, Plan(pp=4, schedule="dualpipe"))
    pairs = [i for i in items if i.label == "pp/replica-grads"]
    assert pairs and all(i.op is Collective.ALL_REDUCE and i.axis is Axis.PP and i.group_size == 2 for i in pairs)
    assert {r for i in pairs for r in i.pp_ranks} == {0, 1, 2, 3}


def test_micro_batches_enter_from_both_ends():
    """The first half of the micro-batches starts at rank 0 (chunk 0, stage 0), the second half at
    rank pp - 1 (chunk 1, which holds stage 0 there); each rank's chunk runs half of them."""
    sched = pipeline_schedule("dualpipe", 4, 8)
    assert sched.layout.rank_stages == ((0, 3), (1, 2), (2, 1), (3, 0))
    assert sched.where(0, 0) == (0, 0) and sched.where(7, 0) == (3, 1)
    assert all(sched.microbatches(r, c) == 4 for r in range(4) for c in range(2))


def test_needs_an_even_pipeline_and_enough_microbatches():
    """deepseek-ai/DualPipe asserts an even number of ranks and an even m >= 2 pp."""
    assert schedule_problem("dualpipe", 3, 12, 1) is not None
    assert schedule_problem("dualpipe", 4, 6, 1) is not None
    assert schedule_problem("dualpipe", 4, 9, 1) is not None
    assert schedule_problem("dualpipe", 4, 8, 1) is None


@pytest.mark.parametrize("model,plan", [
    ("llama-3-8b", Plan(pp=4, schedule="dualpipe")),
    ("gpt2", Plan(dp=2, tp=2, pp=2, zero=1, schedule="dualpipe")),  # tied: embedding and head on both ends
    ("mlp", Plan(pp=2, schedule="dualpipe")),
])
def test_dualpipe_verifies(model, plan):
    """Both directions, the F&B pairs, B / W and the copies' gradient AllReduce: every check passes."""
    training = TrainingSpec(global_batch=plan.dp * 8, seq_len=8)
    report = verify(load_model(model), training, plan)
    assert report.passed, [(r.name, r.detail) for r in report.rows if not r.passed]
