"""nccl-tests output read back as measurements (`modelplan calibrate --from all_reduce.txt`).

What a `*_perf` binary of NVIDIA/nccl-tests prints (src/common.cu; doc/PERFORMANCE.md):

    # Collective test starting: all_reduce_perf          (recent releases only)
    # nThread 1 nGpus 1 minBytes 8 maxBytes ... warmup iters: 5 iters: 20 ...
    #  Rank  0 Group  0 Pid  4011 on   node-01 device  0 [0x18] NVIDIA H100 80GB HBM3
    ...
    #       size   count   type  redop  root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
               8       2  float    sum    -1  37.95   0.00   0.00      0  36.46   0.00   0.00      0
    # Avg bus bandwidth    : 124.391

A data row ends in the out-of-place and the in-place (time us, algbw, busbw, #wrong) groups,
whatever columns precede them (releases before 2.10 print no root column); the out-of-place
time is the one read. `size` is nccl-tests' size (the whole output of an AllGather, the whole
input of a ReduceScatter), as `Measurement.size_bytes` is. The collective comes from the
`Collective test starting` line, else from the file name (`all_reduce_perf.txt`), else `op`; the
ranks and hosts from the `# Rank` lines. A row that is not numbers, a time that is not a
positive finite number, or a file without a data row is one ModelplanError naming the file and
its line.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import NamedTuple

from modelplan.comm.ops import Collective, parse_collective
from modelplan.errors import ModelplanError, SpecError
from modelplan.execute.calibrate import Measurement

_TEST_LINE = re.compile(r"Collective test starting:\s*(\S+)")
_RANK_LINE = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")
"""`#  Rank  3 Group  0 Pid  4011 on node-01 device  3 [...]` (releases before 2.11: no Group)."""
_ITERS = re.compile(r"\biters:\s*(\d+)")
_VERSION = re.compile(r"NCCL version\s+(\S+)")  # NCCL_DEBUG=INFO or WARN's banner
_LIBRARY_CODE = re.compile(r"nccl-library=(\d+)")  # `# nccl-tests version 2.18.3 nccl-headers=... nccl-library=23003`
_RUN_HEADER = re.compile(r"^#\s*nThread\s+\d+", re.M)  # one per run (src/common.cu)
_MPI_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")  # Open MPI --tag-output
_FILE_OPS = ("reduce_scatter", "all_reduce", "all_gather", "alltoall", "all_to_all", "broadcast",
             "sendrecv", "send_recv", "reduce")
"""Collective names a file name may hold, longest first (all_reduce before reduce)."""
_GROUP = 4  # time, algbw, busbw, #wrong: one out-of-place or in-place group of a row


class NcclTestsRun(NamedTuple):
    """One nccl-tests output: the collective, its points, ranks, scope and NCCL version."""

    op: Collective
    measurements: tuple[Measurement, ...]
    ranks: int
    scope: str
    library: str


def _library(text: str) -> str:
    version = _VERSION.search(text)
    if version:
        return f"NCCL {version.group(1)}"
    code = _LIBRARY_CODE.search(text)
    if code and int(code.group(1)) >= 20900:  # NCCL_VERSION_CODE = major*10000 + minor*100 + patch (nccl.h, 2.9 on)
        n = int(code.group(1))
        return f"NCCL {n // 10000}.{n % 10000 // 100}.{n % 100}"
    return "NCCL (version not printed)"


def _op_from_name(name: str) -> Collective | None:
    squashed = name.lower().replace("-", "_")
    for candidate in _FILE_OPS:
        if candidate in squashed or candidate.replace("_", "") in squashed.replace("_", ""):
            return parse_collective(candidate)
    return None


def _collective(text: str, where: str, file_name: str, op: Collective | None) -> Collective:
    match = _TEST_LINE.search(text)
    if match:
        try:
            named = parse_collective(match.group(1))
        except SpecError:
            raise ModelplanError(f"{where}: {match.group(1)}: modelplan has no cost model for this "
                                 "nccl-tests collective") from None
        if op is not None and op is not named:
            raise ModelplanError(f"{where}: --op {op} contradicts the output's own "
                                 f"'Collective test starting: {match.group(1)}'")
        return named
    if op is not None:
        return op
    named = _op_from_name(file_name)
    if named is None:
        raise ModelplanError(f"{where}: no 'Collective test starting' line and no collective in the "
                             "file name (all_reduce_perf.txt, ...): name it with --op")
    return named


def _row(tokens: list[str], where: str, lineno: int) -> tuple[int, int, float] | None:
    """(size, count, out-of-place time in s) of a data row; None for a line that is not one."""
    if len(tokens) < 3 + 2 * _GROUP or not (tokens[0].isdigit() and tokens[1].isdigit()):
        return None  # not `size count type ...`: another tool's line (mpirun, NCCL_DEBUG, ...)
    field = tokens[-2 * _GROUP]  # the out-of-place time (us)
    try:
        time_us = float(field)
    except ValueError:
        raise ModelplanError(f"{where}: line {lineno}: out-of-place time: expected a number of "
                             f"microseconds, got {field!r}") from None
    if not math.isfinite(time_us) or time_us <= 0:
        raise ModelplanError(f"{where}: line {lineno}: out-of-place time ({field}) must be a "
                             "positive finite number of microseconds")
    return int(tokens[0]), int(tokens[1]), time_us * 1e-6


def read_nccl_tests(text: str, where: str, file_name: str = "",
                    op: Collective | None = None) -> NcclTestsRun:
    """The points of one nccl-tests output (see the module docstring)."""
    text = "\n".join(_MPI_PREFIX.sub("", line) for line in text.splitlines())
    runs = len(_RUN_HEADER.findall(text))
    if runs > 1:
        raise ModelplanError(f"{where}: holds {runs} nccl-tests runs (one '# nThread ...' header "
                             "each): give each run its own file")
    iters = _ITERS.search(text)
    hosts: dict[int, str] = {}
    rows: dict[int, list[tuple[int, float]]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        rank = _RANK_LINE.match(line)
        if rank:
            hosts[int(rank.group(1))] = rank.group(2)
            continue
        if line.startswith("#"):
            continue
        row = _row(line.split(), where, lineno)
        if row is not None:
            rows.setdefault(row[0], []).append((row[1], row[2]))
    if not rows:
        raise ModelplanError(f"{where}: no nccl-tests data row (size count type ... time algbw "
                             "busbw ...) in it" if text.strip() else f"{where}: is empty")
    collective = _collective(text, where, file_name, op)
    if len(hosts) < 2:
        raise ModelplanError(f"{where}: the output lists {len(hosts)} '#  Rank N Group G Pid P on "
                             "HOST device D' line(s): calibrate needs the header of a run on at "
                             "least 2 ranks")
    repeats = int(iters.group(1)) if iters else 1
    points = tuple(
        Measurement(op=collective, size_bytes=size, count=same[0][0],
                    time_s=statistics.median(t for _, t in same), repeats=repeats * len(same))
        for size, same in sorted(rows.items()))
    return NcclTestsRun(collective, points, len(hosts),
                        "intra" if len(set(hosts.values())) == 1 else "inter", _library(text))


def merge_runs(runs: list[tuple[str, NcclTestsRun]]) -> tuple[tuple[Measurement, ...], int, str, str]:
    """Several outputs (one per collective) as one calibration: the same ranks and scope."""
    first_where, first = runs[0]
    seen: dict[Collective, str] = {}
    for where, run in runs:
        if (run.ranks, run.scope) != (first.ranks, first.scope):
            raise ModelplanError(f"{where}: {run.ranks} ranks ({run.scope}) but {first_where} has "
                                 f"{first.ranks} ranks ({first.scope}): one profile holds one "
                                 "group size and scope; run calibrate once per group")
        if run.op in seen:
            raise ModelplanError(f"{where}: a second {run.op} output (the first: {seen[run.op]})")
        seen[run.op] = where
    libraries = dict.fromkeys(run.library for _, run in runs)
    return (tuple(m for _, run in runs for m in run.measurements), first.ranks, first.scope,
            ", ".join(libraries))
