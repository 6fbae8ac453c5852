"""Megatron-LM's own H100 MoE recipe measurements against the planner (issue 13, n20moe): a probe.

Megatron-LM `examples/moe_recipes/` (branch dev at d48bd6be, README "Recipe Index", column "Median
TFLOP/s/GPU"; each YAML gives every training argument; container nvcr.io/nvidia/pytorch:26.03-py3
with Transformer Engine release_v2.14) publishes H100 runs of the two Qwen3 MoE models that the
Megatron-Bridge rows of the bench also run, with other settings: no pipeline for the 30B, bf16,
HybridEP. They are priced here as variants of the bench rows of the same models (the recipe's
layout, batch, precision, dispatcher, EP overlap and recompute; nothing else changed), not as bench
rows, to see whether the MoE rows' deficit follows the Megatron-Bridge stack or the model.

The README's figure is Megatron-LM's own `num_floating_point_operations` (megatron/training/
training.py, `transformer_flops`, the same closed form since core_r0.15.0): the r0.8 form that
`bench_published_runs.megatron_core_flops` implements, except that the attention core counts half
the s x s matrix (`+ (args.seq_length / args.hidden_size / 2)`, "Only half of the attention matrix
is non-zero"). `causal_megatron_flops` subtracts that half; the vocabularies here (151,936 = 1187 x
128, `make_vocab_size_divisible_by: 1187`) need no padding at tp 1 or 2.

    python benchmarks/bench_moe_recipes.py
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.specs.load import model_from_dict  # noqa: E402

RECIPES = (
    # (label, bench row of the same model, median TFLOP/s/GPU, overrides from the recipe YAML)
    ("qwen3_30b/h100/bf16_32GPU_TP1PP1EP8 (BF16 baseline: HybridEP, no CUDA graph)",
     "mbridge2604_qwen3_30b_a3b_h100_fp8", 234.1,
     dict(gpus=32, dp=32, ep=8, global_batch=256, precision="bf16", drop=("fp8_recipe", "fp8_param_gather"),
          features={"ep_comm_overlap": False, "moe_flex_dispatcher": "hybridep"})),
    ("qwen3_30b/h100/fp8_32GPU_TP1PP1EP8 (FP8 blockwise, router/preprocess CUDA graph)",
     "mbridge2604_qwen3_30b_a3b_h100_fp8", 232.4,
     dict(gpus=32, dp=32, ep=8, global_batch=256, fp8_recipe="blockwise",
          features={"ep_comm_overlap": False, "moe_flex_dispatcher": "hybridep"})),
    ("qwen3_235b/h100/bf16_256GPU_TP2PP8EP32 (HybridEP, EP overlap, router/preprocess CUDA graph)",
     "mbridge2511_qwen3_235b_a22b_h100_fp8", 214.3,
     dict(precision="bf16", recompute="selective", recompute_modules=["moe_act", "layernorm"],
          drop=("fp8_recipe", "fp8_param_gather"),
          features={"ep_comm_overlap": True, "moe_flex_dispatcher": "hybridep"})),
)


def causal_megatron_flops(spec, training) -> float:
    """Megatron-LM core_r0.15.0+ `transformer_flops` for a GQA MoE model without MTP: the r0.8 form
    less half of its attention-core term 12 B s l h^2 (s / h) q_ratio (module docstring)."""
    B, s, l, h = training.global_batch, training.seq_len, spec.layers, spec.hidden
    q_ratio = (spec.head_dim or h // spec.heads) * spec.heads / h
    return bench.megatron_core_flops(spec, training) - 12 * B * s * l * h * h * (s / h / 2) * q_ratio


def recipe_run(runs: dict, base: str, tflops: float, changes: dict) -> dict:
    """The bench row `base` with the recipe's settings and its published figure as a step time."""
    run = copy.deepcopy(runs[base])
    changes = dict(changes)
    for key in changes.pop("drop", ()):
        run.pop(key, None)
    run.update(changes, id=base + "_mlm_recipe")
    spec = model_from_dict(dict(run["spec"]), run["id"])
    step_s = causal_megatron_flops(spec, bench._training(run)) / (tflops * 1e12 * run["gpus"])
    run["reported"] = {"iteration_time_s": step_s}
    return run


def main() -> int:
    runs = {r["id"]: r for r in bench.load_runs()}
    for label, base, tflops, changes in RECIPES:
        row = bench.price(recipe_run(runs, base, tflops, changes))
        print(f"{label:92} {tflops:6.1f} TFLOP/s -> published {row['published_s']:6.3f} s, predicted "
              f"{row['predicted_s']:6.3f} s ({row['time_error']:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
