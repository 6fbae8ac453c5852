"""`modelplan calibrate`: measure the collectives on this machine, fit alpha-beta, write a profile.

Run it inside an MPI job (`mpiexec -n 4 python -m mpi4py -m modelplan calibrate -o p.toml`) or
let it start one (`modelplan calibrate --np 4 -o p.toml`). Rank 0 prints an nccl-tests style
table per collective (size, count, time, algbw, busbw) with the link model's prediction and the
fitted prediction beside each measurement, then the fits, and writes the profile atomically.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.errors import ModelplanError

_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2,
          "MIB": 1024**2, "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}


def parse_size(text: str, name: str) -> int:
    """'1K' / '16M' / '4096' -> bytes (binary units, as nccl-tests' -b/-e)."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ModelplanError(f"{name} ({text!r}) must be a size such as 1024, 64K or 16M")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def _rank_program(comm: Any, sweep: Any) -> dict:
    from modelplan.execute.calibrate import measure

    return {"host": socket.gethostname(), "samples": measure(comm, sweep)}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ModelplanError(f"--output {path}: cannot write: {exc.strerror}") from None


def _pct(pred: float | None, measured: float) -> str:
    if pred is None:
        return f"{'-':>16}"
    return f"{pred * 1e6:>9.1f} ({(pred - measured) / measured:+4.0%})"


def render(cal: Any) -> str:
    """nccl-tests style tables: one per collective, then the fits."""
    from modelplan.execute.calibrate_fit import algorithm_factors

    out = [f"# modelplan calibrate: {cal.world_size} ranks, {cal.backend}, {cal.library}, "
           f"scope {cal.scope}"]
    if cal.link_alpha_us is not None and cal.link_bandwidth_gbps is not None:
        out.append(f"# link model (before the fit): alpha {cal.link_alpha_us:.2f} us, bandwidth "
                   f"{cal.link_bandwidth_gbps:.3f} GB/s per round, times each algorithm's "
                   "steps and volume")
    for fit in cal.fits:
        f = algorithm_factors(fit.op, cal.world_size)
        out += ["", f"# {fit.op}: {f.algorithm}, {f.steps} steps, volume {f.volume_factor:.3g} x "
                f"size, busbw = algbw x {f.busbw_factor:.3g}",
                f"# {'size(B)':>12} {'count':>10} {'time(us)':>10} {'algbw':>7} {'busbw':>7}"
                f" {'link model(us)':>16} {'fit(us)':>16}"]
        for m in (m for m in cal.measurements if m.op == fit.op):
            algbw = m.size_bytes / m.time_s / 1e9  # nccl-tests: algbw = size / time
            bws = (f"{algbw:>7.3f} {algbw * f.busbw_factor:>7.3f}" if m.size_bytes
                   else f"{'-':>7} {'-':>7}")
            out.append(f"  {m.size_bytes:>12} {m.count:>10} {m.time_s * 1e6:>10.1f} {bws} "
                       f"{_pct(cal.link_predict_s(m), m.time_s)}"
                       f" {_pct(fit.predict_s(m.size_bytes), m.time_s)}")
    out += ["", "# fitted: time = steps*alpha + volume*size/bandwidth (per collective)",
            f"# {'collective':<15} {'alpha(us)':>9} {'bw(GB/s)':>9} {'call alpha(us)':>14} "
            f"{'busbw(GB/s)':>11} {'max err':>8}"]
    for fit in cal.fits:
        bw = "-" if fit.bandwidth_gbps is None else f"{fit.bandwidth_gbps:.3f}"
        busbw = "-" if fit.busbw_gbps is None else f"{fit.busbw_gbps:.3f}"
        out.append(f"  {fit.op:<15} {fit.alpha_us:>9.2f} {bw:>9} {fit.call_alpha_us:>14.2f} "
                   f"{busbw:>11} {fit.max_rel_err:>8.0%}")
    return "\n".join(out)


@app.command("calibrate")
@user_errors
def calibrate_cmd(
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write the cluster profile TOML here (atomically).")] = None,
    num_ranks: Annotated[Optional[int], typer.Option(
        "--np", help="Start the job: mpiexec -n NP (mpi, outside mpiexec); ranks for sim.")] = None,
    backend: Annotated[str, typer.Option(
        help="mpi: one process per rank; sim: threads (tests the tool, not the machine).")] = "mpi",
    min_size: Annotated[str, typer.Option("--min-size", "-b", help="Sweep start size.")] = "1K",
    max_size: Annotated[str, typer.Option("--max-size", "-e", help="Sweep end size.")] = "16M",
    step_factor: Annotated[int, typer.Option("--step-factor", "-f",
                                             help="Size multiplier between points.")] = 4,
    iters: Annotated[int, typer.Option("--iters", "-n", help="Timed calls per size.")] = 10,
    warmup: Annotated[int, typer.Option("--warmup", "-w", help="Untimed calls per size.")] = 2,
    ops: Annotated[Optional[list[str]], typer.Option(
        "--op", help="Collective to measure (repeatable); default all six.")] = None,
    link_alpha_us: Annotated[Optional[float], typer.Option(
        help="Link alpha for the 'link model' column; default: the send_recv fit.")] = None,
    link_bandwidth_gbps: Annotated[Optional[float], typer.Option(
        help="Link GB/s for the 'link model' column; default: the send_recv fit.")] = None,
    timeout_s: Annotated[float, typer.Option(help="Abort the job after this long.")] = 600.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
) -> None:
    """Measure all_reduce, all_gather, reduce_scatter, broadcast, send_recv and barrier; fit
    alpha-beta per collective; print nccl-tests style tables; write a cluster profile."""
    from modelplan.comm.ops import Collective
    from modelplan.execute.calibrate import CALIBRATED, Sweep, size_sweep, summarize
    from modelplan.execute.calibrate_fit import fit_all, profile_toml
    from modelplan.execute.spmd import SpmdBackend

    try:
        backend_kind = SpmdBackend(backend)
    except ValueError:
        raise ModelplanError(f"--backend ({backend!r}) must be one of mpi, sim") from None
    try:
        collectives = tuple(Collective(op) for op in ops) if ops else CALIBRATED
    except ValueError as exc:
        raise ModelplanError(f"--op: {exc}; choose from {', '.join(CALIBRATED)}") from None
    if any(op not in CALIBRATED for op in collectives):
        raise ModelplanError(f"--op: calibrate measures {', '.join(CALIBRATED)}")
    sizes = size_sweep(parse_size(min_size, "--min-size"), parse_size(max_size, "--max-size"),
                       step_factor)
    if iters < 1 or warmup < 0:
        raise ModelplanError(f"--iters ({iters}) must be >= 1 and --warmup ({warmup}) >= 0")
    sweep = Sweep(sizes=sizes, collectives=collectives, iters=iters, warmup=warmup)

    if backend_kind is SpmdBackend.MPI:
        from modelplan.execute.mpilaunch import inside_mpi_job, mpi_env, mpiexec_command

        if not inside_mpi_job():
            if num_ranks is None:
                raise ModelplanError("calibrate --backend mpi runs in an MPI job: `mpiexec -n 4 "
                                     "python -m mpi4py -m modelplan calibrate ...`, or add --np 4")
            args = ["-m", "modelplan", "calibrate", "-b", str(min(sizes)), "-e", str(max(sizes)),
                    "-f", str(step_factor), "-n", str(iters), "-w", str(warmup),
                    "--timeout-s", str(timeout_s), *[a for op in collectives for a in ("--op", op)]]
            args += ["-o", str(output)] if output else []
            args += ["--json"] if json_out else []
            for flag, value in (("--link-alpha-us", link_alpha_us),
                                ("--link-bandwidth-gbps", link_bandwidth_gbps)):
                args += [flag, str(value)] if value is not None else []
            proc = subprocess.run(mpiexec_command(num_ranks, args),
                                  env=mpi_env(num_ranks, timeout_s=timeout_s + 60))
            raise typer.Exit(proc.returncode)
        from modelplan.execute.mpicomm import load_mpi, run_spmd_mpi

        MPI = load_mpi()
        world_size = MPI.COMM_WORLD.Get_size()
        library = MPI.Get_library_version().split(",")[0].strip()
        if world_size < 2:
            raise ModelplanError(f"calibrate needs at least 2 ranks, the job has {world_size}")
        run = run_spmd_mpi(world_size, _rank_program, sweep, timeout_s=timeout_s)
        if run is None:
            return  # not rank 0: rank 0 reports
    else:
        from modelplan.execute.simcomm import run_spmd

        world_size = num_ranks if num_ranks is not None else 4
        if world_size < 2:
            raise ModelplanError(f"--np ({world_size}) must be >= 2 for calibrate")
        library = "modelplan simulator (threads)"
        run = run_spmd(world_size, _rank_program, sweep, timeout_s=timeout_s)

    hosts = {r["host"] for r in run.results}
    source = (f"modelplan calibrate, {world_size} ranks on {len(hosts)} host(s), {library}, "
              f"{min(sizes)}-{max(sizes)} B, median of {iters}, {date.today().isoformat()}")
    cal = fit_all(summarize([r["samples"] for r in run.results]), world_size,
                  backend=str(backend_kind), library=library,
                  scope="intra" if len(hosts) == 1 else "inter", source=source,
                  link_alpha_us=link_alpha_us, link_bandwidth_gbps=link_bandwidth_gbps)
    if output is not None:
        _write_atomic(output, profile_toml(cal))
    if json_out:
        doc = cal.model_dump(mode="json")
        doc["predictions"] = [
            {"op": m.op, "size_bytes": m.size_bytes, "time_s": m.time_s,
             "link_model_s": cal.link_predict_s(m),
             "fit_s": cal.fit(m.op).predict_s(m.size_bytes)} for m in cal.measurements]
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(render(cal))
        if output is not None:
            typer.echo(f"\nwrote {output}")
