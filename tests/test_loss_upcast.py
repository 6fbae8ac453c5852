"""The eager cross-entropy on the 16-bit logits (`TrainingSpec.loss_upcast` False: NeMo AutoModel's
MaskedCrossEntropy(fp32_upcast=False)) against the fp32-upcast loss torchtitan and HF run:
bytes per logit moved (count/eager.py cross_entropy_bytes), held at the peak (cross_entropy_peak_bytes,
measured here with PyTorch's MemTracker), and the plan's last-stage memory and CLI flag."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.count.eager import cross_entropy_bytes
from modelplan.count.loss_kernels import loss_kernel_peak_bytes
from modelplan.plan.engine import engine_settings
from modelplan.plan.memory import edge_activations
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

LLAMA = load_model("llama-3-8b")  # h 4096, vocab 128,256


def test_cross_entropy_bytes_without_the_upcast():
    """bf16 log_softmax passes max d, sum-exp d, output d + d = 8 forward; nll grad d and
    log_softmax backward 4 d = 10 backward (no float() either way); the upcast keeps d + 20, d + 24."""
    assert cross_entropy_bytes(2, upcast=False) == (8, 10)
    assert cross_entropy_bytes(2) == (22, 26)


def test_loss_peak_without_the_upcast_is_three_16_bit_tensors():
    """Kept log-softmax, nll's gradient and log_softmax's input gradient at 2 bytes: 6 (8 under
    loss_parallel); the compiled and Megatron losses do not read it (4 and 4 + 2)."""
    assert loss_kernel_peak_bytes("eager", 2, upcast=False) == 6
    assert loss_kernel_peak_bytes("eager", 2, upcast=False, loss_parallel=True) == 8
    assert loss_kernel_peak_bytes("compiled", 2, upcast=False) == loss_kernel_peak_bytes("compiled", 2) == 4
    assert loss_kernel_peak_bytes("megatron", 2, upcast=False) == loss_kernel_peak_bytes("megatron", 2) == 6


# PyTorch's own F.cross_entropy on bf16 logits (no .float()) under MemTracker, one gloo rank (CPU).
_SCRIPT = """
import os, torch, torch.distributed as dist
os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = os.environ["PORT"]
dist.init_process_group("gloo", rank=0, world_size=1)
from torch.distributed._tools.mem_tracker import MemTracker
N, V = 256, 4096
labels = torch.randint(0, V, (N,))
leaf = torch.randn(N, V, dtype=torch.bfloat16, requires_grad=True)
tracker = MemTracker()
with tracker:
    logits = leaf * 1.0
    loss = torch.nn.functional.cross_entropy(logits, labels)
    del logits
    loss.backward()
peak = tracker.get_tracker_snapshot("peak")
print(max(v[k] for v in peak.values() for k in v if str(k) == "Total") / (N * V))
dist.destroy_process_group()
"""


def test_bf16_loss_peak_as_pytorch_measures_it():
    """MemTracker over F.cross_entropy(bf16 logits): 6 bytes per logit at the peak."""
    pytest.importorskip("torch")
    import os
    import random
    import subprocess
    import sys

    env = {**os.environ, "PORT": str(random.randint(20000, 40000))}
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert round(float(out.stdout.split()[0])) == loss_kernel_peak_bytes("eager", 2, upcast=False) == 6


def test_the_run_setting_reaches_the_last_stage_memory():
    """TrainingSpec(loss_upcast=False) under torchtitan's eager loss: the head holds (12 - 6) bytes
    per logit less on the last stage (tp 1, s 1024: 6 x 1024 x 128,256 bytes)."""
    titan = load_engine("torchtitan")
    base = dict(global_batch=8, seq_len=1024, precision="bf16", framework="torchtitan")
    assert engine_settings(TrainingSpec(**base), titan).loss_upcast
    assert not engine_settings(TrainingSpec(**base, loss_upcast=False), titan).loss_upcast
    _, upcast = edge_activations(LLAMA, 1, 1024, 2, 1, False, loss_kernel="eager")
    _, bf16 = edge_activations(LLAMA, 1, 1024, 2, 1, False, loss_kernel="eager", loss_upcast=False)
    assert upcast - bf16 == 6 * 1024 * 128_256


def test_cli_no_loss_upcast_reaches_the_training_spec():
    args = ["plan", "llama-3-8b", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8", "--zero", "3", "--batch", "16",
            "--seq", "2048", "--micro-batch", "1", "--recompute", "full", "--framework", "torchtitan", "--top", "1",
            "--json"]
    result = CliRunner().invoke(app, [*args, "--no-loss-upcast"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["training"]["loss_upcast"] is False
    base = json.loads(CliRunner().invoke(app, args).output)
    assert doc["plans"][0]["predictions"]["memory"]["stages"][0]["total_bytes"] < \
        base["plans"][0]["predictions"]["memory"]["stages"][0]["total_bytes"]
