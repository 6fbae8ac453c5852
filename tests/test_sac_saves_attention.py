"""Per-op selective AC whose save list misses the run's attention kernel (`TrainingSpec.sac_saves_attention`
False: torchtitan 3b85aa31f..b39377f9f on B200 ran cuDNN attention, absent from `_save_list`): the block
keeps neither attention's output nor its log-sum-exp, and the recompute runs the attention core again.
Expected bytes are worked by hand from torchtitan's rule (save the 1st, 3rd, 5th, ... mm output, the SDPA
output, the reduce-scatters) for Llama 3 8B (h 4096, 32 heads, kv width 1024, ffn 14336)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.count.checkpointing import op_sac_kept_per_token
from modelplan.count.memory import activation_bytes_per_layer
from modelplan.plan.compute import KernelTimes
from modelplan.specs.load import load_model

LLAMA = load_model("llama-3-8b")


def test_kept_bytes_per_token_drop_the_attention_output_and_lse():
    """bf16, tp 1: replicated = input 2*4096 + w2 out 2*4096 = 16384; sharded = attention 2*4096 + lse 4*32
    + wq 2*4096 + wv 2*1024 + w1 2*14336 = 47232, and 47232 - 8320 = 38912 without attention."""
    assert op_sac_kept_per_token(LLAMA, 2, 1) == (16384, 47232)
    assert op_sac_kept_per_token(LLAMA, 2, 1, saves_attention=False) == (16384, 38912)


def test_block_activation_bytes_fall_by_the_attention_output():
    """One block, micro-batch 1, 8192 tokens: 8192 x 8320 bytes fewer (attention out + fp32 lse)."""
    kw = dict(recompute="selective", attention="flash", ac_mode="op_sac")
    saved = activation_bytes_per_layer(LLAMA, 1, 8192, 2, **kw)
    recomputed = activation_bytes_per_layer(LLAMA, 1, 8192, 2, sac_saves_attention=False, **kw)
    assert saved - recomputed == 8192 * (2 * 4096 + 4 * 32)


def test_recompute_runs_the_attention_core_again():
    """op_sac recompute = unsaved share of the linears + element-wise (1.0 + 0.5 here), plus the core (2.0)."""
    times = KernelTimes(fwd_gemm_s=10.0, bwd_gemm_s=20.0, fwd_elementwise_s=0.5, bwd_elementwise_s=1.0,
                        core_fwd_s=2.0, core_bwd_s=4.0, head_fwd_s=0.0, head_bwd_s=0.0, embedding_fwd_s=0.0,
                        embedding_bwd_s=0.0, linear_fwd_s=4.0)
    assert times.recompute_s("selective", "op_sac", 0.25) == 1.5
    assert times.recompute_s("selective", "op_sac", 0.25, sac_saves_attention=False) == 3.5


def test_cli_flag_lowers_the_plan_peak():
    """`plan --no-sac-saves-attention` (FSDP 8, op_sac, seq 8192): the peak falls by at least the 32 blocks'
    attention outputs and lse (32 x 8192 x 8320 B = 2.03 GiB on every rank)."""
    base = ["plan", "llama-3-8b", "--gpus", "8", "--cluster", "dgx-h100", "--dp", "8", "--tp", "1", "--pp", "1",
            "--zero", "3", "--micro-batch", "1", "--global-batch", "8", "--seq", "8192", "--recompute", "selective",
            "--ac-mode", "op_sac", "--framework", "torchtitan", "--json", "--top", "1"]
    runner = CliRunner()
    kept = runner.invoke(app, base)
    redone = runner.invoke(app, [*base, "--no-sac-saves-attention"])
    assert kept.exit_code == 0, kept.output
    assert redone.exit_code == 0, redone.output
    peak = [json.loads(r.output)["plans"][0]["predictions"]["memory"]["peak_bytes"] for r in (kept, redone)]
    assert peak[0] - peak[1] >= 32 * 8192 * 8320
