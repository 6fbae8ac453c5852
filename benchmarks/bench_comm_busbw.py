"""Model vs published nccl-tests bus bandwidth, one row per measurement, with the error.

Run: python benchmarks/bench_comm_busbw.py [--algo auto|nccl|ring]
Rows and sources: benchmarks/published_busbw.toml (from shared/reference/comm_hw.md §1.2).
--algo prices the rows that ran NCCL's own choice; rows with a pinned `algo` (NVLS off) keep it.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout uninstalled

from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.comm.cost import collective_cost, collective_time_s  # noqa: E402
from modelplan.comm.sizes import format_size, parse_size  # noqa: E402
from modelplan.comm.topology import cluster_links  # noqa: E402

TABLE = Path(__file__).with_name("published_busbw.toml")


def load_rows() -> list[dict]:
    """The published measurements."""
    with open(TABLE, "rb") as fh:
        return tomllib.load(fh)["row"]


def model_busbw(row: dict, algo: str = "auto") -> tuple[float, str]:
    """(busbw GB/s, algorithm) the model gives for one published row."""
    cluster = load_cluster(row["cluster"])
    if "inter_bandwidth_gbps" in row:
        inter = cluster.inter.model_copy(update={"bandwidth_gbps": row["inter_bandwidth_gbps"]})
        cluster = cluster.model_copy(update={"inter": inter})
    if "inter_protocols" in row:
        inter = cluster.inter.model_copy(update={"nccl_protocols": tuple(row["inter_protocols"])})
        cluster = cluster.model_copy(update={"inter": inter})
    cost = collective_cost(row["op"], parse_size(row["size"]), row["ranks"], None, cluster, algo)
    proto = getattr(cost, "protocol", "")
    return cost.busbw_gbps, cost.algo.value + (f"/{proto}" if proto else "")


def band(nbytes: int) -> str:
    """Size band of a message: small < 1 MiB <= medium <= 256 MiB < large."""
    return "small" if nbytes < 2**20 else "medium" if nbytes <= 2**28 else "large"


def band_summary(rows: list[tuple[dict, float]]) -> None:
    """Mean and max |error| per size band, in-sample and out-of-sample apart (all rows but the
    `outlier` ones)."""
    rows = [(r, e) for r, e in rows if not r.get("outlier")]
    print(f"{'band':<8} {'sample':<6} {'rows':>4} {'mean |err|':>10} {'max |err|':>9}  "
          "(small < 1 MiB <= medium <= 256 MiB < large; checked or not, outliers left out)")
    for b in ("small", "medium", "large"):
        for sample in ("out", "in"):
            errs = [abs(e) for r, e in rows if band(parse_size(r["size"])) == b and r.get("sample", "out") == sample]
            if errs:
                print(f"{b:<8} {sample:<6} {len(errs):>4} {sum(errs) / len(errs):>10.1%} {max(errs):>9.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--algo", default="auto")
    args = parser.parse_args()
    print(f"{'measurement':<48} {'size':>8} {'ranks':>5} {'published':>9} {'model':>8} "
          f"{'error':>7}  algo  (check)")
    errors, every = [], []
    for row in load_rows():
        model, algo = model_busbw(row, row.get("algo", args.algo))
        err = model / row["busbw_gbps"] - 1
        every.append((row, err))
        if row["check"]:
            errors.append(abs(err))
        mark = ("" if row["check"] else "  (not checked)") + ("  [in-sample]" if row.get("sample") == "in" else "")
        print(f"{row['label']:<48} {format_size(parse_size(row['size'])):>8} {row['ranks']:>5} "
              f"{row['busbw_gbps']:9.1f} {model:8.1f} {err:+7.1%}  {algo}{mark}")
    print(f"checked rows: {len(errors)}, max |error| {max(errors):.1%}, "
          f"mean |error| {sum(errors) / len(errors):.1%}")
    band_summary(every)

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
