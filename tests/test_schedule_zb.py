"""Zero-bubble schedules (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR 2024) against
the paper's own formulas, planned and verified like 1F1B."""

from __future__ import annotations

import pytest

from modelplan.execute.verify import verify
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.pipeline import ActionKind, pipeline_schedule
from modelplan.plan.pipeline.profile import held_peak, simulate
from modelplan.comm.clusters import load_cluster
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

F, B, W = ActionKind.F, ActionKind.B, ActionKind.W


def idle(kind: str, pp: int, m: int, t_f=1.0, t_b=1.0, t_w=1.0) -> float:
    """Idle time of the busiest rank on the schedule's own clock."""
    timeline = simulate(pipeline_schedule(kind, pp, m), t_f, t_b, t_w)
    return timeline.makespan - max(timeline.busy(r) for r in range(pp))


@pytest.mark.parametrize("pp", [2, 3, 4, 8])
@pytest.mark.parametrize("t_f,t_b,t_w", [(1.0, 1.0, 1.0), (1.0, 1.0, 0.5), (2.0, 2.0, 1.0), (1.0, 2.0, 1.0)])
def test_zb_h1_bubble_is_the_papers(pp, t_f, t_b, t_w):
    """ZB-H1 idles (p-1)(T_F + T_B - T_W) (Qi et al. 2024, Table 2), 1F1B (p-1)(T_F + T_B + T_W),
    for m = 3 pp micro-batches and weight gradients no longer than forwards (the delayed W fit)."""
    m = 3 * pp
    assert idle("zb-h1", pp, m, t_f, t_b, t_w) == pytest.approx((pp - 1) * (t_f + t_b - t_w))
    assert idle("1f1b", pp, m, t_f, t_b, t_w) == pytest.approx((pp - 1) * (t_f + t_b + t_w))


@pytest.mark.parametrize("pp,m", [(4, 4), (4, 12), (8, 8), (8, 24)])
def test_zb_h1_holds_pp_microbatches_like_1f1b(pp, m):
    """Every ZB-H1 rank holds at most p micro-batches from F to W, 1F1B's first-stage peak
    (Qi et al. 2024, Table 2: peak memory p M_B for both)."""
    zb, base = pipeline_schedule("zb-h1", pp, m).actions, pipeline_schedule("1f1b", pp, m).actions
    assert [held_peak(a) for a in zb] == [pp] * pp
    assert max(held_peak(a) for a in base) == pp


def test_zb_h1_bubble_rate_is_a_third_of_1f1b():
    """With T_F = T_B = T_W the bubble rate is (p-1)/(3m), a third of 1F1B's (p-1)/m (sail-sg's
    zero-bubble README: ZB1P bubble rate (p-1)/3m)."""
    pp, m = 4, 16
    t = simulate(pipeline_schedule("zb-h1", pp, m))
    assert t.bubble_fraction() == pytest.approx((pp - 1) / (3 * m))


def test_zb_h1_runs_each_w_after_its_b_delayed_by_the_rank():
    """Rank r's first W follows its (r+1)-th B: the last rank defers 3 W on pp 4 (paper, fig. 3)."""
    actions = pipeline_schedule("zb-h1", 4, 8).actions
    for r, acts in enumerate(actions):
        kinds = [a.kind for a in acts]
        assert sorted((a.kind, a.microbatch) for a in acts) == sorted((k, i) for k in (F, B, W) for i in range(8))
        first_w = kinds.index(W)
        assert kinds[:first_w].count(B) == r + 1
        for a in acts:
            if a.kind is W:
                assert acts.index(a) > acts.index(a._replace(kind=B))


def test_zb_h1_plan_has_a_third_of_the_1f1b_bubble():
    """Same split, same stage times: the planner's ZB-H1 bubble is 1F1B's (p-1) t / 3, and its first
    stage holds the same p micro-batches (its later stages hold p too, where 1F1B's hold p - r)."""
    spec, training = load_model("llama-3-8b"), TrainingSpec(global_batch=64, seq_len=2048)
    cluster = load_cluster("dgx-h100")
    est = {s: estimate_plan(spec, training, Plan(tp=2, pp=4, dp=2, micro_batch=1, schedule=s), cluster)
           for s in ("1f1b", "zb-h1")}
    assert est["zb-h1"].step.bubble_s == pytest.approx(est["1f1b"].step.bubble_s / 3)
    assert est["zb-h1"].memory[0].activations == est["1f1b"].memory[0].activations
    assert est["zb-h1"].memory[-1].activations > est["1f1b"].memory[-1].activations


@pytest.mark.parametrize("model,plan", [
    ("llama-3-8b", Plan(pp=4, schedule="zb-h1")),
    ("gpt2", Plan(dp=2, tp=2, pp=2, zero=2, schedule="zb-h1")),
    ("mlp", Plan(pp=2, schedule="zb-h1")),
])
def test_zb_h1_verifies(model, plan):
    """The executor runs ZB-H1's B and W: loss, gradients, ledger, held state, order and bubble pass."""
    training = TrainingSpec(global_batch=plan.dp * 8, seq_len=8)
    report = verify(load_model(model), training, plan)
    assert report.passed, [(r.name, r.detail) for r in report.rows if not r.passed]
    assert any(r.name == "bubble fraction" and r.expected > 0 for r in report.rows)


@pytest.mark.parametrize("pp,m", [(2, 4), (4, 8), (4, 13), (6, 12), (8, 32)])
def test_zb_v_ranks_never_wait_once_started(pp, m):
    """ZB-V with T_F = T_B = T_W and m >= 2p: every rank runs its 6 m chunk actions without a gap
    from its first to its last (Qi et al. 2024, sec. 6: zero bubble; sail-sg's README: bubble rate
    0, measured per stage as 1 - (F+B+W) m / stage time); the pipeline's makespan adds only the
    p - 1 chunk forwards by which rank r starts after rank 0."""
    t = simulate(pipeline_schedule("zb-v", pp, m))
    for r in range(pp):
        assert t.ends[r][-1] - t.starts[r][0] == pytest.approx(t.busy(r)) == pytest.approx(6 * m)
    assert t.makespan - t.busy(0) == pytest.approx(pp - 1)


@pytest.mark.parametrize("pp,m", [(2, 4), (4, 8), (8, 16)])
def test_zb_v_holds_what_1f1b_holds(pp, m):
    """Peak activations: 2 p chunk activations (half a rank's layers each) = p micro-batches, 1F1B's
    first-stage peak p M_B (Qi et al. 2024, sec. 6; sail-sg README: activation memory 1x)."""
    assert [held_peak(a) for a in pipeline_schedule("zb-v", pp, m).actions] == [2 * pp] * pp


@pytest.mark.parametrize("pp,m", [(2, 4), (4, 8)])
def test_zb_v_doubles_the_pipeline_messages(pp, m):
    """Two chunks per rank and a local turn at rank p - 1: 2 m (2p - 2) boundary messages against
    1F1B's 2 m (p - 1) (sail-sg README: pipeline communication volume 2x)."""
    def sends(kind):
        return sum(1 for acts in pipeline_schedule(kind, pp, m).lowered for a in acts if a.kind.value.startswith("SEND"))
    assert sends("zb-v") == 2 * m * (2 * pp - 2) == 2 * sends("1f1b")


def test_zb_v_puts_the_first_and_last_stage_on_rank_0():
    """The V: rank r holds stages r and 2p - 1 - r; a micro-batch turns at rank p - 1 without a send."""
    sched = pipeline_schedule("zb-v", 4, 8)
    assert sched.layout.rank_stages == ((0, 7), (1, 6), (2, 5), (3, 4))
    assert not any(a.kind.value.startswith("SEND") and a.peer == 3 for a in sched.lowered[3])


@pytest.mark.parametrize("model,plan", [
    ("llama-3-8b", Plan(pp=4, schedule="zb-v")),
    ("gpt2", Plan(dp=2, tp=2, pp=2, zero=3, schedule="zb-v")),  # tied head on rank 0 with the embedding
    ("resnet-18", Plan(pp=2, schedule="zb-v")),
])
def test_zb_v_verifies(model, plan):
    """The executor runs ZB-V's two chunks per rank, the turn and B / W: every check passes."""
    training = TrainingSpec(global_batch=plan.dp * 8, seq_len=8)
    report = verify(load_model(model), training, plan)
    assert report.passed, [(r.name, r.detail) for r in report.rows if not r.passed]
