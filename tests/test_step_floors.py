"""The search's step-time floors (`plan/flop_floor.py`, `Evaluator.block_flop_floor_s`,
`compute_floor_s`, `pipeline_floor_s`, `step_lower_bound_s`): each never above the next and none
above the step time `evaluate` prices, on a sample of models, degrees and settings; and the FLOP
floor of a hand-built block equals FLOPs / rate worked by hand (2 m n k per GEMM, dgrad and
wgrad the same FLOPs again; FlashAttention-2's 4 b s_q s_k d forward, 2.5 x that backward).

A floor above its true value would drop a plan that belongs in the top-k: these tests are how
that shows up."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.count.attention import FusedAttention
from modelplan.plan.compute import Roofline
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.flop_floor import flop_floor_s
from modelplan.plan.kernels import Elementwise, Gemm, LayerKernels
from modelplan.plan.memory import block_activations
from modelplan.specs.finetune import FinetuneSpec
from modelplan.specs.load import load_model
from modelplan.specs.training import TrainingSpec

A100 = load_cluster("dgx-a100")
H100 = load_cluster("dgx-h100")


def test_flop_floor_of_a_hand_built_block():
    """One GEMM (4096 x 4096 x 1024) and one non-causal flash call: the floor is their FLOPs over
    the rates, forward and backward, and no element-wise kernel counts."""
    roof = Roofline(matmul_flops_per_s=2e14, hbm_bytes_per_s=1e12, overhead_s=5e-6, peak_flops_per_s=3e14,
                    flash_fwd_flops_per_s=1e14, flash_bwd_flops_per_s=5e13)
    attn = FusedAttention("attn", batch=8, s_q=1024, s_k=1024, head_dim=128, causal=False)
    kernels = LayerKernels((Gemm("mlp/in", 4096, 4096, 1024),), (Elementwise("norm", 10**9, 4, 6),), (), (), (attn,))
    gemm = 2 * 4096 * 4096 * 1024
    flash_fwd = 4 * 8 * 1024 * 1024 * 128  # Q K^T and P V: 2 x 2 b s_q s_k d
    fwd, bwd = flop_floor_s(kernels, roof)
    assert fwd == pytest.approx(gemm / 2e14 + flash_fwd / 1e14, rel=1e-8)
    assert bwd == pytest.approx(2 * gemm / 2e14 + 2.5 * flash_fwd / 5e13, rel=1e-8)
    assert fwd < gemm / 2e14 + flash_fwd / 1e14  # shaved, never above


CASES = [
    ("gpt3-175b", TrainingSpec(global_batch=64, seq_len=2048, attention="eager"), A100, 1),
    ("llama-3-8b", TrainingSpec(global_batch=32, seq_len=8192), H100, 1),
    ("llama-3-8b", TrainingSpec(global_batch=16, seq_len=65536), H100, 4),  # context parallel
    ("mixtral-8x7b", TrainingSpec(global_batch=32, seq_len=4096), H100, 1),  # MoE: the least class counts
    ("deepseek-v2-lite", TrainingSpec(global_batch=32, seq_len=4096), H100, 1),  # MLA, a dense first block
    ("jamba-v0.1", TrainingSpec(global_batch=32, seq_len=4096), H100, 1),  # Mamba and attention kinds
    ("gpt2", TrainingSpec(global_batch=32, seq_len=1024, precision="fp8"), H100, 1),  # fp8 GEMM rate
    ("llama-3-8b", TrainingSpec(global_batch=32, seq_len=4096, framework="torchtitan"), H100, 1),  # per-op SAC
]


@pytest.mark.parametrize("model, training, cluster, cp", CASES)
def test_floors_never_exceed_the_priced_step(model, training, cluster, cp):
    """For every tp, micro-batch, SP and recompute of the sample: FLOP floor <= block floor per
    block, and for each pipeline point FLOP-based compute floor <= compute floor <= pipeline
    floor <= step lower bound <= the step time `evaluate` prices, under every ZeRO stage."""
    spec = load_model(model)
    ev = Evaluator(spec, training, cluster)
    ep = 4 if spec.moe is not None else 1
    checked = 0
    for tp in (1, 2, 4):
        for mb in (1, 2):
            for rc in ("none", "selective", "full"):
                flop_s = ev.block_flop_floor_s(tp, mb, rc, ep, cp)
                assert flop_s is not None and flop_s > 0
                for sp in ([False, True] if tp > 1 else [False]):
                    tpos = ["none"]
                    block_s = ev.block_floor_s(tp, sp, mb, rc, ep, cp, tpos)
                    assert flop_s <= block_s
                    for pp, sched, vpp in ((1, "1f1b", 1), (2, "1f1b", 1), (2, "interleaved", 2)):
                        dp = 8 // pp
                        cls = (tp, pp, dp, vpp, mb, sched, sp, rc, ep, cp)
                        lower = ev.compute_floor_s(cls, tpos, flop_s)
                        compute = ev.compute_floor_s(cls, tpos, block_s)
                        pipeline = ev.pipeline_floor_s(cls, tpos, ["tp-cp-dp-pp"])
                        assert lower <= compute <= pipeline
                        for zero in (0, 1, 3):
                            point = PlanPoint(tp, pp, dp, vpp, mb, sched, sp, rc, zero, ep, cp, tp_overlap="none")
                            bound = ev.step_lower_bound_s(point)
                            step = ev.evaluate(point).step.step_time_s
                            assert pipeline <= bound * (1 + 1e-12) and bound <= step * (1 + 1e-12)
                            checked += 1
    assert checked == 2 * 3 * 3 * 3 + 2 * 2 * 3 * 2 * 3 * 3  # tp 1 (no SP); tp 2, 4 (SP off and on)


def test_a_fine_tune_has_no_flop_floor():
    """LoRA's frozen weights skip their weight gradients (fewer FLOPs than a full backward): no
    FLOP floor, so the search starts such points at their compute floor."""
    lora = TrainingSpec(global_batch=16, seq_len=512, finetune=FinetuneSpec(method="lora", lora_rank=8))
    ev = Evaluator(load_model("llama-3-8b"), lora, H100)
    assert ev.block_flop_floor_s(1, 1, "none") is None


@pytest.mark.parametrize("model, training", [
    ("llama-3-8b", TrainingSpec(global_batch=32, seq_len=8192)),
    ("llama-3-8b", TrainingSpec(global_batch=16, seq_len=65536)),  # cp > 1: the score term cp times
    ("mixtral-8x7b", TrainingSpec(global_batch=32, seq_len=4096)),
    ("llama-3-8b", TrainingSpec(global_batch=32, seq_len=4096, framework="torchtitan")),  # per-op SAC
])
def test_shared_no_recompute_bytes_change_no_figure(model, training):
    """The evaluator hands each recomputing block the bytes it keeps without recompute (counted
    once); the figures equal `memory.block_activations` counting them itself."""
    spec = load_model(model)
    ev = Evaluator(spec, training, H100)
    for tp, sp, mb, cp in ((1, False, 1, 1), (2, True, 2, 1), (4, True, 1, 4), (2, False, 1, 2)):
        for rc in ("selective", "full", "none"):
            for moe in ([False, True] if spec.moe is not None else [False]):
                alone = block_activations(ev.spec, mb, training.seq_len, ev.dtype_bytes, tp, sp, rc, moe,
                                          training.attention, cp, ev.software)
                assert ev.block_bytes(tp, sp, mb, rc, cp, moe, None) == alone
