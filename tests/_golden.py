"""The golden exports: plans every exporter must turn into files its engine accepts.

Each is (id, model preset, training, plan). Degrees are chosen as published runs choose them:
Llama 3 405B's 126 layers on 16 stages (Dubey et al. 2024, sec. 3.3.2: first and last stage one
block lighter), GPT-3 175B on 1,024 GPUs as tp 8 x pp 16 x dp 8 with the interleaved schedule
(Narayanan et al. 2021, Table 1 row of 1,024 GPUs uses tp 8, pp 8, dp 16; pp 16 keeps 6 layers per
rank for vpp 2), Mixtral with one expert per ep rank.
"""

from __future__ import annotations

from modelplan.presets import load_preset
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


def model(name: str) -> TransformerSpec:
    return TransformerSpec(**load_preset("models", name))


GOLDEN = [
    ("llama3-8b-8gpu", "llama-3-8b", TrainingSpec(global_batch=64, seq_len=8192),
     Plan(dp=8, zero=1, micro_batch=1)),
    ("llama3-70b-64gpu", "llama-3-70b",
     TrainingSpec(global_batch=128, seq_len=8192, recompute="selective"),
     Plan(dp=2, tp=8, pp=4, zero=1, sequence_parallel=True)),
    ("mixtral-8x7b-64gpu-ep8", "mixtral-8x7b", TrainingSpec(global_batch=256, seq_len=4096),
     Plan(dp=8, tp=2, pp=4, ep=8, zero=1, sequence_parallel=True)),
    ("gpt3-175b-1024gpu-vpp", "gpt3-175b",
     TrainingSpec(global_batch=1536, seq_len=2048, recompute="full"),
     Plan(dp=8, tp=8, pp=16, vpp=2, schedule="interleaved", sequence_parallel=True, zero=1)),
    ("llama3-8b-16gpu-zero3", "llama-3-8b", TrainingSpec(global_batch=128, seq_len=8192),
     Plan(dp=8, tp=2, zero=3, sequence_parallel=True)),
    ("llama3-8b-8gpu-fp8", "llama-3-8b", TrainingSpec(global_batch=64, seq_len=8192,
                                                      precision="fp8"),
     Plan(dp=4, tp=2, zero=1, sequence_parallel=True)),
    ("llama3-8b-64gpu-cp8-64k", "llama-3-8b", TrainingSpec(global_batch=32, seq_len=65536,
                                                           recompute="full"),
     Plan(dp=4, tp=2, cp=8, zero=1, sequence_parallel=True)),
    ("llama3-8b-32gpu-cp4-allgather", "llama-3-8b",  # Llama 3's all-gather CP (Dubey et al. 2024 sec. 3.3.2)
     TrainingSpec(global_batch=16, seq_len=32768, cp_comm_type="all_gather"),
     Plan(dp=4, tp=2, cp=4, zero=1, sequence_parallel=True)),
    ("llama3-8b-16gpu-cp4-ulysses", "llama-3-8b",  # 32 heads, 8 kv heads: 16 and 4 per tp rank, both / cp 4
     TrainingSpec(global_batch=8, seq_len=32768, cp_comm_type="a2a"),
     Plan(dp=2, tp=2, cp=4, zero=1, sequence_parallel=True)),
    ("llama3-405b-uneven-pp16", "llama-3-405b",
     TrainingSpec(global_batch=256, seq_len=8192, recompute="full"),
     Plan(dp=4, tp=8, pp=16, zero=1, sequence_parallel=True)),
    ("llama3-70b-uneven-vpp3", "llama-3-70b", TrainingSpec(global_batch=64, seq_len=4096),
     Plan(dp=4, tp=4, pp=4, vpp=3, schedule="interleaved", zero=1, sequence_parallel=True)),
]
"""(id, model preset, training, plan) of every golden export."""

IDS = [entry[0] for entry in GOLDEN]
