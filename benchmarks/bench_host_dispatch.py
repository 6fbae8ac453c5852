"""Could host-side dispatch explain the published runs the planner prices too fast? (issue 13)

Eager PyTorch issues every kernel from the CPU (Python, the dispatcher, autograd, the launch); the
GPU runs ahead of the host until a host-device synchronisation, so a rank's step is host-bound only
where the host's issue time exceeds the device time between two synchronisations. This probe counts
the kernels the planner itself prices for each run (`plan/kernels.py`: GEMMs, element-wise kernels
with their eager composites' counts, fused attention, fp8 casts, plus the TP collectives and EP
AllToAlls of each block), forward (twice under full recompute) and backward, on one rank per
micro-batch, and prints two per-op host times:

- breakeven_us: predicted step / host ops per step, the host time per op above which
  max(host, device) would start to change the prediction (uniform blocks: the same for a whole
  step and for per-block sync segments such as Megatron's dropless MoE `before_ep_alltoall` sync);
- needed_us: published step / host ops per step, the per-op host time that would make the run
  wholly host-bound at its published time.

Published per-op host costs to compare with: PyTorch eager `x + 1` 4.5 us on an i9-11900K (CPU
tensor, no autograd, no CUDA launch; Ansel, "Micro-optimizations for the most micro of benchmarks",
dev-discuss.pytorch.org/t/1836, 2023); PyTorch's operator micro-benchmark `split` 3.3 us per call on
CUDA tensors (pytorch/pytorch #32194); cudaLaunchKernel a few us more. A CUDA-tensor op with
autograd on a server CPU: about 5-25 us; the planner already charges 4 us of device time per kernel
(`CostModel.kernel_overhead_us`).

`--measure` also counts the dispatcher ops of one eager GPT-2 block (Hugging Face transformers'
`GPT2Block`, attention eager and sdpa) forward and backward on this machine's CPU and times them
with tiny tensors (compute negligible, autograd on, no CUDA launch): a measured host cost per op and
the ratio of dispatcher ops (views included) to the kernels the planner lists.

`--scan US...` reruns the published-runs summaries (fit, holdout, Narayanan, per engine) with the
bound max(0, host - device) added on each micro-batch slot of the critical rank, at each cost per
listed op (0: the planner as it is).

`--segments [US ...]` (issue 13, n15moe) counts the host ops of a dropless MoE block as the engines
issue them (Megatron-core's all-to-all dispatcher and router, TransformerEngine v2.9's
GroupedLinear per local expert) and adds, only where the dispatcher syncs the host once per MoE
block forward, the per-segment bound max(device, host) - device at each cost per host op; it prints
the rows that move, the split summaries, and the cost per op each synced row's published time
needs (benchmarks/published_runs_model.md, "Dropless MoE host syncs").

    python benchmarks/bench_host_dispatch.py [--only SUBSTRING] [--top N] [--measure] [--scan US ...]
        [--segments US ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.plan import host_issue  # noqa: E402
from modelplan.plan.evaluator import Evaluator  # noqa: E402
from modelplan.plan.experts import expert_capacity  # noqa: E402
from modelplan.plan.fp8 import is_fp8_gemm  # noqa: E402
from modelplan.plan.kernels import layer_kernels  # noqa: E402
from modelplan.specs.load import load_model, model_from_dict  # noqa: E402


def block_ops(ev: Evaluator, tp: int, sp: bool, b: int, cp: int, moe: bool, ep: int, etp: int | None) -> tuple[int, int]:
    """(forward, backward) host ops of one block on one rank: the planner's kernels of it, one fp8
    cast per fp8 GEMM each way, the TP collectives (2 AllReduces, or 2 AllGathers + 2
    ReduceScatters under SP) and, over ep > 1, the dispatch and combine AllToAlls."""
    spec, training, sw = ev.spec, ev.training, ev.software
    tokens = b * training.seq_len // cp
    routed = tokens * etp // tp if moe and etp else tokens  # tokens one rank dispatches (as the evaluator)
    capacity = expert_capacity(routed, spec.moe, ev.capacity_factor) if moe else None
    k = layer_kernels(spec, tp, b, training.seq_len, ev.dtype_bytes, sp, moe_layer=moe, ep=ep, capacity=capacity,
                      cp=cp, attention=training.attention, elementwise=sw.elementwise, memory_len=training.seq_len,
                      etp=etp if moe else None, norm_elementwise=sw.norm_elementwise, cp_fp32_merge=sw.cp_fp32_merge)
    casts = sum(1 for g in k.gemms if is_fp8_gemm(g.name)) if sw.fp8_recipe else 0
    comm = (4 if sp else 2) if tp > 1 else 0
    comm += 2 if moe and ep > 1 else 0
    fwd = len(k.gemms) + sum(e.kernels[0] for e in k.elementwise) + len(k.fused) + casts + comm
    bwd = 2 * len(k.gemms) + sum(e.kernels[1] for e in k.elementwise) + len(k.fused) + casts + comm
    return fwd, bwd


def host_ops_per_step(run: dict) -> tuple[float, float] | None:
    """(host ops per step on one rank, micro-batches per step) of a TOML run, or None."""
    if "spec" not in run and "model" not in run:
        return None
    spec = model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else load_model(run["model"])
    training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
    ev = Evaluator(spec, training, cluster)
    spec = ev.spec
    rerun = 1 if plan.recompute == "full" else 0
    moe_layers = sum(1 for i in range(spec.layers) if spec.is_moe_layer(i)) if spec.moe is not None else 0
    total = 0.0
    for moe, n in ((False, spec.layers - moe_layers), (True, moe_layers)):
        if n:
            f, b = block_ops(ev, plan.tp, plan.sequence_parallel, plan.micro_batch, plan.cp, moe, plan.ep, plan.etp)
            total += n / plan.pp * (f * (1 + rerun) + b)
    m = training.global_batch / (plan.dp * plan.micro_batch)
    return total * m, m


def host_per_microbatch_s(ev: Evaluator, point, stage, c_s: float) -> float:
    """Host seconds one micro-batch issues on the critical pipeline rank at c_s per listed op."""
    rb = stage.blocks[stage.terms.critical_rank]
    rerun = 1 if point.recompute == "full" else 0
    total = 0.0
    for moe, n in ((False, rb.dense_run), (True, rb.moe_run)):
        if n:
            f, b = block_ops(ev, point.tp, point.sequence_parallel, point.micro_batch, point.cp, moe, point.ep,
                             point.etp)
            total += n * (f * (1 + rerun) + b)
    return total * c_s


def install_host_bound(c_us: float) -> None:
    """Price every plan with the host bound (what a host model would add): on each of the
    m + bubble micro-batch slots of the critical rank, max(0, host - device) is exposed. A probe
    over the evaluator's internals (`Evaluator.evaluate` / `context`), not a model: nothing in
    modelplan uses it."""
    plain = Evaluator.evaluate

    def evaluate(self, point):
        ev = plain(self, point)
        stage, bubble, m, p2p = self.context(point)
        exposed = max(0.0, host_per_microbatch_s(self, point, stage, c_us * 1e-6) - stage.slowest_s - p2p)
        return ev._replace(step=ev.step._replace(step_time_s=ev.step.step_time_s + (m + bubble) * exposed))

    Evaluator.evaluate = evaluate


# -- engine-true host ops of a dropless MoE block between two host syncs (issue 13, n15moe) -------
# Counted from the engines' source; the counts now live in modelplan/plan/host_issue.py (which the
# planner uses for the merged-1F1B EP-overlap slots, n19epoverlap).
FP8_QUANTIZE_LAUNCHES = host_issue.FP8_QUANTIZE_LAUNCHES
ROUTER_DISPATCH_OPS = host_issue.ROUTER_DISPATCH_OPS
expert_ops = host_issue.expert_ops


def attention_ops(ev: Evaluator, tp: int, sp: bool, b: int, cp: int, ep: int, etp: int | None) -> tuple[int, int]:
    """`host_issue.attention_ops` of an evaluator's model and settings."""
    return host_issue.attention_ops(ev.spec, ev.training, ev.software, ev.dtype_bytes, ev.capacity_factor, tp, sp, b,
                                    cp, ep, etp)


def moe_segment_ops(ev: Evaluator, point) -> tuple[int, int]:
    """(forward, backward) host ops of one MoE block on one rank, engine-true (`host_issue.moe_block_host_ops`)."""
    return host_issue.moe_block_host_ops(ev.spec, ev.training, ev.software, ev.dtype_bytes, ev.capacity_factor,
                                         point.tp, point.sequence_parallel, point.micro_batch, point.cp, point.ep,
                                         point.etp)


def syncs_per_moe_block(ev: Evaluator, point) -> bool:
    """`host_issue.dispatcher_syncs`: dropless and ep * tp > 1."""
    return host_issue.dispatcher_syncs(ev.spec, point.tp, point.ep)


def install_segment_bound(c_us: float, log: dict | None = None) -> None:
    """Price every plan with the per-segment host bound (a probe, not a model): where the
    dispatcher syncs, each MoE block's forward (from one sync to the next) takes max(device, host);
    the backward (no sync) runs ahead over a whole chunk, so with uniform blocks max(device, host)
    per block too; under the merged 1F1B EP overlap one segment holds one block's forward and
    another micro-batch's backward: max(device fwd + bwd, host fwd + bwd)."""
    plain = Evaluator.evaluate

    def evaluate(self, point):
        ev = plain(self, point)
        if self.spec.moe is None or not syncs_per_moe_block(self, point):
            return ev
        stage, bubble, m, _ = self.context(point)
        rb = stage.blocks[stage.terms.critical_rank]
        bt = self.block_terms(point.tp, point.sequence_parallel, point.micro_batch, point.recompute, point.cp,
                              point.ep, point.etp)
        hf, hb = (n * c_us * 1e-6 for n in moe_segment_ops(self, point))
        df, db = bt.layer_fwd_s, bt.layer_bwd_s
        if self.training.ep_comm_overlap:  # the planner prices it now (host_issue.py, with the schedule's own ops)
            added = 0.0
        else:
            added = max(0.0, hf - df) + max(0.0, hb - db)
        if log is not None:
            log[self.spec.name] = (hf, hb, df, db, rb.moe_run, m + bubble)
        return ev._replace(step=ev.step._replace(step_time_s=ev.step.step_time_s + (m + bubble) * rb.moe_run * added))

    Evaluator.evaluate = evaluate


def segments(costs_us: list[float]) -> int:
    """Per MoE run: engine-true host ops per MoE block, device vs host seconds per block at each
    cost, the error with the per-segment bound, and the cost per op the published time needs;
    then the split summaries at each cost."""
    runs = [r for r in bench.load_runs() if ("spec" in r and "moe" in r["spec"]) or "moe" in r.get("model", "")
            or r.get("model") in ("deepseek-v3", "gpt-oss-120b", "mixtral-8x7b", "mixtral-8x22b", "grok-1")]
    plain = Evaluator.evaluate
    base = {r["id"]: bench.price(r) for r in bench.load_runs()}
    for c in costs_us:
        Evaluator.evaluate = plain
        log: dict = {}
        install_segment_bound(c, log)
        rows = [bench.price(r) for r in bench.load_runs()]
        print(f"== {c:g} us per host op (per-segment bound where the dispatcher syncs)")
        for r in rows:
            b = base[r["id"]]
            if "predicted_s" in r and abs(r["predicted_s"] - b["predicted_s"]) > 1e-9:
                print(f"  {r['id']:50} {b['time_error']:+7.1%} -> {r['time_error']:+7.1%}")
        groups = [("fit", "split", "fit"), ("holdout", "split", "holdout"), ("narayanan", "file", "calibration_runs.json")]
        groups += [(f, "file", f) for f in sorted({r["file"] for r in rows}) if f != "calibration_runs.json"]
        for label, key, value in groups:
            errs = [abs(r["time_error"]) for r in rows if r.get(key) == value and bench._exact(r)]
            if errs:
                print(f"  {label:28} n={len(errs):3}  mean {sum(errs) / len(errs):6.1%}  max {max(errs):6.1%}"
                      f"  > 25 %: {sum(e > 0.25 for e in errs)}")
    Evaluator.evaluate = plain
    log = {}
    install_segment_bound(1.0, log)
    print("\nper MoE block on the critical rank (dispatcher syncs):")
    print(f"{'run':50} {'local':>5} {'ops f/b':>9} {'dev f/b ms':>12} {'need us/op':>10}")
    for r in runs:
        log.clear()
        p = bench.price(r)
        if not log or "predicted_s" not in p:
            continue
        (hf, hb, df, db, run, slots), = log.values()
        spec = r.get("spec", {})
        experts = spec.get("moe", {}).get("num_experts") if spec else None
        missing = p["published_s"] - base[r["id"]]["predicted_s"]
        per_block = missing / (slots * run) + df + db  # host seconds per block that would give the published time
        print(f"{r['id']:50} {experts // r['ep'] if experts else '':>5} {hf * 1e6:4.0f}/{hb * 1e6:<4.0f} "
              f"{df * 1e3:5.2f}/{db * 1e3:<5.2f} {per_block / ((hf + hb) * 1e6) * 1e6:10.0f}")
    Evaluator.evaluate = plain
    return 0


def measure_host(reps: int = 200) -> None:
    """Dispatcher ops and host microseconds per op of one eager GPT-2 block (h 8, 2 heads, 2 tokens:
    every kernel trivial, so the time is the host's), forward and backward, on one CPU thread."""
    import time

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops += 1
            return func(*args, **(kwargs or {}))

    torch.set_num_threads(1)
    for attn in ("eager", "sdpa"):
        config = GPT2Config(n_embd=8, n_head=2, n_positions=8, attn_pdrop=0.1, resid_pdrop=0.1)
        config._attn_implementation = attn
        block = GPT2Block(config, layer_idx=0).train()
        x = torch.randn(1, 2, 8, requires_grad=True)
        for _ in range(3):
            block(x)[0].sum().backward()
        with Count() as fwd:
            y = block(x)[0].sum()
        with Count() as bwd:
            y.backward()
        t0 = time.perf_counter()
        for _ in range(reps):
            block(x)[0]
        t_f = (time.perf_counter() - t0) / reps
        t0 = time.perf_counter()
        for _ in range(reps):
            block(x)[0].sum().backward()
        t_b = (time.perf_counter() - t0) / reps - t_f
        print(f"GPT2Block ({attn}): forward {fwd.ops} ops, {t_f / fwd.ops * 1e6:.1f} us/op; "
              f"backward {bwd.ops} ops, {t_b / bwd.ops * 1e6:.1f} us/op")


def scan(costs_us: list[float], only: str) -> int:
    """bench_published_runs' split summaries (fit / holdout / Narayanan) with the host bound at each
    cost; 0 is the planner as it is."""
    runs = [r for r in bench.load_runs() if only in r["id"]]
    plain = Evaluator.evaluate
    for c in costs_us:
        Evaluator.evaluate = plain
        if c:
            install_host_bound(c)
        rows = [bench.price(r) for r in runs]
        print(f"== host {c:g} us per listed op")
        groups = [("fit", "split", "fit"), ("holdout", "split", "holdout"), ("narayanan", "file", "calibration_runs.json")]
        groups += [(e, "engine", e) for e in sorted({r["engine"] for r in rows})]
        for label, key, value in groups:
            errs = [abs(r["time_error"]) for r in rows if r[key] == value and bench._exact(r)]
            if errs:
                print(f"  {label:10} n={len(errs):3}  mean {sum(errs) / len(errs):6.1%}  max {max(errs):6.1%}")
    Evaluator.evaluate = plain
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--top", type=int, default=0, help="print only the N runs with the lowest breakeven")
    parser.add_argument("--measure", action="store_true", help="time an eager GPT-2 block's host ops here")
    parser.add_argument("--scan", type=float, nargs="*", metavar="US",
                        help="rerun bench_published_runs' summary with the host bound at these us per listed op")
    parser.add_argument("--segments", type=float, nargs="*", metavar="US",
                        help="engine-true MoE op counts: the per-segment host bound where Megatron's dropless "
                             "dispatcher syncs, at these us per host op")
    args = parser.parse_args()
    if args.segments is not None:
        return segments(args.segments or [5.0, 10.0, 25.0])
    if args.measure:
        measure_host()
    if args.scan:
        return scan(args.scan, args.only)
    rows = []
    for run in bench.load_runs():
        if args.only not in run["id"] or "case" in run:
            continue
        priced = bench.price(run)
        if "predicted_s" not in priced:
            continue
        ops = host_ops_per_step(run)
        if ops is None:
            continue
        per_step, m = ops
        rows.append((priced["predicted_s"] / per_step * 1e6, priced["published_s"] / per_step * 1e6, per_step / m,
                     priced["time_error"], run["id"], run["split"]))
    rows.sort()
    print(f"{'run':52} {'set':5} {'error':>7} {'ops/mb':>7} {'breakeven_us':>12} {'needed_us':>10}")
    for breakeven, needed, per_mb, err, rid, split in rows[:args.top or None]:
        print(f"{rid:52} {split[:4]:5} {err:+7.1%} {per_mb:7.0f} {breakeven:12.0f} {needed:10.0f}")
    if rows:
        print(f"\n{len(rows)} runs; lowest breakeven {rows[0][0]:.0f} us ({rows[0][4]}); "
              f"runs with breakeven < 25 us: {sum(r[0] < 25 for r in rows)}, < 100 us: {sum(r[0] < 100 for r in rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
