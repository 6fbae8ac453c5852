"""What a memory counter reads (plan/memory_reading.py), and the engine terms n18mem added: the
Megatron loss's 16-bit logits, torchtitan's gathered output head, and the published-memory file."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from modelplan.count.loss_kernels import loss_kernel_peak_bytes
from modelplan.plan.engine import engine_settings
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.memory import edge_activations
from modelplan.plan.memory_reading import READINGS, memory_reading, peak_reading
from modelplan.plan.results import StageMemory
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

MEMORY_RUNS = Path(__file__).resolve().parent.parent / "benchmarks" / "published_runs_memory.toml"


def _stage(stage: int = 0, scale: float = 1.0) -> StageMemory:
    # weights 10, gradients 20, optimizer 30, activations 40, comm 7 of which NCCL's own 4,
    # allocator cache 5, CUDA context 100: allocated 103, reserved 108, device 212
    return StageMemory(stage, 10 * scale, 20 * scale, 30 * scale, 40 * scale, 7 * scale, 5 * scale, 100.0,
                       212 * scale, 4 * scale)


def test_counters_read_what_pytorch_and_nvidia_smi_count():
    """max_memory_allocated: the tensors (NCCL's buffers are not PyTorch's); max_memory_reserved:
    + the caching allocator's cache; nvidia-smi: + CUDA context and NCCL (PyTorch CUDA semantics,
    memory management). Worked by hand from the stage above."""
    s = _stage()
    assert memory_reading(s, "allocated") == 10 + 20 + 30 + 40 + (7 - 4)
    assert memory_reading(s, "reserved") == 103 + 5
    assert memory_reading(s, "device") == 212
    assert peak_reading([_stage(0), _stage(1, 2.0)], "allocated") == 206
    assert READINGS == ("allocated", "reserved", "device")
    with pytest.raises(ValueError, match="memory reading must be one of allocated, reserved, device"):
        memory_reading(s, "nvml")  # type: ignore[arg-type]


def test_megatron_loss_peaks_at_4_plus_d_bytes_per_logit():
    """megatron-core 0.16.1: gpt_model.py `_postprocess` keeps the 16-bit `logits` while
    cross_entropy.py makes and keeps its fp32 copy (calculate_logits_max: .float()), and backward's
    fp32 gradient is cast back beside it: 4 + 2 = 6 bytes per logit with bf16; without the kept
    logits the backward's cast alone makes it 4 + 2 (Megatron's theoretical_memory_usage.py counts 4)."""
    assert loss_kernel_peak_bytes("megatron", 2) == 6
    assert load_engine("megatron").loss_kernel == "megatron"
    spec, s, t = load_model("llama-3-8b"), 2048, 4
    _, head = edge_activations(spec, 1, s, 2, t, True, loss_kernel="megatron")
    # output layer input 2 x 2 s h (Megatron's estimator) + (4 + 2) s V, over t (vocab-parallel)
    assert head == -(-(4 * s * spec.hidden + 6 * s * spec.vocab) // t)


# megatron-core's own vocab-parallel cross-entropy on one gloo rank (CPU) under PyTorch's
# MemTracker, called as gpt_model.py _postprocess calls it: the caller holds the bf16 logits
# during the loss and drops them before backward. Prints the peak bytes per logit.
_MEGATRON_CE_SCRIPT = """
import os, warnings, torch, torch.distributed as dist
warnings.filterwarnings("ignore")
os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = os.environ["PORT"]
dist.init_process_group("gloo", rank=0, world_size=1)
from megatron.core import parallel_state
parallel_state.initialize_model_parallel(1, 1)
from megatron.core.tensor_parallel import vocab_parallel_cross_entropy
from torch.distributed._tools.mem_tracker import MemTracker
S, B, V = 128, 2, 4096
labels = torch.randint(0, V, (S, B))
leaf = torch.randn(S, B, V, dtype=torch.bfloat16, requires_grad=True)
tracker = MemTracker()
with tracker:
    logits = leaf * 1.0
    loss = vocab_parallel_cross_entropy(logits, labels).sum()
    del logits
    loss.backward()
peak = tracker.get_tracker_snapshot("peak")
print(max(v[k] for v in peak.values() for k in v if str(k) == "Total") / (S * B * V))
parallel_state.destroy_model_parallel()
dist.destroy_process_group()
"""


def test_megatron_loss_peak_as_pytorch_measures_it():
    """MemTracker over megatron-core's vocab_parallel_cross_entropy: 6 bytes per bf16 logit."""
    pytest.importorskip("megatron.core")
    env = {**os.environ, "PORT": str(random.randint(20000, 40000))}
    out = subprocess.run([sys.executable, "-c", _MEGATRON_CE_SCRIPT], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert round(float(out.stdout.split()[-1])) == loss_kernel_peak_bytes("megatron", 2) == 6


def _cluster() -> Cluster:
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    link = Link(name="l", bandwidth_gbps=100.0, latency_us=1.0)
    return Cluster(name="c", accelerator=acc, gpus_per_node=8, intra=link, inter=link)


def test_torchtitan_keeps_the_output_head_gathered_under_fsdp():
    """Llama 3 8B, FSDP2 over 8 GPUs, no PP (torchtitan): the gathered bf16 parameters at the
    loss's peak are two blocks (the one computing and the prefetched next, `fsdp.UNITS_IN_FLIGHT`)
    and the output head, which torchtitan does not reshard after forward. Block: q, o 4096^2, k, v
    4096 x 1024, w1, w2, w3 4096 x 14336, two norms 4096 = 218,112,000 parameters; head: final
    norm 4096 + output 128256 x 4096 = 525,340,672 (Llama-3-8B config.json). FSDP2 keeps no bf16
    shard (the sharded parameter is the fp32 master, in `optimizer`). Megatron-FSDP keeps no head."""
    block, head = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096, 4096 + 128256 * 4096
    assert (block, head) == (218_112_000, 525_340_672)
    spec = load_model("llama-3-8b")
    point = PlanPoint(tp=1, pp=1, dp=8, zero=3, micro_batch=1, recompute="full")
    titan = Evaluator(spec, TrainingSpec(global_batch=8, seq_len=1024, framework="torchtitan"), _cluster())
    assert titan.memory(point)[0].weights == 2 * (2 * block + head)
    assert engine_settings(titan.training, load_engine("torchtitan")).head_stays_gathered
    assert not load_engine("megatron").head_stays_gathered


def test_published_memory_runs_state_what_they_measured():
    """Every run of published_runs_memory.toml is held out, names the counter it read (the first
    word of memory_kind), and its other readings are ordered allocated <= reserved <= device, as
    the counters nest; memory_gib is the reading of its own kind."""
    runs = tomllib.loads(MEMORY_RUNS.read_text())["runs"]
    assert len(runs) >= 8
    for run in runs:
        kind = run["memory_kind"].split(" ", 1)[0]
        assert run["split"] == "holdout" and kind in READINGS, run["id"]
        readings = run.get("memory_readings", {})
        assert set(readings) <= set(READINGS), run["id"]
        if kind in readings:
            assert readings[kind] == run["memory_gib"], run["id"]
        ordered = [readings[k] for k in READINGS if k in readings]
        assert ordered == sorted(ordered), run["id"]


def test_megatron_345m_report_memory_converts_mib_to_gib():
    """Megatron's report_memory divides by 1024 x 1024 ('MB' = MiB): 8786.0 MB = 8.580 GiB, the
    DP 4 run's max reserved (liguodongiot/llm-action model_train.md)."""
    run = next(r for r in tomllib.loads(MEMORY_RUNS.read_text())["runs"] if r["id"] == "megatron_gpt345m_a800_dp4_mem")
    assert run["memory_gib"] == pytest.approx(8786.0 / 1024, abs=5e-4)
    assert run["memory_readings"]["allocated"] == pytest.approx(8696.8515625 / 1024, abs=5e-4)


def test_gpt345m_spec_matches_the_count_megatron_printed():
    """The memory runs' inline GPT-345M (vocab padded to 50304, learned positions, tied
    embeddings) has the 354,871,296 parameters Megatron-LM printed for rank (0, 0) at tp 1, pp 1
    ('number of parameters on (tensor, pipeline) model parallel rank (0, 0): 354871296')."""
    from modelplan.count.params import count_params
    from modelplan.specs.load import model_from_dict

    run = next(r for r in tomllib.loads(MEMORY_RUNS.read_text())["runs"] if r["id"] == "megatron_gpt345m_a800_dp4_mem")
    assert count_params(model_from_dict(dict(run["spec"]), run["id"])).total == 354_871_296
