"""Host cost of DeepSpeed ZeRO-3's per-module fetch / release hooks (issue 13, n21dszero3; not priced).

The DeepSpeedExamples `training/bf16_master_weight` model (train.py SimpleTransformerBlock: nn.MultiheadAttention,
two LayerNorms, Linear-GELU-Linear; learned positions; untied head; torch.utils.checkpoint per block) under the
example's configs/baseline.json ZeRO settings, at widths small enough that the device does nearly nothing, so the
step is the engine's host work. Compare `--stage 3` with `--stage 1` (same model, same launcher) for ZeRO-3's
hooks. Run with the torch launcher, e.g.

    DS_ACCELERATOR=cpu OMP_NUM_THREADS=1 python -m torch.distributed.run --nproc_per_node 2 \\
        benchmarks/deepspeed_zero3_host_probe.py --stage 3 --layers 32

(on GPUs drop DS_ACCELERATOR and use --backend nccl; --hidden 4096 --seq 512 --nproc_per_node 4 is the published run).
Prints the median and minimum step seconds after 4 warm-up steps (rank 0), timed as train.py times them.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", type=int, default=3)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--backend", default="gloo")
    args = ap.parse_args()

    import deepspeed  # heavy, and only this probe needs it
    import torch
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self, h: int, nh: int):
            super().__init__()
            self.attention = nn.MultiheadAttention(h, nh, batch_first=True)
            self.norm1, self.norm2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.ff = nn.Sequential(nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h))

        def forward(self, x):
            a, _ = self.attention(x, x, x)
            x = self.norm1(x + a)
            return self.norm2(x + self.ff(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(args.vocab, args.hidden)
            self.pos_embedding = nn.Embedding(args.seq, args.hidden)
            self.layers = nn.ModuleList([Block(args.hidden, args.heads) for _ in range(args.layers)])
            self.output_proj = nn.Linear(args.hidden, args.vocab)

        def forward(self, ids):
            b, t = ids.shape
            pos = torch.arange(t, device=ids.device).unsqueeze(0).expand(b, -1)
            x = self.embedding(ids) + self.pos_embedding(pos)
            for layer in self.layers:
                x = checkpoint(layer, x, use_reentrant=False)
            return self.output_proj(x)

    # DeepSpeedExamples training/bf16_master_weight/configs/baseline.json (stage from the command line)
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.999], "eps": 1e-8,
                                                         "weight_decay": 0.01}},
              "bf16": {"enabled": True},
              "zero_optimization": {"stage": args.stage, "overlap_comm": True, "contiguous_gradients": True,
                                    "reduce_bucket_size": 5e7, "stage3_param_persistence_threshold": 0}}
    deepspeed.init_distributed(dist_backend=args.backend)
    model = Model()
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    loss_fn, times = nn.CrossEntropyLoss(), []
    for _ in range(args.steps):
        ids = torch.randint(0, args.vocab, (1, args.seq), device=engine.device)
        start = time.time()
        logits = engine(ids)
        loss = loss_fn(logits.view(-1, args.vocab), ids.view(-1))
        loss.backward()
        engine.step()
        times.append(time.time() - start)
        loss.item()
    if int(os.environ.get("RANK", "0")) == 0:
        steady = sorted(times[4:])
        print(json.dumps({"stage": args.stage, "layers": args.layers, "median_s": steady[len(steady) // 2],
                          "min_s": steady[0]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
