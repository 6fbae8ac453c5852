"""`plan/candidates.py`: the values every family's search tries per axis, and the plain walk.
Expected lists are worked by hand from divisors of the GPU count and the batch."""

from __future__ import annotations

from modelplan.plan.candidates import Candidates, walk
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.space import SearchSpace
from modelplan.specs.plan import Plan


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


class _Family:
    """A family of 2 pipeline units whose tp 2 is invalid, default vpp 2."""

    units = 2

    def tp_problems(self, tp):
        return [Problem(Reason.TP_SPLITS_NOTHING, "tp 2")] if tp == 2 else []

    def stage_problem(self, pp, vpp, num_stages):
        return Problem(Reason.PP_UNITS, f"{num_stages} > 2") if num_stages > self.units else None

    def vpp_default(self, pp):
        return [2]


def test_walk_yields_every_valid_plan_and_each_broken_rule_once():
    """4 GPUs (one node), batch 8, zero 0: tp 2 is the family's problem; pp 4 > 2 units;
    tp 1 pp 1 dp 4 runs micro-batches 1, 2; tp 1 pp 2 dp 2 runs 1, 2, 4 under 1F1B while
    interleaved x2 needs 4 stages > 2 units (3 problems, one per micro-batch); tp 4 dp 1 runs 1, 2, 4, 8."""
    out = list(walk(_Family(), _cands(gpus=4, gpn=4, gb=8, units=2, zero=[0])))
    plans = [(p.tp, p.pp, p.dp, p.micro_batch, p.schedule.value) for p in out if isinstance(p, Plan)]
    assert plans == [(1, 1, 4, 1, "1f1b"), (1, 1, 4, 2, "1f1b"),
                     (1, 2, 2, 1, "1f1b"), (1, 2, 2, 2, "1f1b"), (1, 2, 2, 4, "1f1b"),
                     (4, 1, 1, 1, "1f1b"), (4, 1, 1, 2, "1f1b"), (4, 1, 1, 4, "1f1b"), (4, 1, 1, 8, "1f1b")]
    problems = [p.message for p in out if isinstance(p, Problem)]
    assert problems == ["4 > 2", "4 > 2", "4 > 2", "4 > 2", "tp 2"]
