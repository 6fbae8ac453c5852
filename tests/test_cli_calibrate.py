"""`modelplan calibrate` refuses bad requests before it measures or starts MPI."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from modelplan.cli import app

runner = CliRunner()


@pytest.fixture
def no_measuring(monkeypatch):
    """Fail the test if a job is started or a measurement runs."""
    from modelplan.cli import mpirun
    from modelplan.execute import simcomm

    monkeypatch.setattr(mpirun, "run_job", lambda *a, **k: pytest.fail("an MPI job was started"))
    monkeypatch.setattr(simcomm, "run_spmd", lambda *a, **k: pytest.fail("measured"))


def test_np_1_is_refused_before_mpi(no_measuring):
    """--np 1 (calibrate needs a peer) is one line naming --np, exit 2, without starting MPI."""
    result = runner.invoke(app, ["calibrate", "--np", "1", "-o", "p.toml"])
    assert result.exit_code == 2
    assert "Invalid value for '--np': Input should be greater than or equal to 2" in result.stderr


@pytest.mark.parametrize("backend", ["sim", "mpi"])
def test_output_in_a_missing_folder_is_refused_before_measuring(tmp_path, no_measuring, backend):
    """-o /missing/x.toml fails at once, not after the whole sweep."""
    result = runner.invoke(app, ["calibrate", "--backend", backend, "--np", "2",
                                 "-o", str(tmp_path / "missing" / "x.toml")])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_sizes_mean_what_they_mean_in_comm():
    """One size parser: calibrate's and comm's are the same function (nccl-tests units: 1K = 1024,
    1GB = 10**9), so `-e 1GB` is 10**9 bytes in both."""
    from modelplan.cli import calibrate
    from modelplan.comm.sizes import parse_size

    assert calibrate.parse_size is parse_size
    assert parse_size("1GB") == 10**9 and parse_size("1G") == 2**30 and parse_size("1K") == 1024


def test_buffers_larger_than_1g_are_refused(no_measuring):
    """--max-size 16G would allocate 16 GiB buffers per rank: refused in one line."""
    result = runner.invoke(app, ["calibrate", "--backend", "sim", "--np", "2", "-e", "16G"])
    assert result.exit_code == 2 and "--max-size (16G) must be <= 1G" in result.stderr
