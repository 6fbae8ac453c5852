"""verify's rank program on real processes: the MPI backend runs the same SPMD step and gives the
same report as the in-process simulator (skipped without mpi4py and an MPI library)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

SPEC = TransformerSpec(name="llama-tiny", layers=4, hidden=16, heads=4, kv_heads=2, ffn_hidden=24, vocab=32)
TRAINING = TrainingSpec(global_batch=8, seq_len=8)
PLAN = Plan(dp=2, tp=2, pp=2, sequence_parallel=True, zero=1)
ROOT = Path(__file__).resolve().parent.parent


def _mpi_available() -> bool:
    if importlib.util.find_spec("mpi4py") is None:
        return False
    try:
        from modelplan.execute.mpilaunch import mpiexec_path

        mpiexec_path()
        from mpi4py import MPI  # noqa: F401
    except Exception:  # noqa: BLE001 - no MPI library or no mpiexec
        return False
    return True


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.skipif(not _mpi_available(), reason="mpi4py / an MPI library not installed")
def test_mpi_backend_gives_the_simulator_report(tmp_path):
    """8 MPI processes pass every check, with the same measured values as the simulator."""
    from modelplan.execute.mpilaunch import mpi_env, mpiexec_command
    from modelplan.execute.report import VerifyReport
    from modelplan.execute.verify import verify

    out = tmp_path / "report.json"
    env = mpi_env(8, timeout_s=90)
    env["PRTE_MCA_rmaps_default_mapping_policy"] = ":oversubscribe"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    program = Path(__file__).with_name("mpi_verify_program.py")
    proc = subprocess.run(mpiexec_command(8, [str(program), str(out)]), env=env, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    mpi = VerifyReport.model_validate_json(out.read_text())
    sim = verify(SPEC, TRAINING, PLAN, scale=False)
    assert mpi.passed, [r for r in mpi.rows if not r.passed]
    assert [(r.name, r.measured) for r in mpi.rows] == [(r.name, r.measured) for r in sim.rows]
