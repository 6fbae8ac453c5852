"""`modelplan calibrate`: the algorithm factors, the alpha-beta fit, the profile TOML and the CLI.

The timing itself is exercised with the thread simulator (fast, no MPI); tests/test_mpi.py runs
the command under mpiexec.
"""

import json
import math
import tomllib

import numpy as np
import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.sizes import parse_size
from modelplan.comm.communicator import Group
from modelplan.comm.ops import Axis, Collective
from modelplan.errors import ModelplanError
from modelplan.execute import run_spmd
from modelplan.execute.calibrate import CALIBRATED, Measurement, combine_jobs, size_sweep
from modelplan.execute.calibrate_fit import algorithm_factors, fit_all, fit_collective
from modelplan.execute.calibrate_profile import profile_toml

runner = CliRunner()


def _one_call(op, p, elements):
    """Ledger entries of one call of `op` on p simulated ranks (nccl-tests sizes, float64)."""
    world = Group(Axis.WORLD, tuple(range(p)))

    def fn(c):
        x = np.ones(elements)
        if op is Collective.ALL_REDUCE:
            c.all_reduce(x, world)
        elif op is Collective.ALL_GATHER:
            c.all_gather(x[: elements // p], world)
        elif op is Collective.REDUCE_SCATTER:
            c.reduce_scatter(x, world)
        elif op is Collective.BROADCAST:
            c.broadcast(x, world, root=0)
        elif op is Collective.SEND_RECV:
            c.send(x, (c.rank + 1) % p, world)
            c.recv((c.rank - 1) % p, world)
        else:
            c.barrier(world)

    return run_spmd(p, fn).ledgers


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("op", CALIBRATED)
def test_factors_match_what_the_communicator_moves(op, p):
    """steps = most rounds of any rank, volume_factor * size = most bytes any rank sent.

    The expected values are read from the simulator's ledger (bytes it really sent), so the
    model the fit uses cannot drift from the algorithms the communicator runs.
    """
    elements = 8 * 3 * 5 * 7  # divisible by every p here
    size = elements * 8
    ledgers = _one_call(op, p, elements)
    if op is Collective.SEND_RECV:  # one send and one recv entry, in the same round
        steps = max(lg.entries[0].steps for lg in ledgers)
    else:
        steps = max(sum(e.steps for e in lg.entries) for lg in ledgers)
    sent = max(sum(e.bytes_sent for e in lg.entries) for lg in ledgers)
    f = algorithm_factors(op, p)
    assert f.steps == steps
    assert f.volume_factor * size == pytest.approx(sent)


def test_busbw_factors_are_nccl_tests():
    """busbw factors from nccl-tests doc/PERFORMANCE.md for n=8: AllReduce 2(n-1)/n = 1.75,
    AllGather / ReduceScatter (n-1)/n = 0.875, Broadcast and SendRecv 1."""
    got = {op: algorithm_factors(op, 8).busbw_factor for op in CALIBRATED[:5]}
    assert got == {Collective.ALL_REDUCE: 1.75, Collective.ALL_GATHER: 0.875,
                   Collective.REDUCE_SCATTER: 0.875, Collective.BROADCAST: 1.0,
                   Collective.SEND_RECV: 1.0}


def _synthetic(op, p, alpha_s, bandwidth_Bps, sizes):
    """Times from the alpha-beta model itself, with chosen alpha and bandwidth."""
    f = algorithm_factors(op, p)
    return [Measurement(op=op, size_bytes=s, count=s // 8, repeats=1,
                        time_s=f.steps * alpha_s + f.volume_factor * s / bandwidth_Bps)
            for s in sizes]


@pytest.mark.parametrize("op", CALIBRATED[:5])
def test_fit_recovers_known_alpha_and_bandwidth(op):
    """Noise-free times made with alpha = 7 us, bandwidth = 3 GB/s give back 7 us and 3 GB/s."""
    points = _synthetic(op, 4, 7e-6, 3e9, size_sweep(1024, 16 << 20, 4))
    fit = fit_collective(op, 4, points)
    assert fit.alpha_us == pytest.approx(7.0, rel=1e-6)
    assert fit.bandwidth_gbps == pytest.approx(3.0, rel=1e-6)
    assert fit.max_rel_err < 1e-9


def test_fit_keeps_alpha_non_negative():
    """Times on the 1 GB/s line but 10% under it at 1 KB would want alpha < 0: alpha stays 0 and
    the bandwidth balances the errors: size/time is 1.111 GB/s at 1 KB and 1 GB/s above, so
    bw = (1.111 + 1) / 2 = 1.0556 GB/s, 5.3% off at both ends (the smallest largest error)."""
    points = [Measurement(op=Collective.SEND_RECV, size_bytes=s, count=s // 8, repeats=1,
                          time_s=t) for s, t in [(1000, 0.9e-6), (10**6, 1e-3), (10**7, 1e-2)]]
    fit = fit_collective(Collective.SEND_RECV, 2, points)
    assert fit.alpha_us == 0.0
    assert fit.bandwidth_gbps == pytest.approx((1 / 0.9 + 1) / 2, rel=1e-9)
    assert fit.max_rel_err == pytest.approx(1 - 1 / 1.0556, rel=1e-3)


def test_fit_minimises_the_largest_error():
    """send_recv on 2 ranks is 1 step of alpha + size/bw. Times 1, 2, 3 ms at 1, 2, 3 MB are the
    1 GB/s line (error 0). Moving the middle one to 3 ms, no line fits, and the best one leaves
    the same relative error at all three points (equioscillation: Chebyshev's theorem for a
    2-parameter fit through 3 points)."""
    def pts(times_ms):
        return [Measurement(op=Collective.SEND_RECV, size_bytes=s * 10**6, count=s * 10**6 // 8,
                            repeats=1, time_s=t * 1e-3) for s, t in zip((1, 2, 3), times_ms)]

    exact = fit_collective(Collective.SEND_RECV, 2, pts((1.0, 2.0, 3.0)))
    assert exact.max_rel_err < 1e-9 and exact.bandwidth_gbps == pytest.approx(1.0)
    bent = fit_collective(Collective.SEND_RECV, 2, pts((1.0, 3.0, 3.0)))
    errors = [abs(bent.predict_s(m.size_bytes) / m.time_s - 1) for m in pts((1.0, 3.0, 3.0))]
    assert max(errors) == pytest.approx(bent.max_rel_err)
    assert sorted(errors)[0] == pytest.approx(sorted(errors)[-1], rel=1e-6)  # equioscillation


def test_barrier_fits_alpha_only():
    """A barrier has no payload: alpha = time / ceil(log2 p) rounds, no bandwidth."""
    fit = fit_collective(Collective.BARRIER, 8, [Measurement(
        op=Collective.BARRIER, size_bytes=0, count=0, repeats=1, time_s=30e-6)])
    assert fit.alpha_us == pytest.approx(10.0)  # 3 rounds for 8 ranks
    assert fit.bandwidth_gbps is None


def test_profile_toml_round_trips():
    """The profile parses with tomllib; call alpha = steps * alpha; busbw = bw * busbw/volume."""
    points = [m for op in CALIBRATED[:5] for m in _synthetic(op, 4, 5e-6, 2e9, [1 << 10, 1 << 20])]
    cal = fit_all(tuple(points), 4, backend="sim", library="test", scope="intra", source="test",
                  split_bytes=0)
    doc = tomllib.loads(profile_toml(cal))
    ar = next(f for f in doc["calibration"]["fitted"] if f["op"] == "all_reduce")
    assert ar["alpha_us"] == pytest.approx(5.0, rel=1e-5)
    assert ar["bandwidth_gbps"] == pytest.approx(2.0, rel=1e-5)
    assert ar["call_alpha_us"] == pytest.approx(6 * 5.0, rel=1e-5)  # 2(p-1) = 6 rounds
    bcast = next(f for f in doc["collective_fits"] if f["op"] == "broadcast")
    assert bcast["busbw_gbps"] == pytest.approx(2.0 / 2, rel=1e-5)  # binomial: 2 sends at root


def _two_regimes(op, p=4):
    """Small sizes on a 20 us / 1 GB/s line, sizes from 1 MiB on a 100 us / 4 GB/s line."""
    small = _synthetic(op, p, 20e-6, 1e9, size_sweep(1024, 256 << 10, 4))
    large = _synthetic(op, p, 100e-6, 4e9, size_sweep(1 << 20, 16 << 20, 4))
    return small + large


def test_fit_splits_small_and_large_messages():
    """Sizes below 1 MiB and from 1 MiB up get their own alpha and bandwidth back exactly."""
    cal = fit_all(tuple(_two_regimes(Collective.ALL_REDUCE)), 4, backend="sim", library="t",
                  scope="intra", source="t")
    small, large = cal.fits_for(Collective.ALL_REDUCE)
    assert (small.min_bytes, large.min_bytes, cal.split_bytes) == (0, 1 << 20, 1 << 20)
    assert (small.alpha_us, small.bandwidth_gbps) == (pytest.approx(20.0), pytest.approx(1.0))
    assert (large.alpha_us, large.bandwidth_gbps) == (pytest.approx(100.0), pytest.approx(4.0))
    assert max(small.max_rel_err, large.max_rel_err) < 1e-9


def test_one_line_cannot_cover_both_regimes():
    """The same points fitted with one line (split 0) miss some point by more than 25%: the
    reason for the split."""
    cal = fit_all(tuple(_two_regimes(Collective.ALL_REDUCE)), 4, backend="sim", library="t",
                  scope="intra", source="t", split_bytes=0)
    (fit,) = cal.fits_for(Collective.ALL_REDUCE)
    assert fit.max_rel_err > 0.25


def _profile(tmp_path, extends="dgx-h100"):
    points = [m for op in CALIBRATED[:5] for m in _two_regimes(op)]
    cal = fit_all(tuple(points), 4, backend="mpi", library="t", scope="intra", source="t")
    path = tmp_path / "profile.toml"
    path.write_text(profile_toml(cal, extends))
    return path


@pytest.mark.parametrize("size,alpha_s,bandwidth_Bps", [(4 << 20, 100e-6, 4e9), (64 << 10, 20e-6, 1e9)])
def test_profile_loads_as_a_cluster_and_prices_with_the_fits(tmp_path, size, alpha_s, bandwidth_Bps):
    """`load_cluster(profile)` extends dgx-h100; a 4-rank intra-node all_reduce is then priced by
    the fit of its size range: ring 2(p-1) = 6 rounds of alpha plus 2(p-1)/p = 1.5 x size at the
    fitted bandwidth (Patarasuk & Yuan 2009), not by the H100's NVLink model."""
    from modelplan.comm.clusters import load_cluster
    from modelplan.comm.cost import collective_cost

    cluster = load_cluster(str(_profile(tmp_path)))
    assert cluster.intra.bandwidth_gbps == load_cluster("dgx-h100").intra.bandwidth_gbps  # inherited
    cost = collective_cost("all_reduce", size, 4, 4, cluster)
    assert cost.algo.value == "fitted"
    assert cost.time_s == pytest.approx(6 * alpha_s + 1.5 * size / bandwidth_Bps, rel=1e-5)
    assert collective_cost("all_reduce", size, 4, 4, load_cluster("dgx-h100")).time_s < cost.time_s / 10


def test_profile_without_extends_says_what_to_add(tmp_path):
    """A profile written without --extends holds the fits but is not a cluster: one-line error."""
    from modelplan.comm.clusters import load_cluster
    from modelplan.errors import SpecError

    with pytest.raises(SpecError, match=r'profile.toml: .* extends = "<cluster preset or file>"'):
        load_cluster(str(_profile(tmp_path, extends=None)))


def test_comm_and_plan_accept_the_profile(tmp_path):
    """`modelplan comm --cluster PROFILE` prices 4-rank all_reduce with the fit (1 MiB: 6 x 100 us +
    1.5 MiB / 4 GB/s = 993.2 us); `modelplan plan --cluster PROFILE` runs on it."""
    profile = str(_profile(tmp_path))
    result = runner.invoke(app, ["comm", "all_reduce", "--ranks", "4", "--ranks-per-node", "4",
                                 "--cluster", profile, "--size", "1M", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["rows"][0]
    assert row["algo"] == "fitted"
    assert row["time_us"] == pytest.approx(600 + 1.5 * 2**20 / 4e9 * 1e6, rel=1e-4)
    result = runner.invoke(app, ["plan", "gpt2", "--gpus", "8", "--cluster", profile, "--json"])
    assert result.exit_code == 0, result.output


def test_size_sweep_and_parse_size():
    """-b 1K -e 16M -f 4 is 1K, 4K, ..., 16M: 8 sizes (nccl-tests meaning of -b/-e/-f)."""
    sizes = size_sweep(parse_size("1K", "-b"), parse_size("16M", "-e"), 4)
    assert sizes == tuple(1024 * 4**k for k in range(8))
    assert parse_size("64KiB", "x") == 65536


def test_cli_sim_writes_profile(tmp_path):
    """calibrate --backend sim prints the tables and writes a TOML with all six fits."""
    out = tmp_path / "profile.toml"
    result = runner.invoke(app, ["calibrate", "--backend", "sim", "--np", "3", "-b", "1K",
                                 "-e", "16K", "-n", "2", "-w", "0", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "busbw" in result.output and "link model" in result.output
    doc = tomllib.loads(out.read_text())
    assert {f["op"] for f in doc["calibration"]["fitted"]} == {str(op) for op in CALIBRATED}
    assert doc["calibration"]["world_size"] == 3
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left behind


def test_cli_json_lists_every_measurement():
    """--json: one prediction per (collective, size): 5 ops x 2 sizes + 1 barrier = 11."""
    result = runner.invoke(app, ["calibrate", "--backend", "sim", "--np", "2", "-b", "1K",
                                 "-e", "4K", "-n", "1", "-w", "0", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert len(doc["predictions"]) == 11
    assert all(math.isfinite(p["fit_s"]) for p in doc["predictions"])


def test_cli_mpi_outside_a_job_is_one_line(monkeypatch):
    """--backend mpi without mpiexec and without --np: exit 2 with a one-line hint."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    result = runner.invoke(app, ["calibrate"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "mpiexec -n 4 python -m mpi4py -m modelplan calibrate" in result.output


def test_cli_unwritable_output(tmp_path):
    """An output path in a missing folder is a one-line error naming --output."""
    result = runner.invoke(app, ["calibrate", "--backend", "sim", "--np", "2", "-b", "1K",
                                 "-e", "1K", "-n", "1", "-w", "0", "-o",
                                 str(tmp_path / "missing" / "p.toml")])
    assert result.exit_code == 2
    assert "--output" in result.output and "does not exist" in result.output


def test_combine_jobs_keeps_the_median_over_jobs():
    """Three jobs measured one point at 1, 3 and 2 ms: the median is 2 ms over 3 x 10 repeats."""
    def job(ms):
        return (Measurement(op=Collective.ALL_REDUCE, size_bytes=1024, count=128, time_s=ms * 1e-3,
                            repeats=10),)

    (m,) = combine_jobs([job(1), job(3), job(2)])
    assert (m.time_s, m.repeats) == (pytest.approx(2e-3), 30)
    other = (job(1)[0].model_copy(update={"size_bytes": 2048}),)
    with pytest.raises(ModelplanError, match="different points"):
        combine_jobs([job(1), other])


def test_cli_jobs_needs_np():
    """--jobs starts its own MPI jobs: with the simulator it is a one-line error."""
    result = runner.invoke(app, ["calibrate", "--backend", "sim", "--jobs", "2"])
    assert result.exit_code == 2
    assert "--jobs (2) starts its own MPI jobs" in result.output
