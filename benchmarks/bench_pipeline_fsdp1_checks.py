"""Two checks on dense outliers (issue 13, branch n17dense); a probe, nothing in modelplan uses it.

1. `--llama3`: Llama 3 405B on 8,192 H100 (Dubey et al. 2024 sec. 3.3.2, Table 4) in core, per
   pipeline rank, with Meta's own layout: 126 layers + an embedding-only first chunk + a loss-only
   last chunk = 128 one-slot chunks on pp 16, vpp 8, m = 32 micro-batches of one sequence. The
   in-flight chunk forwards per rank are counted with Megatron-core's rule
   (megatron/core/pipeline_parallel/schedules.py `get_pp_rank_microbatches`: warm-up
   (pp - r - 1) * 2 + (vpp - 1) * microbatch_group_size_per_vp_stage, the group = pp by default,
   then one more forward before the first backward) and checked against torch's
   `ScheduleInterleaved1F1B` (torch/distributed/pipelining/schedules.py `_get_warmup_ops`,
   multiply_factor 2, microbatches_per_round = m // max(1, m // pp)); which chunk each forward runs
   is Megatron's `get_model_chunk_id` order, so the embedding-only / loss-only chunks hold no
   block. Bytes: modelplan's block bytes (`activation_bytes_per_layer`, Korthikanti et al. 2022)
   and the rank's states, NCCL buffers and allowances from the planner's own estimate of the
   same run at vpp 7 (a rank with 8 blocks).
2. `--fsdp1`: for every llm-foundry / FSDP1 row, one unit's backward against the two collectives
   FSDP1's BACKWARD_POST issues beside it on the process group's one NCCL stream (torch
   fsdp/_runtime_utils.py `_post_backward_hook`: reshard + prefetch of the next unit's AllGather,
   then the ReduceScatter of this unit; fsdp/api.py `BackwardPrefetch`: "any collectives, even if
   issued from different streams, contend for the same per-device NCCL stream"), all three
   priced by the planner (the run's DP terms, `dp_zero.dp_exposure`'s inputs).

    python benchmarks/bench_pipeline_fsdp1_checks.py [--llama3] [--fsdp1]   (both without flags)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.count.memory import activation_bytes_per_layer  # noqa: E402
from modelplan.plan.estimate import estimate_split  # noqa: E402
from modelplan.plan.parallel import dp_zero  # noqa: E402
from modelplan.specs.costmodel import CostModel  # noqa: E402
from modelplan.specs.plan import Plan, Schedule  # noqa: E402


def megatron_warmup(pp: int, vpp: int, m: int, rank: int, group: int | None = None) -> int:
    """Megatron-core `get_pp_rank_microbatches` (interleaved): warm-up chunk forwards, capped at m vpp."""
    group = pp if group is None else group
    return min((pp - rank - 1) * 2 + (vpp - 1) * group, m * vpp)


def torch_warmup(pp: int, vpp: int, m: int, rank: int) -> int:
    """torch ScheduleInterleaved1F1B `_get_warmup_ops` with its microbatches_per_round."""
    per_round = m // max(1, m // pp)
    return min((vpp - 1) * per_round + 2 * ((pp - 1) - rank), m * vpp)


def chunk_of(k: int, pp: int, vpp: int) -> int:
    """Model chunk of a rank's k-th forward (Megatron `get_model_chunk_id`, forward)."""
    return (k % (pp * vpp)) // pp


def held_blocks(pp: int, vpp: int, m: int, rank: int, blocks_of_chunk) -> int:
    """Block-micro-batches a rank holds at its peak: the warm-up forwards and the first steady
    forward (every backward frees one), each weighted by its chunk's blocks."""
    n = min(megatron_warmup(pp, vpp, m, rank) + 1, m * vpp)
    return sum(blocks_of_chunk(rank, chunk_of(k, pp, vpp)) for k in range(n))


def llama3() -> None:
    runs = {r["id"]: r for r in bench.load_runs()}
    run = runs["llama3_405b_8k_gpus"]
    spec, training, cluster = bench.load_model(run["model"]), bench._training(run), bench._cluster(run)
    pp, vpp, m = run["pp"], 8, run["global_batch"] // run["dp"]
    for r in range(pp):
        assert megatron_warmup(pp, vpp, m, r) == torch_warmup(pp, vpp, m, r)
    layer = activation_bytes_per_layer(spec, 1, run["seq"], 2, run["tp"], True, "none", attention="flash")

    def meta(rank: int, chunk: int) -> int:  # virtual stage v = chunk * pp + rank; 0 and 127 hold no block
        v = chunk * pp + rank
        return 0 if v in (0, pp * vpp - 1) else 1

    base = bench._plan(run)
    plan = Plan(**{**base.model_dump(), "vpp": 7, "schedule": Schedule.INTERLEAVED, "tp_overlap": "ring"})
    est = estimate_split(spec, training, plan, cluster, world_size=run["gpus"])
    mid = max(est.memory, key=lambda s: s.total)
    frac = CostModel().fragmentation_fraction
    budget = est.memory_budget_bytes
    print(f"llama3_405b_8k_gpus in core, Meta's layout (pp {pp}, vpp {vpp}, m {m}); block {layer / 1e6:.1f} MB"
          f" per micro-batch; budget {budget / 1e9:.1f} GB")
    print(f"  planner's own vpp 7 estimate (split searched: {est.plan.stage_split}): peak "
          f"{est.peak_memory_bytes / 1e9:.2f} GB (rank {mid.stage}); step {est.step.step_time_s:.2f} s")
    states = mid.weights + mid.gradients + mid.optimizer
    for r in (0, 1, 2, pp - 1):
        held = held_blocks(pp, vpp, m, r, meta)
        act = held * layer
        total = states + act + mid.comm_buffers + (act + mid.comm_buffers) * frac + mid.reserved
        bare = total - (act + mid.comm_buffers) * frac
        print(f"  rank {r:2d}: warm-up {megatron_warmup(pp, vpp, m, r):3d} + 1 chunk forwards, "
              f"{held:3d} block-micro-batches = {act / 1e9:5.1f} GB; total {total / 1e9:5.1f} GB "
              f"({frac:.0%} allocator allowance), {bare / 1e9:5.1f} GB without it")


def fsdp1() -> None:
    seen: list = []
    real = dp_zero.dp_exposure

    def spy(zero, times, m, t_fwd, t_bwd, *a, **k):
        seen.append((zero, times, m, t_fwd, t_bwd))
        return real(zero, times, m, t_fwd, t_bwd, *a, **k)

    dp_zero.dp_exposure = spy  # evaluator_dp reads it through the module at call time
    print(f"{'run':<40} {'error':>7} {'AG/unit':>8} {'RS/unit':>8} {'bwd/unit':>9} {'(AG+RS)/bwd':>11} "
          f"{'if AG exposed':>13}")
    strict: list[tuple[float, float]] = []
    try:
        for run in bench.load_runs():
            if run.get("engine") not in ("foundry", "fsdp") or "case" in run:
                continue
            seen.clear()
            spec = (bench.model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run
                    else bench.load_model(run["model"]))
            training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
            est = estimate_split(spec, training, plan, cluster, world_size=run["gpus"])
            _zero, times, m, _tf, t_bwd = seen[-1]
            ag, rs, bwd = times.all_gather_block, times.reduce_scatter / (spec.layers + 1), t_bwd / spec.layers
            published = bench.published_step_s(run, spec, training)
            err = est.step.step_time_s / published - 1
            # the reading this check rules out: every backward AllGather exposed (m x L gathers)
            worse = (est.step.step_time_s + m * spec.layers * ag) / published - 1
            strict.append((abs(err), abs(worse)))
            print(f"{run['id']:<40} {err:+7.1%} {1e3 * ag:6.2f}ms {1e3 * rs:6.2f}ms {1e3 * bwd:7.2f}ms "
                  f"{(ag + rs) / bwd:11.2f} {worse:+13.1%}")
        n = len(strict)
        before, after = (100 * sum(x[i] for x in strict) / n for i in (0, 1))
        print(f"mean |error| {before:.1f} % -> {after:.1f} % with every backward AllGather exposed (n={n})")
    finally:
        dp_zero.dp_exposure = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama3", action="store_true")
    ap.add_argument("--fsdp1", action="store_true")
    args = ap.parse_args()
    both = not (args.llama3 or args.fsdp1)
    if args.llama3 or both:
        llama3()
    if args.fsdp1 or both:
        fsdp1()


if __name__ == "__main__":
    main()
