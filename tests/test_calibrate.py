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
from modelplan.cli.calibrate import parse_size
from modelplan.comm.communicator import Group
from modelplan.comm.ops import Axis, Collective
from modelplan.execute import run_spmd
from modelplan.execute.calibrate import CALIBRATED, Measurement, size_sweep
from modelplan.execute.calibrate_fit import (
    algorithm_factors,
    fit_all,
    fit_collective,
    profile_toml,
)

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
    """Times on the 1 GB/s line but 10% under it at 1 KB would give alpha < 0: clamp to 0."""
    points = [Measurement(op=Collective.SEND_RECV, size_bytes=s, count=s // 8, repeats=1,
                          time_s=t) for s, t in [(1000, 0.9e-6), (10**6, 1e-3), (10**7, 1e-2)]]
    fit = fit_collective(Collective.SEND_RECV, 2, points)
    assert fit.alpha_us == 0.0
    assert fit.bandwidth_gbps == pytest.approx(1.0, rel=0.05)  # 1e6 B in 1 ms = 1 GB/s


def test_barrier_fits_alpha_only():
    """A barrier has no payload: alpha = time / ceil(log2 p) rounds, no bandwidth."""
    fit = fit_collective(Collective.BARRIER, 8, [Measurement(
        op=Collective.BARRIER, size_bytes=0, count=0, repeats=1, time_s=30e-6)])
    assert fit.alpha_us == pytest.approx(10.0)  # 3 rounds for 8 ranks
    assert fit.bandwidth_gbps is None


def test_profile_toml_round_trips():
    """The profile parses with tomllib; call alpha = steps * alpha; busbw = bw * busbw/volume."""
    points = [m for op in CALIBRATED[:5] for m in _synthetic(op, 4, 5e-6, 2e9, [1 << 10, 1 << 20])]
    cal = fit_all(tuple(points), 4, backend="sim", library="test", scope="intra", source="test")
    doc = tomllib.loads(profile_toml(cal))
    ar = doc["fitted"]["all_reduce"]
    assert ar["alpha_us"] == pytest.approx(5.0, rel=1e-5)
    assert ar["bandwidth_gbps"] == pytest.approx(2.0, rel=1e-5)
    assert ar["call_alpha_us"] == pytest.approx(6 * 5.0, rel=1e-5)  # 2(p-1) = 6 rounds
    bcast = next(f for f in doc["collective_fits"] if f["op"] == "broadcast")
    assert bcast["busbw_gbps"] == pytest.approx(2.0 / 2, rel=1e-5)  # binomial: 2 sends at root


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
    assert set(doc["fitted"]) == {str(op) for op in CALIBRATED}
    assert doc["world_size"] == 3
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
    assert "--output" in result.output and "cannot write" in result.output
