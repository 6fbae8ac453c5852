"""`modelplan comm`: the cost model's answer for one collective, laid out like nccl-tests."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.options import complete_clusters, complete_words
from modelplan.specs.limits import MAX_RANKS

# nccl-tests type names and sizes (src/common.cu), plus the spellings ML people use
DTYPES = {
    "int8": ("int8", 1), "uint8": ("uint8", 1), "int32": ("int32", 4), "uint32": ("uint32", 4),
    "int64": ("int64", 8), "uint64": ("uint64", 8),
    "half": ("half", 2), "fp16": ("half", 2), "float16": ("half", 2),
    "float": ("float", 4), "fp32": ("float", 4), "float32": ("float", 4),
    "double": ("double", 8), "fp64": ("double", 8), "float64": ("double", 8),
    "bfloat16": ("bfloat16", 2), "bf16": ("bfloat16", 2),
    "f8e4m3": ("f8e4m3", 1), "fp8": ("f8e4m3", 1), "f8e5m2": ("f8e5m2", 1),
}


def _collective_names() -> list[str]:
    from modelplan.comm.ops import Collective

    return [c.value for c in Collective]


DEFAULT_MIN_SIZE, DEFAULT_MAX_SIZE, DEFAULT_STEP_FACTOR = "1K", "4G", 2
"""The sweep when neither --size nor its bounds are given (nccl-tests -b / -e / -f)."""


def _sizes(size, min_size, max_size, step_factor) -> list[int]:
    from modelplan.comm.sizes import parse_size
    from modelplan.errors import SpecError

    if size is not None:
        sweep = [flag for flag, value in (("--min-size", min_size), ("--max-size", max_size),
                                          ("--step-factor", step_factor)) if value is not None]
        if sweep:
            raise SpecError(f"--size gives one message size; {', '.join(sweep)} set a sweep: give one or the other")
        one = parse_size(size, "--size")
        if one == 0:
            raise SpecError(f"--size '{size}' must be > 0")
        return [one]
    min_size, max_size = min_size or DEFAULT_MIN_SIZE, max_size or DEFAULT_MAX_SIZE
    step_factor = DEFAULT_STEP_FACTOR if step_factor is None else step_factor
    lo, hi = parse_size(min_size, "--min-size"), parse_size(max_size, "--max-size")
    if lo == 0:
        raise SpecError(f"--min-size '{min_size}' must be > 0")
    if hi < lo:
        raise SpecError(f"--max-size ({hi} B) must be >= --min-size ({lo} B)")
    if step_factor < 2:
        raise SpecError(f"--step-factor ({step_factor}) must be >= 2")
    out = []
    while lo <= hi:
        out.append(lo)
        lo *= step_factor
    return out


def _round(op, nbytes: int, ranks: int, itemsize: int) -> int:
    """nccl-tests rounds AllGather/ReduceScatter/AllToAll sizes to ranks x itemsize blocks."""
    from modelplan.comm.ops import Collective

    unit = itemsize * ranks if op in (
        Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL) else itemsize
    return max(unit, nbytes // unit * unit)


def _time_us(t_us: float) -> str:
    return f"{t_us:8.2f}" if t_us < 1e5 else f"{t_us:8.0f}"


@app.command("comm")
@user_errors
def comm_cmd(
    collective: Annotated[str, typer.Argument(
        autocompletion=complete_words(_collective_names), help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv, "
             "barrier (nccl-tests spellings work too: allreduce, all-reduce, all_reduce_perf)")],
    ranks: Annotated[int, typer.Option("--ranks", "-n", max=MAX_RANKS, help="Ranks (GPUs) in the group.")],
    cluster: Annotated[str, typer.Option(
        "--cluster", "-c", help="Cluster preset (`modelplan presets`), TOML file, or - for "
                                "standard input.", autocompletion=complete_clusters)],
    size: Annotated[Optional[str], typer.Option(
        "--size", "-s", help="One message size, e.g. 256M (binary), 8GB (SI), 4096.")] = None,
    min_size: Annotated[Optional[str], typer.Option(
        "--min-size", "-b", help=f"Sweep start size [default: {DEFAULT_MIN_SIZE}].", show_default=False)] = None,
    max_size: Annotated[Optional[str], typer.Option(
        "--max-size", "-e", help=f"Sweep end size [default: {DEFAULT_MAX_SIZE}].", show_default=False)] = None,
    step_factor: Annotated[Optional[int], typer.Option(
        "--step-factor", "-f", help=f"Multiply the size by this between rows [default: {DEFAULT_STEP_FACTOR}].",
        show_default=False)] = None,
    algo: Annotated[str, typer.Option(
        help="auto (NVIDIA: NCCL's tuning.cc pick; others: fastest modelled), nccl (fastest NCCL "
             "runs), or one algorithm: ring, tree, nvls, pat, binomial, recursive_doubling, "
             "halving_doubling, hierarchical, pairwise, direct, dissemination, fitted.")] = "auto",
    dtype: Annotated[str, typer.Option(
        "--dtype", "-d", help="Element type for the count column (float, half, bf16, fp8, ...).")] = "float",
    ranks_per_node: Annotated[Optional[int], typer.Option(
        help="Group ranks on one node (default: fill nodes).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
) -> None:
    """Alpha-beta time, algbw and busbw of one collective over a sweep of sizes (nccl-tests layout)."""
    from modelplan.comm.clusters import load_cluster
    from modelplan.comm.cost import collective_cost
    from modelplan.comm.ops import Algo, Collective, parse_algo, parse_collective
    from modelplan.comm.topology import cluster_links, group_shape
    from modelplan.errors import SpecError

    op = parse_collective(collective)
    algo_name = parse_algo(algo)
    if ranks < 2:
        raise SpecError(f"--ranks ({ranks}) must be >= 2 (one rank does not communicate)")
    if dtype.lower() not in DTYPES:
        raise SpecError(f"--dtype '{dtype}' is unknown (one of {', '.join(sorted(DTYPES))})")
    type_name, itemsize = DTYPES[dtype.lower()]
    if op is Collective.BARRIER and (size, min_size, max_size) != (None, None, None):
        from modelplan.cli.app import print_warnings

        print_warnings(["barrier moves no data: --size / --min-size / --max-size have no effect"])
    spec = load_cluster(cluster)
    links = cluster_links(spec)
    shape = group_shape(ranks, ranks_per_node, spec.domain_gpus, spec.domains)
    sizes = [0] if op is Collective.BARRIER else [
        _round(op, s, ranks, itemsize) for s in _sizes(size, min_size, max_size, step_factor)]
    costs = [collective_cost(op, s, ranks, shape.ranks_per_node, links, algo_name) for s in sizes]
    rooted = op in (Collective.BROADCAST, Collective.REDUCE)
    redop = "sum" if op in (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.REDUCE) else "none"

    if json_out:
        doc = {
            "schema_version": 1, "kind": "modelplan.comm", "collective": op.value, "ranks": ranks, "ranks_per_node": shape.ranks_per_node,
            "nodes": shape.nodes, "cluster": spec.name, "algo": algo_name.value,
            "dtype": type_name, "model": "alpha-beta",
            "rows": [
                {"size_bytes": c.nbytes, "count": c.nbytes // itemsize, "time_us": c.time_s * 1e6,
                 "algbw_gbps": c.algbw_gbps, "busbw_gbps": c.busbw_gbps, "algo": c.algo.value,
                 "steps": c.steps, "bytes_sent_per_rank": c.bytes_sent_per_rank,
                 "bytes_received_per_rank": c.bytes_received_per_rank,
                 "inter_node_bytes_per_rank": c.inter_node_bytes_per_rank, "links": list(c.links)}
                for c in costs
            ],
        }
        typer.echo(json.dumps(doc, indent=2))
        return

    intra, inter = spec.intra, spec.inter
    typer.echo(f"# modelplan comm: {op.value}, {ranks} ranks = {shape.nodes} node(s) x "
               f"{shape.ranks_per_node} ranks/node on {spec.name} ({spec.accelerator.name})")
    typer.echo(f"#   intra: {intra.name}, {intra.bandwidth_gbps:g} GB/s x {intra.efficiency:g} "
               f"= {intra.bandwidth_gbps * intra.efficiency:.1f} GB/s, {intra.latency_us:g} us/hop")
    if shape.nodes > 1:
        typer.echo(f"#   inter: {inter.name}, {inter.bandwidth_gbps:g} GB/s x {inter.efficiency:g} "
                   f"= {inter.bandwidth_gbps * inter.efficiency:.1f} GB/s per GPU, "
                   f"{inter.latency_us:g} us/hop")
    typer.echo(f"#   call latency {spec.call_latency_us:g} us; algo {algo_name.value}; "
               "alpha-beta model, not a measurement")
    if links.nccl_arch:
        typer.echo(f"#   ring/tree/nvls/pat priced by NCCL's tuning.cc model ({links.nccl_arch} constants, "
                   "LL / LL128 / Simple), pick of least predicted time")
    fitted = [f for f in spec.collective_fits if f.op == op.value]
    if any(c.algo is Algo.FITTED for c in costs):  # Cluster.collective_fits (calibrate's profile)
        source = next((f.source for f in fitted if f.source), "")
        typer.echo("#   rows marked 'fitted': the cluster's measured collective_fits, time = alpha + size x "
                   "busbw factor / busbw" + (f" ({source})" if source else ""))
    typer.echo("#")
    typer.echo(f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>4}  "
               f"{'time':>8}  {'algbw':>7}  {'busbw':>7}  algo/protocol")
    typer.echo(f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>4}  "
               f"{'(us)':>8}  {'(GB/s)':>7}  {'(GB/s)':>7}")
    for c in costs:
        typer.echo(f"  {c.nbytes:>10}  {c.nbytes // itemsize:>12}  {type_name:>8}  {redop:>6}  "
                   f"{0 if rooted else -1:>4}  {_time_us(c.time_s * 1e6)}  {c.algbw_gbps:7.2f}  "
                   f"{c.busbw_gbps:7.2f}  {c.algo.value}{'/' + c.protocol if c.protocol else ''}")
