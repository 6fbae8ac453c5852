"""`modelplan calibrate --from OUTPUT.txt`: fit the profile to nccl-tests output measured elsewhere
(a GPU cluster) instead of measuring this machine; the fits, tables and profile are calibrate's."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import typer

from modelplan.errors import ModelplanError

MEASURING = {"num_ranks", "backend", "min_size", "max_size", "step_factor", "iters", "warmup",
             "jobs", "timeout_s", "link_alpha_us", "link_bandwidth_gbps"}
"""Options that say how to measure (or price links of) this machine: refused beside --from."""


def check_from_options(ctx: typer.Context, sources: list[str], ops: list[str] | None) -> None:
    """--from reads what was measured: the measuring options contradict it."""
    from modelplan.cli.options import given_options

    given = given_options(ctx, keep={p.name for p in ctx.command.params} - set(MEASURING))
    if given:
        raise ModelplanError(f"{given[0]} measures this machine; --from reads nccl-tests output "
                             "measured elsewhere: drop one")
    if ops and len(ops) > 1:
        raise ModelplanError(f"--op: one collective names the --from output(s) that print none "
                             f"({len(ops)} given)")
    if len([s for s in sources if s == "-"]) > 1:
        raise ModelplanError("--from: standard input (-) can be read once")


def calibration_from(sources: list[str], ops: list[str] | None, split_bytes: int) -> Any:
    """The per-call fits of the nccl-tests outputs named by --from."""
    from modelplan.comm.ops import parse_collective
    from modelplan.errors import SpecError
    from modelplan.execute.calibrate_fit import fit_all
    from modelplan.execute.calibrate_nccl_tests import merge_runs, read_nccl_tests
    from modelplan.inputs import read_text, source_name

    try:
        op = parse_collective(ops[0]) if ops else None
    except SpecError as exc:
        raise ModelplanError(f"--op: {exc}") from None
    runs = []
    for ref in sources:
        where = f"--from {source_name(ref)}"
        runs.append((where, read_nccl_tests(read_text(ref), where, Path(ref).name, op)))
    measured, ranks, scope, library = merge_runs(runs)
    sizes = [m.size_bytes for m in measured]
    hosts = "1 host" if scope == "intra" else "several hosts"
    names = ", ".join(source_name(ref) for ref in sources)
    source = (f"nccl-tests ({names}), {ranks} ranks on {hosts}, {library}, {min(sizes)}-"
              f"{max(sizes)} B, out-of-place times, read {date.today().isoformat()}")
    return fit_all(measured, ranks, backend="nccl-tests", library=library, scope=scope,
                   source=source, split_bytes=split_bytes, form="per_call")
