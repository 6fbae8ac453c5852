"""`plan/candidates.py`: the values every family's search tries per axis, and the one walk over them.
Expected lists are worked by hand from divisors of the GPU count and the batch."""

from __future__ import annotations

from types import SimpleNamespace

from modelplan.plan.candidates import Candidates, FamilyAxes, Subtree, walk
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.space import SearchSpace


def _cands(gpus: int = 16, gpn: int = 8, gb: int = 256, units: int = 24, cap: int | None = None, **space) -> Candidates:
    return Candidates(SearchSpace(**space), gpus, gpn, gb, units, cap)


def test_tp_stays_in_a_node_unless_allowed():
    """16 GPUs, 8 per node: divisors 1, 2, 4, 8 (16 only across nodes); max_tp 4 drops 8."""
    assert _cands().tps == [1, 2, 4, 8]
    assert _cands(allow_tp_across_nodes=True).tps == [1, 2, 4, 8, 16]
    assert _cands(max_tp=4).tps == [1, 2, 4]
    assert _cands().tp_node_problem(16).reason is Reason.TP_NODE
    assert _cands(allow_tp_across_nodes=True).tp_node_problem(16) is None


def test_a_fixed_dp_fixes_pp():
    """16 GPUs, tp 2, dp 4: pp = 16 / (2 * 4) = 2 only; without dp every divisor of 8."""
    assert _cands(dp=[4]).pps(2) == [2]
    assert _cands().pps(2) == [1, 2, 4, 8]
    assert _cands().dps(2, 4) == [2]


def test_micro_batches_divide_the_batch_and_the_ramp_up():
    """Batch 256 over dp 8: 32 samples per rank, micro-batches the divisors of 32; a cap of 8
    micro-batches keeps 4..32; a ramp-up batch of 96 leaves gcd(256, 96) / 8 = 4: 1, 2, 4."""
    assert _cands().microbatches(8) == [1, 2, 4, 8, 16, 32]
    assert _cands(cap=8).microbatches(8) == [4, 8, 16, 32]
    ramp = _cands(batch_splits=[96])
    assert ramp.microbatches(8) == [1, 2, 4]
    assert ramp.batch_problem(8, 8) is not None and "ramp-up batch (96)" in ramp.batch_problem(8, 8).message


def test_schedules_pair_interleaved_with_the_family_vpps():
    """pp 4 with the family's vpps 2 and 3: 1F1B then interleaved x2, x3; pp 1 has no interleaved;
    asking vpp 2 keeps only the vpp-2 pair (1F1B runs vpp 1)."""
    assert _cands().schedules(4, [2, 3]) == [("1f1b", 1), ("interleaved", 2), ("interleaved", 3)]
    assert _cands().schedules(1, [2, 3]) == [("1f1b", 1)]
    assert _cands(vpp=[2]).schedules(4, [2, 3]) == [("interleaved", 2)]


class _Family(FamilyAxes):
    """A family of 2 pipeline units whose tp 2 is invalid, default vpp 2."""

    units = 2

    def tp_problems(self, tp):
        return [Problem(Reason.TP_SPLITS_NOTHING, "tp 2")] if tp == 2 else []

    def stage_problem(self, pp, vpp, num_stages):
        return Problem(Reason.PP_UNITS, f"{num_stages} > 2") if num_stages > self.units else None

    def vpp_default(self, pp):
        return [2]


def _walked(family, cands, prepare=None):
    """(each point of the groups walked, with its schedule and vpp, in order; (message, subtree) of
    each pruned rule, in order)."""
    pruned = []
    groups = list(walk(family, cands, lambda problem, at: pruned.append((problem.message, at)), prepare))
    points = [SimpleNamespace(**g._asdict(), schedule=s, vpp=v) for g in groups for s, v in g.schedules]
    return points, pruned


def test_walk_yields_every_valid_point_and_each_broken_rule_once():
    """4 GPUs (one node), batch 8: tp 2 is the family's problem; pp 4 > 2 units;
    tp 1 pp 1 dp 4 runs micro-batches 1, 2; tp 1 pp 2 dp 2 runs 1, 2, 4 under 1F1B while
    interleaved x2 needs 4 stages > 2 units (3 problems, one per micro-batch); tp 4 dp 1 runs 1, 2, 4, 8."""
    points, pruned = _walked(_Family(), _cands(gpus=4, gpn=4, gb=8, units=2))
    assert [(p.tp, p.pp, p.dp, p.micro_batch, p.schedule) for p in points] == [
        (1, 1, 4, 1, "1f1b"), (1, 1, 4, 2, "1f1b"),
        (1, 2, 2, 1, "1f1b"), (1, 2, 2, 2, "1f1b"), (1, 2, 2, 4, "1f1b"),
        (4, 1, 1, 1, "1f1b"), (4, 1, 1, 2, "1f1b"), (4, 1, 1, 4, "1f1b"), (4, 1, 1, 8, "1f1b")]
    assert [m for m, _ in pruned] == ["4 > 2", "4 > 2", "4 > 2", "4 > 2", "tp 2"]
    # each names the subtree it drops: a schedule of one micro-batch, the grid of pp 4, all of tp 2
    assert pruned[0][1] == Subtree(1, 1, 2, 2, 1, [1], False, "none", ())
    assert pruned[3][1] == Subtree(1, 1, 4, 1)
    assert pruned[4][1] == Subtree(2, 1)
    # the network's axes: cp 1, ep 1, no sequence parallelism, one recompute setting
    assert {(p.cp, p.ep, p.sp, p.recompute, p.num_microbatches * p.micro_batch * p.dp) for p in points} == {
        (1, 1, False, "none", 8)}


class _Wider(_Family):
    """`_Family` with a transformer's kind of axes: cp 1 or 2 at tp 1 (cp 2 breaks a rule at tp
    4), ep 1 and 2 where dp is even (ep 2 breaks a rule at dp 2), sp only with tp > 1, two
    recompute settings."""

    recomputes = ("none", "full")

    def cps(self, tp):
        return [1, 2] if tp == 1 else [1]

    def cp_problems(self, tp, cp):
        return [Problem(Reason.CP_SEQ, "cp 2 at tp 4")] if cp == 2 and tp == 4 else []

    def eps(self, dp, tp=1, cp=1):
        return [1, 2] if dp % 2 == 0 else [1]

    def ep_problem(self, dp, ep, tp=1, cp=1):
        return Problem(Reason.EP, "ep 2 at dp 2") if ep == 2 and dp == 2 else None

    def sps(self, tp):
        return [False, True] if tp > 1 else [False]


def test_walk_takes_the_family_axes_and_lets_the_search_drop_a_grid():
    """4 GPUs, batch 4, pp 1 only, 1F1B: the grids are (tp, cp, dp, ep) = (1, 1, 4, 1), (1, 1, 4, 2),
    (1, 2, 2, 1), (1, 2, 2, 2: ep rule), (4, 1, 1, 1), tp 2 being `_Family`'s problem; `prepare`
    drops (1, 1, 4, 2). Points per grid: micro-batches of 4 / dp x sp x 2 recomputes."""
    seen = []

    def prepare(tp, cp, pp, dp, ep, mbs, svs):
        seen.append((tp, cp, dp, ep, tuple(mbs), tuple(svs)))
        return None if (tp, cp, dp, ep) == (1, 1, 4, 2) else ("ctx", tp, ep)

    points, pruned = _walked(_Wider(), _cands(gpus=4, gpn=4, gb=4, units=2, pp=[1], schedule=["1f1b"]), prepare)
    assert seen == [(1, 1, 4, 1, (1,), (("1f1b", 1),)), (1, 1, 4, 2, (1,), (("1f1b", 1),)),
                    (1, 2, 2, 1, (1, 2), (("1f1b", 1),)), (4, 1, 1, 1, (1, 2, 4), (("1f1b", 1),))]
    assert [(m, at.ep, at.mbs) for m, at in pruned] == [("ep 2 at dp 2", 2, [1, 2]), ("tp 2", None, None)]
    # tp 4's cp is 1: its cp rule is never reached
    grids = {}
    for p in points:
        grids.setdefault((p.tp, p.cp, p.dp, p.ep), []).append((p.micro_batch, p.sp, p.recompute))
        assert p.ctx == ("ctx", p.tp, p.ep)
    assert grids == {(1, 1, 4, 1): [(1, False, "none"), (1, False, "full")],
                     (1, 2, 2, 1): [(1, False, "none"), (1, False, "full"), (2, False, "none"), (2, False, "full")],
                     (4, 1, 1, 1): [(mb, sp, rc) for mb in (1, 2, 4) for sp in (False, True) for rc in ("none", "full")]}


def test_a_tp_breaking_the_family_and_the_node_rule_counts_under_the_family():
    """6 GPUs, 4 per node: tp 1, 2, 3 (at most a node); tp 3 leaves the node rule (4 % 3 != 0)
    and, here, the family's too: the family's rule comes first (`walk`), so tp 3 is pruned once,
    under the family's reason."""
    fam = _Family()
    fam.tp_problems = lambda tp: [Problem(Reason.TP_SPLITS_NOTHING, f"tp {tp}")] if tp in (2, 3) else []
    _, pruned = _walked(fam, _cands(gpus=6, gpn=4, gb=12, units=2))
    assert [(at.tp, m) for m, at in pruned if at.pp is None] == [(2, "tp 2"), (3, "tp 3")]
    fam.tp_problems = lambda tp: []
    _, pruned = _walked(fam, _cands(gpus=6, gpn=4, gb=12, units=2))
    assert [(at.tp, "the 4 GPUs of an NVLink domain" in m) for m, at in pruned if at.pp is None] == [(3, True)]  # the node's
