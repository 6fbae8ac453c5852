"""Model vs published nccl-tests bus bandwidth, one row per measurement, with the error.

Run: python benchmarks/bench_comm_busbw.py [--algo auto|nccl|ring] [--no-harness]
Rows and sources: benchmarks/published_busbw.toml (from shared/reference/comm_hw.md §1.2).
--algo prices the rows that ran NCCL's own choice; rows with a pinned `algo` (NVLS off) keep it.

Harness: a row's `harness` names how it was timed. nccl-tests (the default) launches `iters`
(20) calls back to back and divides one wall-clock interval by them (src/common.cu BenchTime), so
the host's launch of each call overlaps the previous call's kernel and is not added. The
"torch-blocking" rows (stas00/ml-engineering network/benchmarks/all_reduce_bench.py) time each
call alone: barrier, record an event on an idle stream, dist.all_reduce, record, synchronize; the
interval then holds the host-side launch (ProcessGroupNCCL, ncclAllReduce enqueue, kernel launch)
as well as the collective. That per-call term has no published value: it is fitted here as the
mean measured-minus-model time of the harness's rows marked `fit_harness` (all in-sample) and
added to every row of that harness; --no-harness leaves it out.

Rows marked `outlier` (a measurement that contradicts itself) or `unmodelled = "<why>"` (a setup the
model cannot represent, e.g. a network plugin of unpublished latency) are printed with their error
but left out of the band and per-collective means.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout uninstalled

from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.comm.bandwidth import busbw_factor  # noqa: E402
from modelplan.comm.cost import CollectiveCost, collective_cost, collective_time_s  # noqa: E402
from modelplan.comm.ops import parse_collective  # noqa: E402
from modelplan.comm.sizes import format_size, parse_size  # noqa: E402
from modelplan.comm.topology import cluster_links  # noqa: E402

TABLE = Path(__file__).with_name("published_busbw.toml")


def load_rows() -> list[dict]:
    """The published measurements."""
    with open(TABLE, "rb") as fh:
        return tomllib.load(fh)["row"]


ROW_INTER = {"inter_bandwidth_gbps": "bandwidth_gbps", "inter_protocols": "nccl_protocols",
             "inter_net_latency_us": "nccl_net_latency_us"}
"""Row keys that override the preset's inter-node link, and the Link field each sets."""


def model_cost(row: dict, algo: str = "auto") -> CollectiveCost:
    """The model's cost of one published row (the preset with the row's link overrides)."""
    cluster = load_cluster(row["cluster"])
    update = {field: row[key] for key, field in ROW_INTER.items() if key in row}
    if update:
        cluster = cluster.model_copy(update={"inter": cluster.inter.model_copy(update=update)})
    # `ranks_per_node`: the group's ranks per node (NVLink domain) where the run says so; else fill nodes
    return collective_cost(row["op"], parse_size(row["size"]), row["ranks"], row.get("ranks_per_node"),
                           cluster, algo)


def model_busbw(row: dict, algo: str = "auto", harness_s: float = 0.0) -> tuple[float, str]:
    """(busbw GB/s, algorithm) the model gives for one published row, `harness_s` added to its
    time (the per-call term of the row's timing harness)."""
    cost = model_cost(row, algo)
    proto = getattr(cost, "protocol", "")
    busbw = cost.busbw_gbps * cost.time_s / (cost.time_s + harness_s) if cost.time_s else 0.0
    return busbw, cost.algo.value + (f"/{proto}" if proto else "")


def measured_time_s(row: dict) -> float:
    """The published row's time per call: size x busbw factor / busbw (nccl-tests PERFORMANCE.md)."""
    op = parse_collective(row["op"])
    return parse_size(row["size"]) * busbw_factor(op, row["ranks"]) / (row["busbw_gbps"] * 1e9)


def harness_terms(rows: list[dict], algo: str = "auto") -> dict[str, tuple[float, int]]:
    """Per harness: (seconds added to each call, rows fitted), the mean measured - model time of
    its `fit_harness` rows (which must be in-sample)."""
    gaps: dict[str, list[float]] = {}
    for row in rows:
        if row.get("fit_harness"):
            if row.get("sample") != "in":
                raise SystemExit(f"row '{row['label']}' {row['size']}: fit_harness needs sample = \"in\"")
            gap = measured_time_s(row) - model_cost(row, row.get("algo", algo)).time_s
            gaps.setdefault(row.get("harness", "nccl-tests"), []).append(gap)
    return {h: (max(0.0, sum(g) / len(g)), len(g)) for h, g in gaps.items()}


def band(nbytes: int) -> str:
    """Size band of a message: small < 1 MiB <= medium <= 256 MiB < large."""
    return "small" if nbytes < 2**20 else "medium" if nbytes <= 2**28 else "large"


def band_summary(rows: list[tuple[dict, float]]) -> None:
    """Mean and max |error| per size band, in-sample and out-of-sample apart (all rows but the
    `outlier` and `unmodelled` ones: a setup the model cannot represent, named in the row)."""
    left = sum(1 for r, _ in rows if r.get("outlier") or r.get("unmodelled"))
    rows = [(r, e) for r, e in rows if not (r.get("outlier") or r.get("unmodelled"))]
    print(f"{'band':<8} {'sample':<6} {'rows':>4} {'mean |err|':>10} {'max |err|':>9}  "
          f"(small < 1 MiB <= medium <= 256 MiB < large; checked or not; {left} outlier / "
          "unmodelled rows left out)")
    for b in ("small", "medium", "large"):
        for sample in ("out", "in"):
            errs = [abs(e) for r, e in rows if band(parse_size(r["size"])) == b and r.get("sample", "out") == sample]
            if errs:
                print(f"{b:<8} {sample:<6} {len(errs):>4} {sum(errs) / len(errs):>10.1%} {max(errs):>9.1%}")


def op_summary(rows: list[tuple[dict, float]]) -> None:
    """Mean and max |error| per collective (outlier and unmodelled rows left out)."""
    kept = [(r, e) for r, e in rows if not (r.get("outlier") or r.get("unmodelled"))]
    for op in dict.fromkeys(r["op"] for r, _ in kept):
        errs = [abs(e) for r, e in kept if r["op"] == op]
        print(f"{op:<16} {len(errs):>4} rows  mean |err| {sum(errs) / len(errs):6.1%}  max {max(errs):6.1%}")


def op_band_summary(rows: list[tuple[dict, float]]) -> None:
    """Mean and max |error| per collective and size band, out-of-sample and in-sample apart
    (outlier and unmodelled rows left out)."""
    kept = [(r, e) for r, e in rows if not (r.get("outlier") or r.get("unmodelled"))]
    print(f"{'collective':<16} {'band':<7} {'out rows':>8} {'mean':>7} {'max':>7}  "
          f"{'in rows':>7} {'mean':>7} {'max':>7}")
    for op in dict.fromkeys(r["op"] for r, _ in kept):
        for b in ("small", "medium", "large"):
            cells = []
            for sample in ("out", "in"):
                errs = [abs(e) for r, e in kept if r["op"] == op and band(parse_size(r["size"])) == b
                        and r.get("sample", "out") == sample]
                cells.append(f"{len(errs):>7} {sum(errs) / len(errs):>7.1%} {max(errs):>7.1%}" if errs
                             else f"{0:>7} {'-':>7} {'-':>7}")
            if any(not c.startswith(f"{0:>7} ") for c in cells):
                print(f"{op:<16} {b:<7} {cells[0]:>24}  {cells[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--algo", default="auto")
    parser.add_argument("--no-harness", action="store_true", help="leave out the fitted harness term")
    args = parser.parse_args()
    rows = load_rows()
    terms = {} if args.no_harness else harness_terms(rows, args.algo)
    for name, (term_s, n) in sorted(terms.items()):
        print(f"harness {name}: +{term_s * 1e6:.1f} us per call (fitted on {n} in-sample rows)")
    print(f"{'measurement':<48} {'size':>8} {'ranks':>5} {'published':>9} {'model':>8} "
          f"{'error':>7}  algo  (check)")
    errors, every = [], []
    for row in rows:
        harness_s = terms.get(row.get("harness", "nccl-tests"), (0.0, 0))[0]
        model, algo = model_busbw(row, row.get("algo", args.algo), harness_s)
        err = model / row["busbw_gbps"] - 1
        every.append((row, err))
        if row["check"]:
            errors.append(abs(err))
        mark = ("" if row["check"] else "  (not checked)") + ("  [in-sample]" if row.get("sample") == "in" else "")
        mark += "  [unmodelled]" if row.get("unmodelled") else ""
        print(f"{row['label']:<48} {format_size(parse_size(row['size'])):>8} {row['ranks']:>5} "
              f"{row['busbw_gbps']:9.1f} {model:8.1f} {err:+7.1%}  {algo}{mark}")
    print(f"checked rows: {len(errors)}, max |error| {max(errors):.1%}, "
          f"mean |error| {sum(errors) / len(errors):.1%}")
    band_summary(every)
    op_summary(every)
    op_band_summary(every)

    links = cluster_links(load_cluster("dgx-h100"))
    calls = 20000
    t0 = time.perf_counter()
    for i in range(calls):
        collective_time_s("all_reduce", 1024 + i, 64, 8, links)
    miss = (time.perf_counter() - t0) / calls
    t0 = time.perf_counter()
    for _ in range(calls):
        collective_time_s("all_reduce", 2**20, 64, 8, links)
    hit = (time.perf_counter() - t0) / calls
    print(f"collective_time_s (auto, 64 ranks): {miss * 1e6:.1f} us/call uncached, "
          f"{hit * 1e6:.2f} us/call repeated")


if __name__ == "__main__":
    main()
