"""Fine-tuning counts and memory against their references: PEFT's trainable-parameter count on
published HF configs (when peft, transformers and torch are installed), and QLoRA memory of
LLaMA-65B and LLaMA-7B against what the QLoRA paper (Dettmers et al. 2023, arXiv 2305.14314) states.

    python benchmarks/bench_finetune.py [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modelplan.count.finetune import count_finetune  # noqa: E402
from modelplan.count.lora import count_lora  # noqa: E402
from modelplan.count.params import count_params  # noqa: E402
from modelplan.specs.finetune import FinetuneSpec  # noqa: E402
from modelplan.specs.hf import from_hf_config  # noqa: E402
from modelplan.specs.training import TrainingSpec  # noqa: E402
from modelplan.specs.transformer import TransformerSpec  # noqa: E402

HF = ROOT / "tests" / "data" / "hf"
CASES = [  # (config, targets, rank, layout)
    ("llama-3-8b", ["q_proj", "v_proj"], 8, None),
    ("llama-3-8b", "all-linear", 64, None),
    ("mistral-7b-v0.1", ["q_proj", "k_proj", "v_proj", "o_proj"], 16, None),
    ("qwen2-0.5b", "all-linear", 8, None),
    ("gpt2", ["c_attn"], 8, None),
    ("gpt2", "all-linear", 16, "gpt2"),
]
# LLaMA: Touvron et al. 2023 Table 2 with the HF huggyllama configs (ffn 11008 / 22016, vocab 32000).
LLAMA = {"7B": TransformerSpec(name="LLaMA-7B", layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000),
         "65B": TransformerSpec(name="LLaMA-65B", layers=80, hidden=8192, heads=64, ffn_hidden=22016, vocab=32000)}
# What the paper states in its text: 65B fine-tunes on one 48 GB GPU ("<48GB", abstract and sec. 1);
# the 4-bit 7B base model "consumes 5,048 MB" (sec. 2); double quantization saves "approximately
# 3 GB for a 65B model" (sec. 1).
PAPER = {"65B total": 48e9, "7B base": 5048e6, "65B DQ saving": 3e9}


def peft_table() -> None:
    try:
        import peft
        import torch
        import transformers
    except ImportError:
        print("PEFT comparison skipped: pip install torch transformers peft")
        return
    transformers.logging.set_verbosity_error()
    print(f"PEFT {peft.__version__} get_nb_trainable_parameters vs modelplan (meta-device HF models)")
    print(f"{'config':18} {'targets':44} {'r':>3} {'PEFT trainable':>15} {'modelplan':>15} {'PEFT all':>15} {'equal':>6}")
    for name, targets, rank, layout in CASES:
        data = json.loads((HF / f"{name}.json").read_text())
        cfg = transformers.AutoConfig.for_model(**{k: v for k, v in data.items() if k != "architectures"})
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        theirs = peft.get_peft_model(model, peft.LoraConfig(r=rank, target_modules=targets)).get_nb_trainable_parameters()
        spec = from_hf_config(data)
        ft = FinetuneSpec(method="lora", lora_rank=rank, lora_layout=layout,
                          lora_targets=(targets,) if isinstance(targets, str) else tuple(targets))
        ours = count_lora(spec, ft, count_params(spec).total)
        label = targets if isinstance(targets, str) else ",".join(targets)
        print(f"{name:18} {label:44} {rank:>3} {theirs[0]:>15,} {ours.trainable_params:>15,} {theirs[1]:>15,} "
              f"{str((ours.trainable_params, ours.all_params) == theirs):>6}")


def qlora_table() -> None:
    training = TrainingSpec(global_batch=1, seq_len=512, recompute="full")
    qlora = FinetuneSpec(method="qlora", lora_rank=64, lora_targets=("all-linear",), adapter_dtype="bf16")
    plain = qlora.model_copy(update={"double_quant": False})
    print("\nQLoRA (r 64 on all linear layers, bf16 adapters, paged AdamW 32-bit, batch 1 x 512, checkpointing)")
    m65 = count_finetune(LLAMA["65B"], training, qlora, 1).memory
    saving = count_finetune(LLAMA["65B"], training, plain, 1).memory.frozen_weights_bytes - m65.frozen_weights_bytes
    m7 = count_finetune(LLAMA["7B"], training, qlora, 1).memory
    rows = [("65B total", m65.total_bytes, PAPER["65B total"]),
            ("65B DQ saving", saving, PAPER["65B DQ saving"]),
            ("7B base", m7.frozen_weights_bytes, PAPER["7B base"])]
    print(f"{'figure':16} {'modelplan GB':>13} {'paper GB':>9} {'error':>7}")
    for label, ours, paper in rows:
        print(f"{label:16} {ours / 1e9:>13.2f} {paper / 1e9:>9.2f} {100 * (ours - paper) / paper:>6.1f}%")
    print(f"65B parts: frozen NF4 {m65.frozen_weights_bytes / 1e9:.2f} GB, adapters {m65.trainable_weights_bytes / 1e9:.2f}, "
          f"gradients {m65.gradients_bytes / 1e9:.2f}, optimizer {m65.optimizer_states_bytes / 1e9:.2f}, "
          f"activations {m65.activations_bytes / 1e9:.2f}")
    print("(7B base: the paper's 5,048 MB is a measured footprint; the NF4 weights alone are the figure above)")


def plan_table() -> None:
    """The planner's QLoRA 65B on one and two 80 GB H100s, and LoRA vs full fine-tuning of LLaMA-7B."""
    from modelplan.comm.clusters import load_cluster
    from modelplan.plan.estimate import estimate_plan
    from modelplan.plan.search import SearchSpace, search_plans
    from modelplan.specs.plan import Plan

    h100 = load_cluster("dgx-h100")
    qlora = FinetuneSpec(method="qlora", lora_rank=64, lora_targets=("all-linear",), adapter_dtype="bf16")
    training = TrainingSpec(global_batch=1, seq_len=512, recompute="full", finetune=qlora)
    print("\nplan --finetune qlora, LLaMA-65B (as above) on dgx-h100")
    for gpus in (1, 2):
        best = search_plans(LLAMA["65B"], training, h100, gpus, SearchSpace(recompute=["full"])).best[0]
        p = best.plan
        error = 100 * (best.peak_memory_bytes - PAPER["65B total"]) / PAPER["65B total"]
        versus = f" (paper: <48 GB on one GPU; error {error:.1f}%)" if gpus == 1 else ""
        print(f"{gpus} GPU: tp {p.tp} pp {p.pp} dp {p.dp}: peak {best.peak_memory_bytes / 1e9:.2f} GB per GPU{versus}, "
              f"step {best.step.step_time_s:.3f} s")
    full = TrainingSpec(global_batch=64, seq_len=2048)
    lora = full.model_copy(update={"finetune": FinetuneSpec(method="lora", lora_rank=8)})
    a, b = (estimate_plan(LLAMA["7B"], t, Plan(dp=8, zero=1), h100) for t in (full, lora))
    print(f"LLaMA-7B dp 8, batch 64 x 2048: LoRA r 8 / full fine-tuning: model FLOPs {b.model_flops / a.model_flops:.3f} "
          f"(2/3 without weight gradients), step {b.step.step_time_s:.3f} / {a.step.step_time_s:.3f} s, "
          f"DP traffic {b.step.dp_comm_total_s * 1e3:.2f} / {a.step.dp_comm_total_s * 1e3:.1f} ms, "
          f"peak {b.peak_memory_bytes / 1e9:.1f} / {a.peak_memory_bytes / 1e9:.1f} GB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="QLoRA table only (no torch)")
    args = parser.parse_args()
    if not args.smoke:
        peft_table()
    qlora_table()
    plan_table()


if __name__ == "__main__":
    main()
