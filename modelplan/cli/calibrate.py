"""`modelplan calibrate`: measure the collectives on this machine, fit alpha-beta, write a profile.

Run it inside an MPI job (`mpiexec -n 4 python -m mpi4py -m modelplan calibrate -o p.toml`) or
let it start one (`modelplan calibrate --np 4 -o p.toml`). Rank 0 prints an nccl-tests style
table per collective (size, count, time, algbw, busbw) with the link model's prediction and the
fitted prediction beside each measurement, then the fits, and writes the profile atomically.
`--from all_reduce_perf.txt` fits nccl-tests output measured elsewhere instead (`calibrate_from.py`).
"""

from __future__ import annotations

import json
import socket
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.options import complete_clusters, finite
from modelplan.comm.sizes import parse_size
from modelplan.errors import ModelplanError

def _rank_program(comm: Any, sweep: Any) -> dict:
    from modelplan.execute.calibrate import measure

    return {"host": socket.gethostname(), "samples": measure(comm, sweep)}


def _pct(pred: float | None, measured: float) -> str:
    if pred is None:
        return f"{'-':>16}"
    return f"{pred * 1e6:>9.1f} ({(pred - measured) / measured:+4.0%})"


def _range(fit: Any) -> str:
    return f">= {fit.min_bytes}" if fit.min_bytes else "all" if fit.op == "barrier" else "from 0"


def render(cal: Any) -> str:
    """nccl-tests style tables: one per collective, then the fits."""
    out = [f"# modelplan calibrate: {cal.world_size} ranks, {cal.backend}, {cal.library}, "
           f"scope {cal.scope}"]
    if cal.link_alpha_us is not None and cal.link_bandwidth_gbps is not None:
        out.append(f"# link model (before the fit): alpha {cal.link_alpha_us:.2f} us, bandwidth "
                   f"{cal.link_bandwidth_gbps:.3f} GB/s per round, times each algorithm's "
                   "steps and volume")
    if cal.split_bytes:
        out.append(f"# sizes below {cal.split_bytes} B and from it up are fitted separately")
    for op in dict.fromkeys(f.op for f in cal.fits):
        f = cal.factors(op)
        out += ["", f"# {op}: {f.algorithm}, {f.steps} steps, volume {f.volume_factor:.3g} x "
                f"size, busbw = algbw x {f.busbw_factor:.3g}",
                f"# {'size(B)':>12} {'count':>10} {'time(us)':>10} {'algbw':>7} {'busbw':>7}"
                f" {'link model(us)':>16} {'fit(us)':>16}"]
        for m in (m for m in cal.measurements if m.op == op):
            algbw = m.size_bytes / m.time_s / 1e9  # nccl-tests: algbw = size / time
            bws = (f"{algbw:>7.3f} {algbw * f.busbw_factor:>7.3f}" if m.size_bytes
                   else f"{'-':>7} {'-':>7}")
            out.append(f"  {m.size_bytes:>12} {m.count:>10} {m.time_s * 1e6:>10.1f} {bws} "
                       f"{_pct(cal.link_predict_s(m), m.time_s)}"
                       f" {_pct(cal.predict_s(m), m.time_s)}")
    out += ["", "# fitted: time = steps*alpha + volume*size/bandwidth (per collective and size range)",
            f"# {'collective':<15} {'sizes(B)':>11} {'alpha(us)':>9} {'bw(GB/s)':>9} "
            f"{'call alpha(us)':>14} {'busbw(GB/s)':>11} {'max err':>8}"]
    for fit in cal.fits:
        bw = "-" if fit.bandwidth_gbps is None else f"{fit.bandwidth_gbps:.3f}"
        busbw = "-" if fit.busbw_gbps is None else f"{fit.busbw_gbps:.3f}"
        out.append(f"  {fit.op:<15} {_range(fit):>11} {fit.alpha_us:>9.2f} {bw:>9} "
                   f"{fit.call_alpha_us:>14.2f} {busbw:>11} {fit.max_rel_err:>8.0%}")
    return "\n".join(out)


MAX_BUFFER_BYTES = 2**30
"""Largest message calibrate measures (each rank holds a few buffers of it)."""


@app.command("calibrate")
@user_errors
def calibrate_cmd(
    ctx: typer.Context,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write the cluster profile TOML here (atomically).")] = None,
    extends: Annotated[Optional[str], typer.Option(
        autocompletion=complete_clusters, help="Cluster (preset or file) the profile takes everything else from, so that "
             "`--cluster PROFILE` works in comm and plan, e.g. dgx-h100.")] = None,
    num_ranks: Annotated[Optional[int], typer.Option(
        "--np", min=2, max=1024, help="Start the job: mpiexec -n NP (mpi, outside mpiexec); ranks for sim.")] = None,
    backend: Annotated[str, typer.Option(
        help="mpi: one process per rank; sim: threads (tests the tool, not the machine).")] = "mpi",
    min_size: Annotated[str, typer.Option("--min-size", "-b", help="Sweep start size.")] = "1K",
    max_size: Annotated[str, typer.Option("--max-size", "-e", help="Sweep end size.")] = "16M",
    step_factor: Annotated[int, typer.Option("--step-factor", "-f", min=2, max=2**20,
                                             help="Size multiplier between points.")] = 4,
    iters: Annotated[int, typer.Option("--iters", "-n", min=1, max=100_000,
                                       help="Timed calls per size (median kept).")] = 20,
    warmup: Annotated[int, typer.Option("--warmup", "-w", min=0, max=10_000,
                                        help="Untimed rounds first.")] = 3,
    jobs: Annotated[int, typer.Option(
        min=1, max=100, help="With --np: measure in this many separate MPI jobs and keep the median over "
                    "jobs (one job's memory layout can shift all its points alike).")] = 1,
    split: Annotated[str, typer.Option(
        help="Fit sizes below this and from it up separately (0: one line per collective).")] = "1M",
    ops: Annotated[Optional[list[str]], typer.Option(
        "--op", help="Collective to measure (repeatable); default all six. With --from: the "
        "collective of an output that names none (nor does its file name).")] = None,
    link_alpha_us: Annotated[Optional[float], typer.Option(
        min=0, callback=finite, help="Link alpha for the 'link model' column; default: the send_recv fit.")] = None,
    link_bandwidth_gbps: Annotated[Optional[float], typer.Option(
        min=0, callback=finite, help="Link GB/s for the 'link model' column; default: the send_recv fit.")] = None,
    timeout_s: Annotated[float, typer.Option(min=1, max=86400, callback=finite,
                                             help="Abort the job after this long.")] = 600.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
    sources: Annotated[Optional[list[str]], typer.Option(
        "--from", help="Fit nccl-tests output measured elsewhere instead of measuring here (a "
        "*_perf run's text, repeatable: one file per collective; - reads standard input).")] = None,
) -> None:
    """Measure all_reduce, all_gather, reduce_scatter, broadcast, send_recv and barrier; fit
    alpha-beta per collective and size range; print nccl-tests style tables; write a cluster
    profile."""
    from modelplan.comm.ops import Collective
    from modelplan.execute.calibrate import CALIBRATED, Sweep, size_sweep
    from modelplan.execute.spmd import SpmdBackend

    if sources:
        from modelplan.cli.calibrate_from import check_from_options

        check_from_options(ctx, sources, ops)
    try:
        backend_kind = SpmdBackend(backend)
    except ValueError:
        raise ModelplanError(f"--backend ({backend!r}) must be one of mpi, sim") from None
    try:
        collectives = tuple(Collective(op) for op in ops) if ops and not sources else CALIBRATED
    except ValueError as exc:
        raise ModelplanError(f"--op: {exc}; choose from {', '.join(CALIBRATED)}") from None
    if any(op not in CALIBRATED for op in collectives):
        raise ModelplanError(f"--op: calibrate measures {', '.join(CALIBRATED)}")
    if link_bandwidth_gbps is not None and link_bandwidth_gbps <= 0:
        raise ModelplanError(f"--link-bandwidth-gbps ({link_bandwidth_gbps}) must be > 0")
    top = parse_size(max_size, "--max-size")
    if top > MAX_BUFFER_BYTES:
        raise ModelplanError(f"--max-size ({max_size}) must be <= 1G: every rank holds buffers of "
                             "that size")
    bottom = parse_size(min_size, "--min-size")
    if not 8 <= bottom <= top:  # 8: one float64 item (execute.calibrate); size_sweep names its arguments
        raise ModelplanError(f"--min-size ({min_size}) must be >= 8 bytes and <= --max-size ({max_size})")
    sizes = size_sweep(bottom, top, step_factor)
    split_bytes = parse_size(split, "--split")
    if output is not None:
        from modelplan.export.files import check_one_stdout, check_writable

        check_writable(output, "--output")  # before measuring, not after
        check_one_stdout(output, json_out, "--output", "profile")
    if extends is not None:
        extends = _check_extends(extends)
    if sources:
        from modelplan.cli.calibrate_from import calibration_from

        _emit(calibration_from(sources, ops, split_bytes), output=output, extends=extends,
              json_out=json_out)
        return
    sweep = Sweep(sizes=sizes, collectives=collectives, iters=iters, warmup=warmup)
    report = dict(output=output, extends=extends, split_bytes=split_bytes, json_out=json_out,
                  link_alpha_us=link_alpha_us, link_bandwidth_gbps=link_bandwidth_gbps)
    from modelplan.execute.mpilaunch import inside_mpi_job

    if jobs > 1 and (backend_kind is SpmdBackend.SIM or num_ranks is None or inside_mpi_job()):
        raise ModelplanError(f"--jobs ({jobs}) starts its own MPI jobs: use it with --np outside "
                             "mpiexec (--backend mpi)")

    if backend_kind is SpmdBackend.SIM:
        from modelplan.execute.simcomm import run_spmd

        world_size = num_ranks if num_ranks is not None else 4
        if world_size < 2:
            raise ModelplanError(f"--np ({world_size}) must be >= 2 for calibrate")
        run = run_spmd(world_size, _rank_program, sweep, timeout_s=timeout_s)
        _report(*_measured(run), "sim", "modelplan simulator (threads)", f"median of {iters}",
                sweep, **report)
        return

    if not inside_mpi_job():
        if num_ranks is None:
            raise ModelplanError("calibrate --backend mpi runs in an MPI job: `mpiexec -n 4 "
                                 "python -m mpi4py -m modelplan calibrate ...`, or add --np 4")
        from modelplan.cli.mpirun import command_args, run_job

        if jobs == 1:
            raise typer.Exit(run_job(num_ranks, command_args(ctx, drop={"num_ranks"}), timeout_s))
        _report_jobs(ctx, num_ranks, jobs, timeout_s, sweep, report)
        return
    from modelplan.execute.mpicomm import exit_rank, load_mpi, run_spmd_mpi, share_from_root

    MPI = load_mpi()
    world_size = MPI.COMM_WORLD.Get_size()
    if world_size < 2:
        raise ModelplanError(f"calibrate needs at least 2 ranks, the job has {world_size}")
    run = run_spmd_mpi(world_size, _rank_program, sweep, timeout_s=timeout_s)
    code = 0
    if run is not None:  # rank 0 reports; the others wait for its exit code
        try:
            _report(*_measured(run), "mpi", MPI.Get_library_version().split(",")[0].strip(),
                    f"median of {iters}", sweep, **report)
        except ModelplanError as exc:
            typer.echo(f"error: {exc}", err=True)
            code = 2
    code = share_from_root(code)
    if code:
        exit_rank(code)  # a plain exit on every rank, not MPI_Abort


def _check_extends(ref: str) -> str:
    """The cluster to extend, loaded once now (a one-line error before measuring); a file is
    written as an absolute path so the profile works from any folder."""
    from modelplan.comm.clusters import load_cluster

    load_cluster(ref)
    path = Path(ref)
    return str(path.resolve()) if path.suffix.lower() in (".toml", ".json") or path.is_file() else ref


def _measured(run: Any) -> tuple[Any, int, str]:
    """(measurements, ranks, scope) of one job: medians of the slowest rank per point."""
    from modelplan.execute.calibrate import summarize

    hosts = {r["host"] for r in run.results}
    return (summarize([r["samples"] for r in run.results]), run.world_size,
            "intra" if len(hosts) == 1 else "inter")


def _report_jobs(ctx: typer.Context, num_ranks: int, jobs: int, timeout_s: float, sweep: Any,
                 report: dict) -> None:
    """--jobs K: K separate jobs print their measurements; the median over jobs is fitted here."""
    from modelplan.cli.mpirun import JobFailed, command_args, run_job_output
    from modelplan.execute.calibrate import combine_jobs
    from modelplan.execute.calibrate_jobs import read_job_output

    args = command_args(ctx, drop={"num_ranks", "jobs", "output", "extends", "json_out"})
    try:
        docs = [read_job_output(run_job_output(num_ranks, [*args, "--json"], timeout_s), f"calibrate job {i + 1}")
                for i in range(jobs)]
    except JobFailed as exc:  # its one-line reason is printed
        raise typer.Exit(exc.returncode) from None
    measured = combine_jobs([d[0] for d in docs])
    scope = "inter" if any(d[2] == "inter" for d in docs) else "intra"
    _report(measured, docs[0][1], scope, "mpi", docs[0][3],
            f"median over {jobs} jobs of medians of {sweep.iters}", sweep, **report)


def _report(measured: Any, world_size: int, scope: str, backend: str, library: str, detail: str,
            sweep: Any, *, output: Path | None, extends: str | None, split_bytes: int,
            json_out: bool, link_alpha_us: float | None, link_bandwidth_gbps: float | None) -> None:
    """Fit, write the profile, print the tables or the JSON document (rank 0)."""
    from modelplan.execute.calibrate_fit import fit_all

    hosts = "1 host" if scope == "intra" else "several hosts"
    source = (f"modelplan calibrate, {world_size} ranks on {hosts}, {library}, "
              f"{min(sweep.sizes)}-{max(sweep.sizes)} B, {detail}, {date.today().isoformat()}")
    cal = fit_all(measured, world_size, backend=backend, library=library, split_bytes=split_bytes,
                  scope=scope, source=source, link_alpha_us=link_alpha_us,
                  link_bandwidth_gbps=link_bandwidth_gbps)
    _emit(cal, output=output, extends=extends, json_out=json_out)


def _emit(cal: Any, *, output: Path | None, extends: str | None, json_out: bool) -> None:
    """Write the profile, print the tables or the JSON document."""
    from modelplan.execute.calibrate_profile import profile_toml
    from modelplan.export.files import write_text_atomic

    if output is not None:
        try:
            write_text_atomic(output, profile_toml(cal, extends))
        except ModelplanError as exc:
            raise ModelplanError(f"--output {exc}") from None
        if str(output) == "-":  # the profile is the output
            return
    if json_out:
        doc = {"schema_version": 1, "kind": "modelplan.calibrate", **cal.model_dump(mode="json")}
        doc["predictions"] = [
            {"op": m.op, "size_bytes": m.size_bytes, "time_s": m.time_s,
             "link_model_s": cal.link_predict_s(m), "fit_s": cal.predict_s(m)}
            for m in cal.measurements]
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(render(cal))
        if output is not None:
            typer.echo(f"\nwrote {output}")
