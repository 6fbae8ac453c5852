"""DeepSpeed's TrainSchedule with blocking paired p2p (`benchmarks/deepspeed_lockstep.py`, a probe
beside its benchmark) and vTrain's p2p gap (`benchmarks/bench_vtrain_n18.py`). Expected values
are worked by hand from deepspeed/runtime/pipe/schedule.py (`TrainSchedule.steps`,
`_step_to_micro_batch` and its four id helpers) and VIA-Research/vTrain f8dda84
src/predictor.py `_compute_p2p_latency`."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # not part of the package

from deepspeed_lockstep import micro_batch_of, one_f_one_b_time_s, schedule_time_s  # noqa: E402


def test_two_stage_step_map_by_hand():
    """pp 2, m 2 (6 steps). Stage 0: step 0 F0, 1 B-1 (idle), 2 F1, 3 B0, 4 F2 (idle), 5 B1;
    stage 1: step 0 B-1 (idle), 1 F0, 2 B0, 3 F1, 4 B1, 5 F2 (idle). Worked from the four helpers:
    even-step forward id = step//2 - stage//2, odd-step backward id = (step-1)//2 - stages + 1 + stage//2, ..."""
    stage0 = [micro_batch_of(k, 0, 2) for k in range(6)]
    stage1 = [micro_batch_of(k, 1, 2) for k in range(6)]
    assert stage0 == [(0, True), (-1, False), (1, True), (0, False), (2, True), (1, False)]
    assert stage1 == [(-1, False), (0, True), (0, False), (1, True), (1, False), (2, True)]


def test_two_stage_schedule_time_by_hand():
    """pp 2, m 2, t_f 1, t_b 10. S0: F0 [0, 1]; step 1 pairs S0 (SendActivation) with S1 (Recv):
    S1 F0 [1, 2]; S0 F1 [1, 2] (no exchange), S1 B0 [2, 12]; step 3 pairs them at max(2, 12): S0 B0
    [12, 22], S1 F1 [12, 13]; S1 B1 [13, 23]; step 5 pairs at max(22, 23): S0 B1 [23, 33]. 33 =
    (m + pp - 1)(t_f + t_b) = 3 x 11."""
    assert schedule_time_s(2, 2, 1.0, 10.0) == pytest.approx(33.0)
    assert one_f_one_b_time_s(2, 2, 1.0, 10.0) == pytest.approx(33.0)


def test_one_stage_is_gradient_accumulation():
    """pp 1: 2 m steps, F and B alternating, no exchange: m (t_f + t_b) = 4 x (1 + 3) = 16."""
    assert schedule_time_s(4, 1, 1.0, 3.0) == pytest.approx(16.0)


@pytest.mark.parametrize(("m", "pp"), [(1, 4), (3, 4), (8, 2), (16, 8), (48, 16)])
def test_matches_one_f_one_b(m, pp):
    """The lockstep adds no bubble: (m + pp - 1)(t_f + t_b) with t_f 1, t_b 3 (full recompute's
    backward = 2 forwards + the recomputed forward), e.g. m 48, pp 16: 63 x 4 = 252."""
    assert schedule_time_s(m, pp, 1.0, 3.0) == pytest.approx((m + pp - 1) * 4.0)


def test_rejects_empty_schedule():
    with pytest.raises(ValueError, match="micro_batches"):
        schedule_time_s(0, 2, 1.0, 3.0)


def test_vtrain_p2p_gap_by_hand():
    """vTrain _compute_p2p_latency(2 x b s h x 2 B, 800 Gb/s): 39.1B mb 2: 2 x 2 x 2048 x 8192 x 2 =
    134,217,728 B over 800 x 2^30 / 8 / 4 = 26,843,545,600 B/s = 5.0 ms."""
    from bench_vtrain_n18 import vtrain_p2p_gap_s

    assert vtrain_p2p_gap_s(2, 2048, 8192) == pytest.approx(134_217_728 / 26_843_545_600)
    assert vtrain_p2p_gap_s(2, 2048, 8192) == pytest.approx(0.005)


def test_host_bound_per_layer_by_hand():
    """vTrain single-node tp 8, h 2048, 24 layers, global batch 16, micro-batch 2: 775.623297 ms over
    8 micro-batches and 24 layers = 4.0397 ms (its mb-1 twin: 1883.691016 / 16 / 24 = 4.905 ms)."""
    from bench_vtrain_n18 import host_bound_per_layer_s

    assert host_bound_per_layer_s(8) == pytest.approx(0.775623297 / 8 / 24)
    rows = ((8, 2048, 1, 1883.691016),)
    assert host_bound_per_layer_s(8, rows) == pytest.approx(1.883691016 / 16 / 24)


def test_slot_cost_and_rising_pairs_by_hand():
    """3.6B tp 8 dp 8 pp 1 (global batch 512): mb 32 -> m 2, 4.9723 s / (2 x 32) = 77.69 ms per
    sample-slot; mb 64 -> m 1, 9.8389 s / 64 = 153.7 ms: +97.9 %, listed; mb 16 -> m 4, 5.0178 /
    64 = 78.4 ms: within 10 % of mb 32 either way, not listed."""
    from bench_vtrain_n18 import rising_pairs, slot_cost_s

    def row(mb, t):
        return {"id": f"vtrain_x_mb{mb}", "spec": {"hidden": 3072}, "tp": 8, "dp": 8, "pp": 1, "micro_batch": mb,
                "global_batch": 512, "reported": {"iteration_time_s": t}}

    runs = {r["id"]: r for r in (row(16, 5.0178), row(32, 4.9723), row(64, 9.8389))}
    assert slot_cost_s(runs["vtrain_x_mb32"]) == pytest.approx(4.9723 / 64)
    pairs = rising_pairs(runs)
    assert [(a, b) for a, b, _ in pairs] == [("vtrain_x_mb32", "vtrain_x_mb64"), ("vtrain_x_mb16", "vtrain_x_mb64")]
    assert pairs[0][2] == pytest.approx(9.8389 / 4.9723 - 1)
