"""`calibrate --np N --jobs K` reads each job's printed document back (`execute/calibrate_jobs.py`):
a malformed one (not JSON, a missing key, a NaN or negative time) is one `error:` line naming the
job and the field, exit 2, and no profile is written; the jobs' own documents fit as before."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.cli.app import run
from modelplan.errors import ModelplanError
from modelplan.execute.calibrate_jobs import read_job_output

RUNNER = CliRunner()
SIM = ["calibrate", "--backend", "sim", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0", "--op", "all_reduce", "--json"]


@pytest.fixture(scope="module")
def command():
    app.load()
    return typer.main.get_command(app)


@pytest.fixture(scope="module")
def job_doc(command) -> dict:
    """A real calibrate document (the simulator's), what each MPI job prints with --json."""
    with RUNNER.isolation() as (out, _err, _):
        assert run(SIM, command) == 0
        return json.loads(out.getvalue().decode())


def _broken(doc: dict, key: str, value) -> str:
    m = dict(doc["measurements"][0], **{key: value}) if key in doc["measurements"][0] else None
    if m is not None:
        return json.dumps({**doc, "measurements": [m, *doc["measurements"][1:]]})
    return json.dumps({**doc, key: value})


@pytest.mark.parametrize(("key", "value", "named"), [
    ("time_s", float("nan"), "time_s"), ("time_s", -1.0, "time_s"), ("time_s", "fast", "time_s"),
    ("size_bytes", -8, "size_bytes"), ("op", "all_to_nobody", "op"), ("repeats", 0, "repeats"),
    ("world_size", 1, "world_size"), ("scope", "galaxy", "scope"), ("measurements", [], "measurements"),
])
def test_malformed_field_is_named(job_doc, key, value, named):
    """One field broken in a job's document: a ModelplanError naming the job and that field."""
    with pytest.raises(ModelplanError, match=f"calibrate job 1.*{named}"):
        read_job_output(_broken(job_doc, key, value), "calibrate job 1")


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"measurements": [1]}', "[" * 100_000,
                                  '{"world_size": 4}'])
def test_not_a_document_is_one_error(text):
    """Output that is no calibrate document at all: one ModelplanError, one line."""
    with pytest.raises(ModelplanError) as err:
        read_job_output(text, "calibrate job 2")
    assert "calibrate job 2" in str(err.value) and "\n" not in str(err.value)


def _run_jobs(command, monkeypatch, outputs: list[str], profile) -> tuple[int, str]:
    """`calibrate --np 2 --jobs 2 -o PROFILE` outside MPI, the jobs printing `outputs` in turn."""
    import modelplan.cli.mpirun as mpirun
    import modelplan.execute.mpilaunch as mpilaunch

    printed = iter(outputs)
    monkeypatch.setattr(mpirun, "run_job_output", lambda *a, **k: next(printed))
    monkeypatch.setattr(mpilaunch, "inside_mpi_job", lambda: False)
    argv = ["calibrate", "--np", "2", "--jobs", "2", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0",
            "--op", "all_reduce", "-o", str(profile)]
    with RUNNER.isolation() as (out, err, _):
        code = run(argv, command)
        return code, out.getvalue().decode() + err.getvalue().decode()


def test_cli_refuses_a_malformed_job_and_writes_nothing(command, job_doc, tmp_path, monkeypatch):
    """--jobs 2 whose second job printed NaN times: exit 2, one error line, no profile file left."""
    code, text = _run_jobs(command, monkeypatch, [json.dumps(job_doc), _broken(job_doc, "time_s", float("nan"))],
                           tmp_path / "p.toml")
    assert code == 2 and "Traceback" not in text, text
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "calibrate job 2" in errors[0] and "time_s" in errors[0], text
    assert list(tmp_path.iterdir()) == []


def test_cli_fits_well_formed_jobs(command, job_doc, tmp_path, monkeypatch):
    """Two well-formed job documents: the profile is written (the median over jobs is fitted)."""
    code, text = _run_jobs(command, monkeypatch, [json.dumps(job_doc)] * 2, tmp_path / "p.toml")
    assert code == 0, text
    assert (tmp_path / "p.toml").is_file()
