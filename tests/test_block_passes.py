"""Looped blocks in the planner (modelplan.plan.block_passes): Inkling 2 Loop's small config
(tests/test_hf_inkling.py CASES2: 8 MoE blocks of h 128, blocks 2..5 run `loop_num_passes` passes,
message gates of rank 16, a block state every 2 blocks). Expected values worked by hand from
Inkling2LoopTextModel.forward (each loop layer called once a pass; the message path in passes 2..)."""

from __future__ import annotations

import pytest

from test_hf_inkling import CASES2
from test_plan_cp import ideal_cluster
from modelplan.count.conv_relative import loop_message_flops
from modelplan.plan.block_passes import message_gemms, repeated
from modelplan.plan.commlist import communication_list
from modelplan.plan.compute import KernelTimes
from modelplan.plan.evaluator import Evaluator
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

TRAINING = TrainingSpec(global_batch=8, seq_len=256)


def loop(passes: int):
    """Every block sliding, so that the looped and the plain blocks' passes cost the same."""
    return from_hf_config({**CASES2["inkling2_loop"], "loop_num_passes": passes,
                           "layer_types": ["hybrid_sliding"] * 8})


def looped_kind(ev: Evaluator):
    return next(block for block, _ in ev.kinds_of(True) if block.looped)


def test_message_gemms_by_hand():
    """Two later passes over t = 256 tokens, h 128, r 16, S = 3 pooled sources (block states
    ceil(i / 2) + 1 over i = 0..7: 24 // 8): per pass four gates of 2t(2h)r + 2 x 2trh = 8thr and
    the pool's 2 x 2 t 4 S h: 2 x (32 x 256 x 128 x 16 + 16 x 256 x 3 x 128) = 36,700,160 FLOPs, the
    count's figure too."""
    spec = loop(3)
    block = looped_kind(Evaluator(spec, TRAINING, ideal_cluster()))
    assert sum(g.flops for g in message_gemms(spec, block, 256)) == 36_700_160
    assert loop_message_flops(spec, block, 256) == {"message_gates": 36_700_160}
    assert message_gemms(loop(1), block, 256) == []


def test_repeated_keeps_the_edges_once():
    """One pass's seconds x 3 for the block's kernels; the head's and the embedding's once."""
    times = repeated(KernelTimes(*[1.0] * 12), 3)
    assert (times.fwd_gemm_s, times.bwd_elementwise_s, times.core_fwd_s, times.linear_fwd_s) == (3.0, 3.0, 3.0, 3.0)
    assert (times.head_fwd_s, times.head_bwd_s, times.embedding_fwd_s, times.embedding_bwd_s) == (1.0,) * 4


def test_tp_collectives_run_every_pass():
    """tp 2: 4 plain blocks + 4 looped blocks x 3 passes = 16 block runs for 8 blocks, so the mean
    block's exposed TP seconds and the plan's attention f / g calls are 2x those of one pass."""
    one, three = (Evaluator(loop(p), TRAINING, ideal_cluster()) for p in (1, 3))
    assert three.block_terms(2, False, 1, "none", 1, 1).tp_s == pytest.approx(
        2 * one.block_terms(2, False, 1, "none", 1, 1).tp_s)
    plan = Plan(dp=4, tp=2, micro_batch=1)

    def calls(spec, label="tp/attention/in"):
        return sum(i.count for i in communication_list(spec, TRAINING, plan) if str(i.label) == label)
    assert calls(loop(3)) == 2 * calls(loop(1)) and calls(loop(1)) > 0


def test_looped_compute_is_three_passes_plus_messages():
    """The mean block's kernels: (4 plain + 4 x 3 looped passes) / 8 = 2x one pass, plus the
    message GEMMs (forward, dgrad, wgrad; shapes checked above) of 4 blocks / 8."""
    one, three = (Evaluator(loop(p), TRAINING, ideal_cluster()) for p in (1, 3))
    c1, c3 = (ev.block_terms(1, False, 1, "none", 1, 1).compute_s for ev in (one, three))
    gemms = message_gemms(three.spec, looped_kind(three), 256)
    messages = sum(three.roofline.gemm_time_s(x, 2) for g in gemms for x in (g, *g.backward()))
    assert c3 == pytest.approx(2 * c1 + 4 / 8 * messages)


def test_full_recompute_keeps_each_pass_input():
    """Full recompute: each pass's checkpoint keeps its (b, s, h) input, 2 bytes x 256 x 128 = 65,536
    a pass, so 196,608 for 3 passes; the transient is one pass's (the same as with one pass)."""
    one, three = (Evaluator(loop(p), TRAINING, ideal_cluster()) for p in (1, 3))
    kept1, work1 = one.block_bytes(1, False, 1, "full", 1, True, looped_kind(one))
    kept3, work3 = three.block_bytes(1, False, 1, "full", 1, True, looped_kind(three))
    assert (kept1, kept3) == (65_536, 196_608)
    assert work3 == work1
