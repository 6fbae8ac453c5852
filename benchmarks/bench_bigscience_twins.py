"""The BigScience BLOOM-176B tuning rows as like-for-like twins (issue 13, n20dspipe).

A probe, not a model: nothing in modelplan uses it. It prices the 18 `bigscience_tr11pre_*` rows of
published_runs_extra.toml with bench_published_runs' own pricing and prints the figures of the
section "n20dspipe" of published_runs_model.md.

1. `--rows`: each row's published and predicted seconds, the predicted terms, and per 1F1B slot
   (DeepSpeed TrainSchedule: m + pp - 1 slots, m = global batch / (dp x micro-batch)).
2. `--mbs`: the micro-batch twins (same shape, layout and batch; MBS 1 vs 4, and the MBS 2 rows):
   published and predicted time per slot solved as a + c x micro_batch, a per micro-batch and c per
   sample, each also per transformer layer of a stage (layers / pp). Includes the chronicle's
   micro-batch series that are not bench rows (`CHRONICLE_MBS`).
3. `--heads`: the chronicle's NHEADS tables (seconds per iteration against heads at one width),
   with the local heads, head dim and b*np the fused softmax rule of that code reads.

    python benchmarks/bench_bigscience_twins.py [--rows] [--mbs] [--heads]   (all without flags)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.plan.estimate import estimate_split  # noqa: E402
from modelplan.specs.load import model_from_dict  # noqa: E402

PREFIX = "bigscience_tr11pre_"
SOURCE = "bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md (59a90ee)"

# (label, layers, tp, pp, dp, global batch, {micro_batch: sec/it}) read from SOURCE, tables not in the bench
CHRONICLE_MBS = [
    ("h14336 l72 dp8 tp8 pp6 (02-21, '48 node contenders')", 72, 8, 6, 8, 2048, {1: 139.82, 2: 131.02, 4: 121.48}),
    ("h14336 l72 dp4 tp8 pp12 (02-21, '48 node contenders')", 72, 8, 12, 4, 2048, {1: 143.31, 2: 134.02, 4: 123.69, 8: 129.26}),
    ("h14336 l80 dp4 tp8 pp10 (02-20, 'fastest 3D topology', h14400)", 80, 8, 10, 4, 2048, {1: 221.21, 2: 207.92, 4: 208.18, 8: 229.69}),
    ("h13824 l80 dp4 tp8 pp10 (02-20, 'tile and wave quantization')", 80, 8, 10, 4, 2048, {1: 160.29, 2: 151.07, 4: 147.43, 8: 152.51}),
    ("h13824 l78 dp8 tp4 pp12 (02-26, 'Another round of NHEADS')", 78, 4, 12, 8, 2048, {1: 148.24, 2: 103.51, 4: 106.72}),
    ("h14336 l72 dp24 tp8 pp2 (02-25, 'GBS Variations')", 72, 8, 2, 24, 2016, {1: 145.45, 2: 136.13}),
    ("h14336 l72 dp12 tp8 pp4 (02-25, 'GBS Variations')", 72, 8, 4, 12, 2016, {2: 125.52, 4: 114.81}),
]

# (hidden, tp, micro_batch, {heads: sec/it}) from SOURCE's 'NHEADs comparison' and 'Another round of NHEADS'
CHRONICLE_HEADS = [
    (14336, 8, 4, {16: 121.03, 32: 124.01, 64: 120.18, 112: 138.72, 128: 124.89, 256: 132.85}),
    (13824, 8, 4, {64: 121.28, 96: 124.75, 128: 162.72}),
    (13312, 8, 4, {64: 122.93, 128: 129.17}),
    (12288, 8, 4, {64: 122.96, 96: 145.40, 128: 129.42}),
    (13824, 4, 2, {64: 103.51, 96: 107.12, 128: 147.41}),
    (13824, 4, 4, {64: 106.72, 96: 110.31, 128: 153.90}),
    (14336, 4, 2, {64: 110.42, 128: 114.02}),
    (14336, 4, 2, {64: 102.03, 112: 104.50, 128: 105.89}),  # 70 layers, 02-28
    (13312, 4, 2, {64: 104.45, 104: 123.71, 128: 108.78}),  # 82 layers, 02-28
]


def _slots(run: dict) -> int:
    """1F1B slots of DeepSpeed's TrainSchedule: m + pp - 1."""
    return run["global_batch"] // (run["dp"] * run["micro_batch"]) + run["pp"] - 1


def _estimate(run: dict):
    spec = model_from_dict(dict(run["spec"]), run["id"])
    return estimate_split(spec, bench._training(run), bench._plan(run), bench._cluster(run), world_size=run["gpus"])


def rows(runs: list[dict]) -> dict[str, float]:
    """Print every row's terms; return predicted seconds by id."""
    print(f"{'row':44s} {'pub s':>7s} {'pred s':>7s} {'err':>6s} {'slots':>5s} {'pub/slot':>8s} {'pred/slot':>9s}"
          "  compute recomp  tp    pp    bubble dp")
    out = {}
    for run in runs:
        s = _estimate(run).step
        pub, n = run["reported"]["iteration_time_s"], _slots(run)
        out[run["id"]] = s.step_time_s
        print(f"{run['id'][len(PREFIX):]:44s} {pub:7.2f} {s.step_time_s:7.2f} {100 * (s.step_time_s / pub - 1):+5.1f}% "
              f"{n:5d} {pub / n:8.3f} {s.step_time_s / n:9.3f}  {s.compute_s:6.2f} {s.recompute_s:6.2f} "
              f"{s.tp_comm_s:5.2f} {s.pp_comm_s:5.2f} {s.bubble_s:6.2f} {s.dp_comm_s:5.2f}")
    return out


def _solve(t1: float, n1: int, b1: int, t2: float, n2: int, b2: int) -> tuple[float, float]:
    """a, c of time per slot = a + c x micro_batch through two rows."""
    y1, y2 = t1 / n1, t2 / n2
    c = (y2 - y1) / (b2 - b1)
    return y1 - c * b1, c


def mbs(runs: list[dict], predicted: dict[str, float]) -> None:
    """The micro-batch twins: a per micro-batch, c per sample (per slot and per layer of a stage)."""
    by_id = {r["id"]: r for r in runs}
    print("bench twins (h14336 l72 tp8, MBS 1 vs 4; seconds per slot = a + c x mbs; per layer = / (layers / pp)):")
    for one, four in (("h14336_l72_dp8pp6_mbs1", "h14336_l72_dp8pp6_mbs4"), ("h14336_l72_dp4pp12_mbs1", "h14336_l72_dp4pp12_mbs4")):
        r1, r4 = by_id[PREFIX + one], by_id[PREFIX + four]
        per = r1["spec"]["layers"] / r1["pp"]
        for label, t1, t4 in (("published", r1["reported"]["iteration_time_s"], r4["reported"]["iteration_time_s"]),
                              ("predicted", predicted[r1["id"]], predicted[r4["id"]])):
            a, c = _solve(t1, _slots(r1), 1, t4, _slots(r4), 4)
            print(f"  dp{r1['dp']} pp{r1['pp']} {label}: a {1e3 * a:6.1f} ms ({1e3 * a / per:5.2f} ms/layer), "
                  f"c {1e3 * c:6.1f} ms ({1e3 * c / per:5.2f} ms/layer)")
    print(f"chronicle series ({SOURCE}); per micro-batch a and per sample c from the two smallest micro-batches,")
    print("  then the others' published slot time against a + c x mbs:")
    for label, layers, _tp, pp, dp, gbs, times in CHRONICLE_MBS:
        slots = {b: gbs // (dp * b) + pp - 1 for b in times}
        (b1, t1), (b2, t2) = sorted(times.items())[:2]
        a, c = _solve(t1, slots[b1], b1, t2, slots[b2], b2)
        per = layers / pp
        rest = ", ".join(f"mbs {b}: {t / slots[b]:.3f} s/slot vs {a + c * b:.3f}" for b, t in sorted(times.items())[2:])
        print(f"  {label}: slot s " + " ".join(f"mbs{b} {t / slots[b]:.3f}" for b, t in sorted(times.items()))
              + f"; a {1e3 * a / per:6.2f} ms/layer, c {1e3 * c / per:5.2f} ms/layer" + (f"; {rest}" if rest else ""))


def heads() -> None:
    """The NHEADS tables: seconds per iteration by heads, with local heads, head dim and b*np."""
    print(f"NHEADS tables ({SOURCE}); fused softmax rule of bigscience Megatron-DeepSpeed 541b967f")
    print("  (megatron/model/fused_softmax.py is_kernel_available: 16 < sq <= 2048, sk % 4, b*np % 4, causal")
    print("  b*np % batch_per_block (4 at sk 2048)); the launch passed --abort-on-unmet-fused-kernel-constraints:")
    for hidden, tp, mb, times in CHRONICLE_HEADS:
        base = min(times.values())
        cells = []
        for h, t in sorted(times.items()):
            local = h // tp
            cells.append(f"{h} heads (np {local}, d {hidden // h}, b*np {mb * local}{'' if mb * local % 4 == 0 else ' FAILS'}): "
                         f"{t:.2f} s ({100 * (t / base - 1):+.1f} %)")
        print(f"  h{hidden} tp{tp} mbs{mb}: " + "; ".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("rows", "mbs", "heads"):
        parser.add_argument(f"--{flag}", action="store_true")
    args = parser.parse_args()
    everything = not (args.rows or args.mbs or args.heads)
    runs = [r for r in bench.load_runs() if r["id"].startswith(PREFIX)]
    predicted = rows(runs) if everything or args.rows or args.mbs else {}
    if everything or args.mbs:
        mbs(runs, predicted)
    if everything or args.heads:
        heads()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
