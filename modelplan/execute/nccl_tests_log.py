"""Read an nccl-tests run (the text `all_reduce_perf` and friends print) into calibrate's points.

nccl-tests (NVIDIA/nccl-tests src/common.cu) prints a header, one `#  Rank  r Group g Pid p on
HOST device d [bus] NAME` line per rank, then one row per size:

    size count type redop [root] time algbw busbw #wrong  time algbw busbw #wrong
         (B) (elements)          (us) (GB/s)(GB/s)         in-place ...

The first time column is out-of-place (the one nccl-tests' PERFORMANCE.md and the published rows
quote), in microseconds, an average over `iters` calls. `root` is absent before nccl-tests 2.10; a
launcher may prefix each line (`0: `, `[1,0]<stdout>:`). The collective comes from the
`# Collective test starting: X_perf` line (nccl-tests >= 2.13) or, failing that, from the file
name (`all_reduce_perf.log`). The group size is the number of rank lines; where a log elides
them (`...`) it is solved from busbw / algbw, the operation's nccl-tests factor
(PERFORMANCE.md: AllReduce 2(p-1)/p, AllGather / ReduceScatter / AlltoAll (p-1)/p).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from modelplan.comm.ops import Collective, parse_collective
from modelplan.errors import ModelplanError
from modelplan.execute.calibrate import Measurement

_START = re.compile(r"#\s*Collective test starting:\s*(\w+)")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)")
_ITERS = re.compile(r"warmup iters:\s*\d+\s+iters:\s*(\d+)")  # timed calls, not the warm-up
_VERSION = re.compile(r"NCCL version\s+(\S+)")
# size count type redop [root] time algbw busbw: the out-of-place half of a row, after any prefix
_ROW = re.compile(r"(?:^|[\s:>])(\d+)\s+(\d+)\s+([a-z]\w*)\s+([a-z]\w*)\s+(?:(-?\d+)\s+)?"
                  r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s")
_FILE_OP = re.compile(r"(?:^|[^a-z_])(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|"
                      r"sendrecv)_perf")
"""An nccl-tests binary's name in a file name (reduce_perf only where not part of all_reduce_perf)."""


class NcclTestsRun(NamedTuple):
    """One nccl-tests run: its collective, group, hosts and out-of-place points."""

    op: Collective
    ranks: int
    hosts: frozenset[str]
    """Host names on the rank lines the log prints (empty without any)."""
    library: str
    """'NCCL <version>' where the log prints it, else 'NCCL'."""
    points: tuple[Measurement, ...]


def _op_of(text: str, name: str) -> Collective:
    found = _START.search(text)
    if found:
        return parse_collective(found.group(1).removesuffix("_mpi"))
    stem = name.rsplit("/", 1)[-1].lower().replace("-", "_")
    hits = sorted(set(_FILE_OP.findall(stem)))
    if len(hits) != 1:
        raise ModelplanError(f"{name}: cannot tell the collective: no '# Collective test starting' "
                             "line and the file name names no nccl-tests binary (e.g. all_reduce_perf.log)")
    return parse_collective(hits[0])


def _ranks_from_ratio(op: Collective, rows: list[tuple[int, float, float, float]], name: str) -> int:
    """p solved from busbw / algbw of the row with the largest algbw (most significant digits)."""
    if op not in (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER,
                  Collective.ALL_TO_ALL):
        raise ModelplanError(f"{name}: no '#  Rank' lines, and {op.value}'s busbw factor does not "
                             "give the group size")
    _, _, algbw, busbw = max(rows, key=lambda r: r[2])
    ratio = busbw / algbw if algbw else 0.0
    top = 2.0 if op is Collective.ALL_REDUCE else 1.0
    if not 0 < ratio < top:
        raise ModelplanError(f"{name}: no '#  Rank' lines, and busbw / algbw = {ratio:.3f} gives no "
                             "group size")
    p_real = top / (top - ratio)  # ratio = top (p-1)/p; the log's 2 decimals leave ~0.2 rank at p = 128
    p = round(p_real)
    if p < 2 or abs(p_real - p) > 0.25:
        raise ModelplanError(f"{name}: no '#  Rank' lines, and busbw / algbw = {ratio:.3f} fits no "
                             "whole group size")
    return p


def parse_nccl_tests(text: str, name: str = "nccl-tests log") -> NcclTestsRun:
    """The out-of-place points of one nccl-tests run (sizes of 0 bytes left out)."""
    op = _op_of(text, name)
    ranks: dict[int, str] = {}
    rows: list[tuple[int, float, float, float]] = []
    counts: dict[int, int] = {}
    iters = None
    for line in text.splitlines():
        if (m := _RANK.search(line)) is not None:
            ranks[int(m.group(1))] = m.group(2)
            continue
        if iters is None and (m := _ITERS.search(line)) is not None:
            iters = int(m.group(1))
        if line.lstrip().startswith("#"):
            continue
        if (m := _ROW.search(line + " ")) is not None:
            size, time_us = int(m.group(1)), float(m.group(6))
            if size and time_us > 0:
                rows.append((size, time_us, float(m.group(7)), float(m.group(8))))
                counts[size] = int(m.group(2))
    if not rows:
        raise ModelplanError(f"{name}: no nccl-tests result rows (size count type redop ... time algbw busbw)")
    sizes = [r[0] for r in rows]
    if len(set(sizes)) != len(sizes):
        raise ModelplanError(f"{name}: size {next(s for s in sizes if sizes.count(s) > 1)} appears twice: "
                             "one nccl-tests run per file")
    p = max(ranks) + 1 if ranks and len(ranks) == max(ranks) + 1 else _ranks_from_ratio(op, rows, name)
    if p < 2:
        raise ModelplanError(f"{name}: {p} rank: calibrate needs at least 2")
    version = _VERSION.search(text)
    points = tuple(Measurement(op=op, size_bytes=size, count=counts[size], time_s=time_us * 1e-6,
                               repeats=iters or 1) for size, time_us, _, _ in rows)
    hosts = frozenset(ranks.values())
    return NcclTestsRun(op, p, hosts, f"NCCL {version.group(1)}" if version else "NCCL", points)


def merge_runs(runs: list[tuple[str, NcclTestsRun]]) -> tuple[tuple[Measurement, ...], int, frozenset[str], str]:
    """(points, ranks, hosts, library) of several runs of one group: one run per collective, all
    on the same number of ranks; hosts: every host name their rank lines print."""
    if not runs:
        raise ModelplanError("--from-nccl-tests: no log given")
    (first_name, first), *rest = runs
    seen = {first.op: first_name}
    for name, run in rest:
        if run.ranks != first.ranks:
            raise ModelplanError(f"{name}: {run.ranks} ranks, but {first_name} has {first.ranks}: "
                                 "one profile fits one group size")
        if run.op in seen:
            raise ModelplanError(f"{name}: a second {run.op.value} run (the first is {seen[run.op]})")
        seen[run.op] = name
    hosts = frozenset().union(*(run.hosts for _, run in runs))
    libraries = sorted({run.library for _, run in runs})
    return (tuple(m for _, run in runs for m in run.points), first.ranks, hosts, ", ".join(libraries))
