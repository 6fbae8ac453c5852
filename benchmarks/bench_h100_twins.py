"""H100 runs against their A100 twins (issue 13, n18h100): is the FSDP1 stacks' H100 gap a rate,
a constant per FSDP unit, or overlap? A probe; nothing in modelplan uses it.

    python benchmarks/bench_h100_twins.py                 # twin pairs: published / predicted H100 speed-up
    python benchmarks/bench_h100_twins.py --units         # published - predicted, ms per FSDP unit and micro-batch
    python benchmarks/bench_h100_twins.py --interference 0.1 0.3 0.56
        # every run re-priced with the DP-overlap interference set to K on Hopper parts only
        # (persistent cuBLAS GEMMs run as two waves beside a NCCL kernel: pytorch/pytorch#143988)
    python benchmarks/bench_h100_twins.py --h100-clock 0.87      # one sustained clock for every H100 run
    python benchmarks/bench_h100_twins.py --drop-fitted-clock --interference 0.1 0.56
        # the same scan with the fitted sustained_clock_fraction of grand-teton-h100's part ignored

The helpers (pairing, ratios, per-unit residue) are `benchmarks/h100_twins.py`, tested in
tests/test_h100_twins.py; prices come from `bench_published_runs.price`.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from h100_twins import (A100_CLUSTERS, H100_CLUSTERS, microbatches, missing_ms_per_unit,  # noqa: E402
                        ratio_quotient, twin_pairs)

HOPPER_PREFIXES = ("H100", "H200")
"""Accelerator names whose cuBLAS GEMMs use persistent (one block per SM) schedules (pytorch/pytorch
#143988, #147966: "Newer matmul kernels, e.g. those targeting Hopper GPUs, sometime use a
'persistent' schedule")."""


def _layers(run: dict) -> int:
    from modelplan.specs.load import load_model

    return run["spec"]["layers"] if "spec" in run else load_model(run["model"]).layers


_HOPPER = {"k": None, "patched": False, "hopper": False}
"""The interference the patched pricing uses on Hopper parts (None: the cost model's)."""


def _patch_hopper_interference(k: float) -> None:
    """Price DP-overlap interference as `k` on Hopper parts (every other part keeps the cost model's)."""
    from modelplan.plan import evaluator_dp
    from modelplan.plan.parallel import dp_zero

    _HOPPER["k"] = k
    if _HOPPER["patched"]:
        return
    terms, exposure = evaluator_dp.DpPricing._dp_terms, dp_zero.dp_exposure

    def hopper_terms(self, *args, **kwargs):
        _HOPPER["hopper"] = self.cluster.accelerator.name.startswith(HOPPER_PREFIXES)
        return terms(self, *args, **kwargs)

    def hopper_exposure(zero, times, m, t_fwd, t_bwd, overlap, fraction, interference=0.0, backward_gathers=True,
                        gather_window_s=None):
        k_now = _HOPPER["k"] if _HOPPER["hopper"] and _HOPPER["k"] is not None else interference
        return exposure(zero, times, m, t_fwd, t_bwd, overlap, fraction, k_now, backward_gathers, gather_window_s)

    evaluator_dp.DpPricing._dp_terms = hopper_terms
    dp_zero.dp_exposure = hopper_exposure
    _HOPPER["patched"] = True


def _patch_clock(h100_clock: float | None, drop_fitted: bool) -> None:
    """H100 runs without a `hardware` clock get `h100_clock`; `drop_fitted` ignores the runs' own."""
    cluster_of = bench._cluster

    def patched(run: dict):
        hardware = dict(run.get("hardware", {}))
        fitted = hardware.pop("sustained_clock_fraction", None) if drop_fitted else hardware.get("sustained_clock_fraction")
        cluster = cluster_of({**run, "hardware": hardware})
        part_clock = cluster.accelerator.sustained_clock_fraction  # grand-teton-h100's part: the fitted 0.85
        if part_clock != 1.0 and drop_fitted:
            cluster = cluster.model_copy(update={"accelerator": cluster.accelerator.model_copy(
                update={"sustained_clock_fraction": 1.0})})
        elif part_clock != 1.0:
            fitted = part_clock
        if h100_clock is not None and fitted is None and cluster.accelerator.name.startswith("H100"):
            accelerator = cluster.accelerator.model_copy(update={"sustained_clock_fraction": h100_clock})
            cluster = cluster.model_copy(update={"accelerator": accelerator})
        return cluster

    bench._cluster = patched


def _mean(xs: list[float]) -> str:
    if not xs:
        return "   n=0"
    return f"n={len(xs):3d} mean |err| {100 * sum(abs(x) for x in xs) / len(xs):5.1f}% signed {100 * sum(xs) / len(xs):+6.1f}%"


def twins(runs: dict, rows: list[dict]) -> None:
    by_engine = defaultdict(list)
    print(f"{'A100 run':<42} {'H100 run':<42} {'pub':>5} {'pred':>5} {'pub/pred':>8}")
    for a, h in twin_pairs(runs, rows):
        pub, pred, q = ratio_quotient(runs, a, h)
        by_engine[a["engine"]].append(q)
        print(f"{a['id'][:42]:<42} {h['id'][:42]:<42} {pub:5.2f} {pred:5.2f} {q:8.3f}")
    for engine, qs in sorted(by_engine.items()):
        print(f"{engine:<10} pairs {len(qs):2d}  published / predicted H100 speed-up: mean {sum(qs) / len(qs):.3f},"
              f" range {min(qs):.3f} .. {max(qs):.3f}")


def units(runs: dict, rows: list[dict]) -> None:
    print(f"{'run':<46} {'GPU':<5} {'AC':<5} {'tok/mb':>7} {'m':>3} {'error':>7} {'ms/unit/mb':>10}")
    for r in sorted(rows, key=lambda r: (runs[r["id"]].get("cluster", ""), r["id"])):
        run = runs[r["id"]]
        if r["engine"] not in ("foundry", "fsdp") or "time_error" not in r:
            continue
        gpu = "H100" if run["cluster"] in H100_CLUSTERS else "A100" if run["cluster"] in A100_CLUSTERS else "?"
        m = microbatches(run)
        ms = missing_ms_per_unit(r["published_s"], r["predicted_s"], _layers(run), m)
        print(f"{r['id'][:46]:<46} {gpu:<5} {run.get('recompute', '-')[:5]:<5} {run['micro_batch'] * run['seq']:7d}"
              f" {m:3d} {100 * r['time_error']:+6.1f}% {ms:10.2f}")


def interference(runs_list: list[dict], ks: list[float | None], label: str = "") -> None:
    for k in ks:
        if k is not None:
            _patch_hopper_interference(k)
        rows = [bench.price(r) for r in runs_list]
        ok = [r for r in rows if bench._exact(r) and "time_error" in r]  # memory-only rows have no time
        print(f"== Hopper DP-overlap interference {'cost model' if k is None else k}{label}")
        for group, key in (("engine", "engine"), ("file", "file")):
            groups = defaultdict(list)
            for r in ok:
                groups[r[key]].append(r["time_error"])
            for name, errs in sorted(groups.items()):
                print(f"  {group} {name:<28} {_mean(errs)}")
        for split in ("fit", "holdout"):
            print(f"  split {split:<29} {_mean([r['time_error'] for r in ok if r['split'] == split])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", action="store_true", help="published - predicted per FSDP unit and micro-batch")
    parser.add_argument("--interference", type=float, nargs="+", metavar="K",
                        help="re-price with DP-overlap interference K on Hopper parts")
    parser.add_argument("--h100-clock", type=float, metavar="F",
                        help="sustained_clock_fraction F for H100 runs that do not set one")
    parser.add_argument("--drop-fitted-clock", action="store_true",
                        help="ignore the runs' own sustained_clock_fraction (torchtitan's fitted 0.85)")
    args = parser.parse_args()
    runs_list = bench.load_runs()
    runs = {r["id"]: r for r in runs_list}
    if args.h100_clock is not None or args.drop_fitted_clock:
        _patch_clock(args.h100_clock, args.drop_fitted_clock)
    if args.interference or args.h100_clock is not None or args.drop_fitted_clock:
        label = (f", H100 clock {args.h100_clock}" if args.h100_clock is not None else "") + \
                (", fitted clocks dropped" if args.drop_fitted_clock else "")
        interference(runs_list, args.interference or [None], label)
        return 0
    rows = [bench.price(r) for r in runs_list]
    if args.units:
        units(runs, rows)
    else:
        twins(runs, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
