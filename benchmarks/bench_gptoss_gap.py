"""Where the GPT-OSS-120B Megatron-Bridge rows' missing time is, and is not (issue 13, n21gptoss): a probe.

Default: every Megatron-Bridge GPT-OSS-120B row (H100 and B200) with its published and predicted
step, the predicted terms, the missing seconds, the missing share of the priced compute, and the
published / predicted tokens per second per dense bf16 PFLOP/s of the part (same model, so a
hardware-neutral rate). Then the B200 pair that differs only in EP (26.02 EP 64 against 26.02.01 EP 8):
the published and predicted step differences and each row's missing seconds.

`--twins`: the twins the write-up cites, priced as variants of bench rows (not bench rows): the 25.11
DGX-B200 table row (GBS 512, MBS 4, 8,213 tokens/s/GPU) at the table's EP 8 and its v0.2.0 recipe's
EP 64, and Qwen3-30B-A3B on 8 DGX-B200 in MXFP8 (26.04.01 table: EP 8, MBS 4, GBS 512, 27,136
tokens/s/GPU) read as blockwise and as per-tensor fp8.

`--gather-window`: the whole bench re-priced with Megatron-core's parameter-AllGather window
(`param_gather_window.py`: the first micro-batch's forward, not the step's forwards) patched into
the Evaluator for Megatron ZeRO-1/2 rows; prints each file / split before and after and the rows
that move. A what-if, not the planner.

    python benchmarks/bench_gptoss_gap.py [--twins | --gather-window]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from param_gather_window import megatron_gather_window_s  # noqa: E402
from modelplan.plan import evaluator as evaluator_mod  # noqa: E402
from modelplan.plan import evaluator_dp  # noqa: E402
from modelplan.plan.estimate import estimate_split  # noqa: E402
from modelplan.plan.parallel import dp_zero  # noqa: E402
from modelplan.specs.load import load_model, model_from_dict  # noqa: E402

ROWS = ("mbridge2511_gpt_oss_120b_h100_bf16", "mbridge2602_gpt_oss_120b_h100_bf16_gbs1280",
        "mbridge260201_gpt_oss_120b_h100_bf16_gbs1280", "mbridge2604_gpt_oss_120b_h100_bf16_gbs1280",
        "mbridge260401_gpt_oss_120b_h100_bf16_gbs1280", "mbridge2602_gpt_oss_120b_b200_bf16_gbs1280",
        "mbridge260201_gpt_oss_120b_b200_bf16_gbs1280", "mbridge2604_gpt_oss_120b_b200_bf16_gbs1280",
        "mbridge260401_gpt_oss_120b_b200_bf16_gbs1280")
EP_PAIR = ("mbridge2602_gpt_oss_120b_b200_bf16_gbs1280", "mbridge260201_gpt_oss_120b_b200_bf16_gbs1280")


def gptoss_rows() -> dict[str, dict]:
    """Each GPT-OSS row priced: published / predicted step, terms, tokens per s per GPU."""
    out = {}
    for run in bench.load_runs():
        if run["id"] not in ROWS:
            continue
        spec = load_model(run["model"])
        training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
        est = estimate_split(spec, training, plan, cluster, world_size=run["gpus"])
        published = bench.published_step_s(run, spec, training)
        tokens = run["global_batch"] * run["seq"] / run["gpus"]
        peak_pf = cluster.accelerator.peak_flops("bf16") / 1e15
        out[run["id"]] = {"published": published, "predicted": est.step.step_time_s, "terms": est.step.terms(),
                          "tok_per_pf_pub": tokens / published / peak_pf,
                          "tok_per_pf_pred": tokens / est.step.step_time_s / peak_pf}
    return out


def report_rows() -> None:
    rows = gptoss_rows()
    print("row: published / predicted s (error); predicted compute + recompute, EP, DP, bubble s; missing s "
          "(share of priced compute); tokens/s/GPU per dense bf16 PFLOP/s published / predicted")
    for rid in ROWS:
        r = rows[rid]
        t = r["terms"]
        comp = t["compute_s"] + t["recompute_s"]
        miss = r["published"] - r["predicted"]
        print(f"  {rid}: {r['published']:.2f} / {r['predicted']:.2f} s ({r['predicted'] / r['published'] - 1:+.1%}); "
              f"{comp:.2f}, {t['ep_comm_s']:.2f}, {t['dp_comm_s']:.2f}, {t['bubble_s']:.2f} s; missing {miss:.2f} s "
              f"({miss / comp:.0%}); {r['tok_per_pf_pub']:.0f} / {r['tok_per_pf_pred']:.0f}")
    a, b = (rows[i] for i in EP_PAIR)
    print(f"B200 EP 64 (26.02) - EP 8 (26.02.01): published {a['published'] - b['published']:+.2f} s, predicted "
          f"{a['predicted'] - b['predicted']:+.2f} s (EP term {a['terms']['ep_comm_s'] - b['terms']['ep_comm_s']:+.2f}); "
          f"missing {a['published'] - a['predicted']:.2f} s at EP 64, {b['published'] - b['predicted']:.2f} s at EP 8")


TWINS = (  # (label, bench row it varies, overrides, published tokens/s/GPU)
    ("B200 25.11 GBS 512, EP 8 (table)", "mbridge260201_gpt_oss_120b_b200_bf16_gbs1280",
     {"global_batch": 512, "ep": 8}, 8213),
    ("B200 25.11 GBS 512, EP 64 (v0.2.0 recipe)", "mbridge260201_gpt_oss_120b_b200_bf16_gbs1280",
     {"global_batch": 512, "ep": 64}, 8213),
    ("Qwen3-30B-A3B 8 B200 MXFP8 read as blockwise", "mbridge260401_qwen3_30b_a3b_h100_fp8",
     {"cluster": "dgx-b200", "gpus": 8, "dp": 8, "ep": 8, "micro_batch": 4, "global_batch": 512,
      "fp8_recipe": "blockwise"}, 27136),
    ("Qwen3-30B-A3B 8 B200 MXFP8 read as per-tensor", "mbridge260401_qwen3_30b_a3b_h100_fp8",
     {"cluster": "dgx-b200", "gpus": 8, "dp": 8, "ep": 8, "micro_batch": 4, "global_batch": 512,
      "fp8_recipe": "current"}, 27136),
)


def report_twins() -> None:
    runs = {r["id"]: r for r in bench.load_runs()}
    for label, base, overrides, tokens in TWINS:
        run = copy.deepcopy(runs[base])
        run.update(overrides, reported={"tokens_per_s_per_gpu": tokens})
        spec = model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else load_model(run["model"])
        training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
        est = estimate_split(spec, training, plan, cluster, world_size=run["gpus"])
        published = run["global_batch"] * run["seq"] / (tokens * run["gpus"])
        m = run["global_batch"] // (run["dp"] * run["micro_batch"])
        print(f"  {label}: published {published:.2f} s, predicted {est.step.step_time_s:.2f} s "
              f"({est.step.step_time_s / published - 1:+.1%}); missing {published - est.step.step_time_s:.2f} s over "
              f"{m} micro-batches; EP {est.step.ep_comm_s:.2f} s")


@contextlib.contextmanager
def megatron_gather_window():
    """Patch the Evaluator so a Megatron ZeRO-1/2 step hides its parameter AllGather behind
    `megatron_gather_window_s` instead of the step's forwards (the what-if of the module docstring)."""
    orig_terms, orig_finish, orig_variants = (evaluator_dp.DpPricing._dp_terms, evaluator_mod.Evaluator._finish,
                                              evaluator_mod.Evaluator.variant_times_s)
    orig_exposure = dp_zero.dp_exposure

    def finish(self, point, ctx):
        self._probe_vpp = point.vpp
        return orig_finish(self, point, ctx)

    def variants(self, ctx, point, acts, opts):
        self._probe_vpp = point.vpp
        return orig_variants(self, ctx, point, acts, opts)

    def dp_terms(self, st, dpe, m, zero, reshard, dpo, pp, group):
        if self.software.framework != "megatron" or zero not in (1, 2):
            return orig_terms(self, st, dpe, m, zero, reshard, dpo, pp, group)
        window = megatron_gather_window_s(st.fwd_s, m, pp, getattr(self, "_probe_vpp", 1))

        def exposure(zero_, times, m_, t_fwd, *args, **kwargs):  # zero 1/2 read t_fwd only as m x t_fwd
            return orig_exposure(zero_, times, m_, window / m_, *args, **kwargs)

        dp_zero.dp_exposure = exposure
        try:
            return orig_terms(self, st, dpe, m, zero, reshard, dpo, pp, group)
        finally:
            dp_zero.dp_exposure = orig_exposure

    evaluator_dp.DpPricing._dp_terms = dp_terms
    evaluator_mod.Evaluator._finish, evaluator_mod.Evaluator.variant_times_s = finish, variants
    try:
        yield
    finally:
        evaluator_dp.DpPricing._dp_terms = orig_terms
        evaluator_mod.Evaluator._finish, evaluator_mod.Evaluator.variant_times_s = orig_finish, orig_variants


def _errors() -> dict[str, dict]:
    return {r["id"]: r for r in (bench.price(run) for run in bench.load_runs()) if r.get("time_error") is not None}


def report_gather_window() -> None:
    before = _errors()
    with megatron_gather_window():
        after = _errors()
    for label, key in (("file", "file"), ("split", "split")):
        groups = defaultdict(list)
        for rid, r in before.items():
            groups[r[key]].append((abs(r["time_error"]), abs(after[rid]["time_error"])))
        for name, pairs in sorted(groups.items()):
            b, a = [p[0] for p in pairs], [p[1] for p in pairs]
            print(f"{label} {name} (n={len(pairs)}): mean {100 * sum(b) / len(b):.2f} -> {100 * sum(a) / len(a):.2f} %, "
                  f"max {100 * max(b):.1f} -> {100 * max(a):.1f} %, > 25 %: {sum(x > 0.25 for x in b)} -> "
                  f"{sum(x > 0.25 for x in a)}")
    for rid, r in before.items():
        e0, e1 = r["time_error"], after[rid]["time_error"]
        if abs(e1 - e0) > 5e-4:
            print(f"  {rid} ({r['split']}): {e0:+.1%} -> {e1:+.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--twins", action="store_true", help="the twins the write-up cites")
    parser.add_argument("--gather-window", action="store_true", help="the Megatron param-gather window what-if")
    args = parser.parse_args()
    if args.gather_window:
        report_gather_window()
    elif args.twins:
        report_twins()
    else:
        report_rows()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
