"""The loss's cross-entropy kernels per engine (`modelplan.count.loss_kernels`): bytes per logit
moved and held, worked by hand from each implementation's code, Megatron's unfused count checked by
running megatron-core's own `vocab_parallel_cross_entropy`, the engine / run resolution, the one
setting reaching both the step's time and the last stage's memory, and the CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import load_cluster
from typing import get_args

from modelplan.count.loss_kernels import loss_kernel_bytes, loss_kernel_launches, loss_kernel_peak_bytes
from modelplan.export.megatron import megatron_arguments
from modelplan.plan.engine import engine_settings
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.kernels import head_kernels
from modelplan.specs.engine import LossKernel
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

BF16 = 2


def test_megatron_unfused_bytes():
    """megatron/core/tensor_parallel/cross_entropy.py on bf16 logits: .float() 2 + 4, max 4,
    sub_ 4 + 4, exp(out=) 4 + 4, sum 4, div_ 4 + 4 = 38; backward mul_ 4 + 4, the cast's backward
    4 + 2 = 14; six kernels forward, two backward."""
    assert loss_kernel_bytes("megatron", BF16) == (38, 14)
    assert loss_kernel_launches("megatron") == (6, 2)


def test_megatron_native_fused_bytes():
    """core/fusions/fused_cross_entropy.py, each jit_fuser function one kernel: logits_max writes
    the fp32 copy 2 + 4, predicted_logits subtracts and exps in place 4 + 4, the loss divides in
    place 4 + 4 = 22; calculate_gradients mul_ in place 4 + 4 and .to(bf16) 2 = 10."""
    assert loss_kernel_bytes("megatron_native", BF16) == (22, 10)
    assert loss_kernel_launches("megatron_native") == (3, 1)


def test_transformer_engine_triton_bytes():
    """TE 2.2-2.17 triton/cross_entropy.py: online_softmax_kernel reads X (2), cross_entropy_kernel
    reads X and stores the gradient over it (2 + 2) = 6; element_mul_kernel reads and writes X
    (2 + 2) = 4. TE 2.18 (#3193) writes an fp32 gradient: 2 + 2 + 4 = 8; element_mul 4 + 4 and
    autograd's cast to bf16 4 + 2 = 14."""
    assert loss_kernel_bytes("te", BF16) == (6, 4)
    assert loss_kernel_bytes("te_fp32_grad", BF16) == (8, 14)


def test_eager_compiled_and_flash_attn_bytes():
    """eager F.cross_entropy(logits.float()): (2 + 4) + 16 = 22 forward, 4 + 16 + (4 + 2) = 26
    backward (count.eager); compiled: Inductor's online softmax reads the bf16 logits once (2),
    backward one recompute kernel reading them and writing the bf16 gradient (4); flash-attn
    ops/triton/cross_entropy.py: one online-softmax read (2), backward reads logits, writes
    dlogits (4)."""
    assert loss_kernel_bytes("eager", BF16) == (22, 26)
    assert loss_kernel_bytes("compiled", BF16) == (2, 4)
    assert loss_kernel_bytes("flash_attn", BF16) == (2, 4)


def test_megatron_2022_moves_what_the_in_place_loss_moves():
    """core 55817ec9b9's out-of-place subtract reads 4 and writes 4 as sub_ does: 38 / 14, six and
    two kernels (only what forward holds differs)."""
    assert loss_kernel_bytes("megatron_2022", BF16) == loss_kernel_bytes("megatron", BF16) == (38, 14)
    assert loss_kernel_launches("megatron_2022") == (6, 2)


@pytest.mark.parametrize(("kind", "held"), [
    # megatron-core 0.16.1 cross_entropy.py: the caller's bf16 logits (2) beside calculate_logits_max's
    # fp32 copy (4), which sub_ / exp(out=) / div_ turn into the saved softmax; backward's mul_ is in
    # place and autograd's cast to bf16 (2) sits beside it: 4 + 2 either way
    ("megatron", 6),
    # Megatron-LM 992da75 / microsoft Megatron-DeepSpeed cross_entropy.py: `vocab_parallel_logits =
    # vocab_parallel_logits - logits_max` allocates a second fp32 tensor while the argument's fp32
    # copy lives to the end of forward: 2 + 4 + 4
    ("megatron_2022", 10),
    # core/fusions/fused_cross_entropy.py: calculate_logits_max's fp32 copy beside the bf16 input
    # (2 + 4); calculate_gradients' in-place mul_ and .to(torch.bfloat16) (4 + 2)
    ("megatron_native", 6),
    # TE triton/cross_entropy.py: the gradient stored over the bf16 input X, scaled in place: 2
    ("te", 2),
    # TE 2.18 (#3193): a new fp32 gradient beside the bf16 logits (2 + 4), then cast (4 + 2)
    ("te_fp32_grad", 6),
    # F.cross_entropy(logits.float()): saved fp32 log-softmax, nll's fp32 gradient, log_softmax's
    # fp32 input gradient: 3 x 4
    ("eager", 12),
    # torch.compile: the bf16 logits saved, the bf16 gradient written by one recompute kernel: 2 + 2
    ("compiled", 4),
    # flash-attn ops/triton/cross_entropy.py: logits saved, dlogits = torch.empty_like(logits): 2 + 2
    ("flash_attn", 4),
])
def test_peak_bytes_per_logit_each_kernel(kind, held):
    """What each kernel holds per bf16 logit at its peak, worked from its code."""
    assert loss_kernel_peak_bytes(kind, BF16) == held


def test_every_kind_is_counted_for_time_and_memory():
    """No kind the setting accepts lacks a time or a memory count (fp32 logits: d = 4)."""
    for kind in get_args(LossKernel):
        assert min(loss_kernel_bytes(kind, 4)) > 0 and min(loss_kernel_launches(kind)) > 0
        assert loss_kernel_peak_bytes(kind, 4) >= 4  # at least the logits or their fp32 copy
    with pytest.raises(ValueError, match="loss_kernel"):
        loss_kernel_peak_bytes("fused", BF16)  # type: ignore[arg-type]


def test_one_setting_drives_the_step_time_and_the_last_stage_memory():
    """Llama 3 8B on 8 H100, dp 8, micro-batch 1 of 4,096 tokens: `loss_kernel = "te"` instead of
    Megatron's unfused loss makes the step faster and the stage hold (6 - 2) x 4,096 x 128,256 B
    less (one micro-batch in flight), and the plan's engine note names the kernel and its 2 B."""
    spec, cluster = load_model("llama-3-8b"), load_cluster("dgx-h100")
    plan = Plan(dp=8, micro_batch=1)
    unfused = estimate_plan(spec, TrainingSpec(global_batch=32, seq_len=4096), plan, cluster)
    te = estimate_plan(spec, TrainingSpec(global_batch=32, seq_len=4096, loss_kernel="te"), plan, cluster)
    assert te.step.step_time_s < unfused.step.step_time_s
    assert unfused.memory[0].activations - te.memory[0].activations == (6 - 2) * 4096 * 128_256
    assert any("loss te cross-entropy (2 B/logit held)" in note for note in te.notes)


def test_unknown_kind_is_a_domain_error():
    """A kind no engine runs is refused with the field's name."""
    with pytest.raises(ValueError, match="loss_kernel"):
        loss_kernel_bytes("fused", BF16)  # type: ignore[arg-type]


def test_megatron_count_matches_megatron_core_itself():
    """Running megatron-core's vocab_parallel_cross_entropy (tp 1) on bf16 logits, the bytes its
    aten ops read and write per logit are the count: 38 forward, 14 backward."""
    pytest.importorskip("megatron.core")
    script = Path(__file__).parent / "data" / "megatron_loss_bytes.py"
    with socket.socket() as free:  # a port no other session's process group holds
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["38", "14"]


def test_head_kernels_price_the_named_loss():
    """2 sequences of 8 tokens, vocab 1,024 over tp 2: 8,192 logits per rank; the TE loss moves
    6 and 4 bytes per logit (49,152 B / 32,768 B), Megatron's unfused 38 and 14."""
    spec = load_model("gpt2").model_copy(update={"vocab": 1024})
    _, ew = head_kernels(spec, 2, 2, 8, BF16, 1024, loss_kernel="te")
    loss = next(e for e in ew if e.name == "head/cross_entropy")
    assert (loss.elements, loss.fwd_bytes, loss.bwd_bytes) == (8192, 49_152, 32_768)
    _, ew = head_kernels(spec, 2, 2, 8, BF16, 1024)  # fused element-wise ops: Megatron's loss
    loss = next(e for e in ew if e.name == "head/cross_entropy")
    assert (loss.fwd_bytes, loss.bwd_bytes) == (8192 * 38, 8192 * 14)


@pytest.mark.parametrize(("engine", "training", "kind"), [
    ("megatron", {}, "megatron"),  # --cross-entropy-loss-fusion is off by default
    ("megatron", {"loss_kernel": "te"}, "te"),  # the run's fusion impl wins
    ("deepspeed", {}, "megatron_2022"),  # Megatron-DeepSpeed: core's 2022-09 unfused code
    ("foundry", {}, "flash_attn"),  # llm-foundry loss_fn fused_crossentropy
    ("fsdp", {}, "eager"),  # HF Trainer
    ("torchtitan", {}, "eager"),
    ("torchtitan", {"compile": True}, "compiled"),  # build_cross_entropy_loss compiles it
    ("torchtitan", {"compile": True, "compile_loss": False}, "eager"),  # Dec 2024: left eager
])
def test_engine_and_run_choose_the_loss(engine, training, kind):
    """The run's `loss_kernel` where it names one, else the engine's, compiled when
    torch.compile covers an eager loss."""
    spec = TrainingSpec(global_batch=8, seq_len=1024, framework=engine, **training)
    assert engine_settings(spec, load_engine(engine)).loss_kernel == kind


def test_cli_loss_kernel_option_and_its_error():
    """`plan --loss-kernel te` prices; an unknown kind exits 2 with a one-line error naming it."""
    runner = CliRunner()
    base = ["plan", "gpt2", "--gpus", "8", "--cluster", "dgx-a100", "--batch", "64", "--seq", "1024", "--top", "1"]
    assert (result := runner.invoke(app, [*base, "--loss-kernel", "te"])).exit_code == 0, result.output
    bad = runner.invoke(app, [*base, "--loss-kernel", "bogus"])
    assert bad.exit_code == 2 and "--loss-kernel" in bad.output and "Traceback" not in bad.output


@pytest.mark.parametrize(("kind", "flags"), [
    ("megatron", {}),
    ("megatron_native", {"--cross-entropy-loss-fusion": None}),  # the impl defaults to native
    ("te", {"--cross-entropy-loss-fusion": None, "--cross-entropy-fusion-impl": "te"}),
])
def test_megatron_export_writes_the_fusion_flags(kind, flags):
    """Megatron-LM arguments.py: --cross-entropy-loss-fusion (store_true), --cross-entropy-fusion-impl
    {native, te} (default native)."""
    written = megatron_arguments(load_model("llama-3-8b"), TrainingSpec(global_batch=8, loss_kernel=kind),
                                 Plan(dp=8)).flags()
    assert {k: v for k, v in written.items() if k.startswith("--cross-entropy")} == flags
