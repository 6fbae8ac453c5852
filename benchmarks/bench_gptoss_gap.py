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

Megatron-core's parameter-AllGather window (the first micro-batch's forward), which this probe
once patched in, is the engine's own now (`EngineProfile.param_gather_window`, n21gather).

    python benchmarks/bench_gptoss_gap.py [--twins]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.plan.estimate import estimate_split  # noqa: E402
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--twins", action="store_true", help="the twins the write-up cites")
    args = parser.parse_args()
    if args.twins:
        report_twins()
    else:
        report_rows()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
