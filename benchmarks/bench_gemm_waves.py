"""Would a shape-aware GEMM rate (tile and wave quantization) price the published runs better? (issue 13)

The planner prices every GEMM at one rate, the accelerator's measured MAMF times the cost model's
`sustained_fraction` (0.8, fitted to the ten Narayanan et al. 2021 runs), plus 4 us per kernel,
under the HBM roof (`compute.Roofline.gemm_time_s`). This probe divides each GEMM's compute term by
its tile and wave quantization share (`benchmarks/gemm_waves.py`, NVIDIA's Matrix Multiplication
Background User's Guide), taking the MAMF as the rate of a whole-wave, whole-tile shape, and reruns
bench_published_runs' pricing for each tile set and a few values of `sustained_fraction` (a tile
model lowers every GEMM's rate a little, so the fraction fitted without one is refitted here: the
fit split may choose it, the holdout may not). A probe over the roofline, not a model: nothing in
modelplan uses it.

Per variant: fit / holdout / vTrain / Narayanan mean and max |error| and the runs beyond 25 %;
then the rows the issue names (`--rows`).

`--shares`: the FLOP-weighted quantized share of one block's GEMMs of each named row.

    python benchmarks/bench_gemm_waves.py [--only SUBSTRING] [--rows] [--shares]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.plan.compute import Roofline  # noqa: E402
from modelplan.plan.evaluator import Evaluator  # noqa: E402
from modelplan.plan.experts import expert_capacity  # noqa: E402
from modelplan.plan.kernels import layer_kernels  # noqa: E402
from modelplan.specs.load import load_model, model_from_dict  # noqa: E402
from gemm_waves import CUBLAS_LARGE_TILES, best_quantized_efficiency  # noqa: E402

VARIANTS: tuple[tuple[str, tuple[tuple[int, int], ...], float], ...] = (
    ("none (today)", (), 0.80),
    ("256x128 / 128x256", CUBLAS_LARGE_TILES, 0.80),
    ("256x128 / 128x256", CUBLAS_LARGE_TILES, 0.82),
    ("256x128 / 128x256", CUBLAS_LARGE_TILES, 0.83),
    ("256x128 / 128x256", CUBLAS_LARGE_TILES, 0.84),
    ("256x128 / 128x256", CUBLAS_LARGE_TILES, 0.86),
    ("128x128", ((128, 128),), 0.80),
    ("128x128", ((128, 128),), 0.81),
    ("128x128", ((128, 128),), 0.815),
    ("128x128", ((128, 128),), 0.82),
)
"""(tile set, its tiles, sustained_fraction). 128x128 with one tile per SM is the guide's wave at a
quarter of the 256x128 tile's work (the same wave as 128x128 at 2 tiles per SM is 256x128's)."""

ROWS = ("narayanan21_table1_76B", "narayanan21_table1_1T", "vtrain_3p6b_g64_t8_d8_p1_mb2", "vtrain_3p6b_g64_t8_d8_p1_mb4",
        "vtrain_3p6b_g64_t8_d8_p1_mb32", "vtrain_3p6b_g64_t4_d16_p1_mb2", "vtrain_3p6b_g64_t16_d4_p1_mb2",
        "vtrain_39p1b_g512_t2_d16_p16_mb2", "vtrain_39p1b_g512_t4_d32_p4_mb2", "mbridge2511_qwen3_30b_a3b_h100_fp8",
        "mbridge2511_gpt_oss_120b_h100_bf16", "torchtitan25_llama3_8b_h100_tp8_bf16_tp", "korthikanti22_22b_full")


@dataclass(frozen=True)
class WaveRoofline(Roofline):
    """`Roofline` whose GEMM compute term is divided by the GEMM's quantized share."""

    sm_count: int = 0
    tiles: tuple[tuple[int, int], ...] = ()

    def gemm_time_s(self, gemm, dtype_bytes, fp8_factor=0.0):
        """`Roofline.gemm_time_s` with compute / best_quantized_efficiency(m, n, batch, SMs)."""
        fp8 = bool(fp8_factor and self.fp8_matmul_flops_per_s)
        rate = self.fp8_matmul_flops_per_s * fp8_factor if fp8 else self.matmul_flops_per_s
        compute_s = gemm.flops / rate / best_quantized_efficiency(gemm.m, gemm.n, gemm.batch, self.sm_count, self.tiles)
        memory_s = gemm.bytes_moved(1 if fp8 else dtype_bytes) / self.hbm_bytes_per_s
        return self.overhead_s + max(compute_s, memory_s)


def install(tiles: tuple[tuple[int, int], ...], sustained: float):
    """Make `Roofline.of` build rooflines at `sustained` with the tile model (no tiles: plain)."""
    plain = Roofline.__dict__["of"]

    def of(cls, accelerator, precision, cost, attention_kernels=()):
        base = plain.__func__(cls, accelerator, precision, cost.model_copy(update={"sustained_fraction": sustained}),
                              attention_kernels)
        if not tiles or not accelerator.sm_count:
            return base
        return WaveRoofline(**{f.name: getattr(base, f.name) for f in fields(base)}, sm_count=accelerator.sm_count,
                            tiles=tiles)

    Roofline.of = classmethod(of)
    return plain


def block_share(run: dict, tiles: tuple[tuple[int, int], ...]) -> float:
    """FLOP-weighted quantized share of one block's GEMMs (forward, dgrad, wgrad) on one rank of a
    TOML run: sum(FLOPs) / sum(FLOPs / share); the first MoE block for an MoE model."""
    spec = model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else load_model(run["model"])
    training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
    ev = Evaluator(spec, training, cluster)
    moe = ev.spec.moe is not None
    tokens = plan.micro_batch * training.seq_len // plan.cp
    routed = tokens * plan.etp // plan.tp if moe and plan.etp else tokens
    capacity = expert_capacity(routed, ev.spec.moe, ev.capacity_factor) if moe else None
    k = layer_kernels(ev.spec, plan.tp, plan.micro_batch, training.seq_len, ev.dtype_bytes, plan.sequence_parallel,
                      moe_layer=moe, ep=plan.ep, capacity=capacity, cp=plan.cp, attention=training.attention,
                      memory_len=training.seq_len, etp=plan.etp if moe else None)
    gemms = [x for g in k.gemms for x in (g, *g.backward())]
    sms = cluster.accelerator.sm_count
    return sum(g.flops for g in gemms) / sum(g.flops / best_quantized_efficiency(g.m, g.n, g.batch, sms, tiles)
                                             for g in gemms)


def _stats(rows: list[dict]) -> str:
    errs = [abs(r["time_error"]) for r in rows]
    if not errs:
        return f"{'-':>20}"
    return f"{sum(errs) / len(errs):5.1%} {max(errs):6.1%} {sum(e > 0.25 for e in errs):3d}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--rows", action="store_true", help="also print the rows the issue names, per variant")
    parser.add_argument("--shares", action="store_true",
                        help="only print the FLOP-weighted quantized share of the named rows' block GEMMs")
    args = parser.parse_args()
    runs = [r for r in bench.load_runs() if args.only in r["id"]]
    if args.shares:
        print(f"{'run':<40} {'256x128/128x256':>16} {'128x128':>8}")
        for run in runs:
            if run["id"] in ROWS and "case" not in run:
                print(f"{run['id']:<40} {block_share(run, CUBLAS_LARGE_TILES):16.3f} {block_share(run, ((128, 128),)):8.3f}")
        return 0
    groups = (("fit", lambda r: r["split"] == "fit"), ("holdout", lambda r: r["split"] == "holdout"),
              ("vtrain", lambda r: "vtrain" in r["file"]), ("narayanan", lambda r: r["id"].startswith("narayanan21_")))
    print(f"{'tiles':<18} {'sf':>5}  " + "  ".join(f"{g + ' mean/max/>25%':>20}" for g, _ in groups))
    per_row = {}
    for label, tiles, sustained in VARIANTS:
        plain = install(tiles, sustained)
        try:
            rows = [r for r in (bench.price(run) for run in runs) if bench._exact(r)]
        finally:
            Roofline.of = plain
        print(f"{label:<18} {sustained:5.3f}  " + "  ".join(f"{_stats([r for r in rows if keep(r)]):>20}"
                                                        for _, keep in groups))
        per_row[(label, sustained)] = {r["id"]: r["time_error"] for r in rows}
    if args.rows:
        for rid in ROWS:
            cells = [f"{100 * errs[rid]:+6.1f}" for errs in per_row.values() if rid in errs]
            if cells:
                print(f"{rid:<40} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
