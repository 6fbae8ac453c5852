"""Run by tests/test_verify_mpi.py as `mpiexec -n 8 python -m mpi4py THIS OUT.json`: verify a
2 x 2 x 2 plan with the MPI backend; rank 0 writes the report as JSON."""

from __future__ import annotations

import sys

from modelplan.execute.verify import verify

if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from test_verify_mpi import PLAN, SPEC, TRAINING

    report = verify(SPEC, TRAINING, PLAN, backend="mpi", scale=False, timeout_s=60)
    if report is not None:
        with open(sys.argv[1], "w") as fh:
            fh.write(report.model_dump_json())
