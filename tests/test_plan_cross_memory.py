"""A decoder built alone whose cross-attention reads image tokens (`seq2seq.cross_memory`: BLIP's
text decoder, VisionEncoderDecoder, Pix2Struct) in the planner's step time (plan/kernels.py,
plan/block_kernels.py cross_kernels, parallel/tp.py). Expected FLOPs worked by hand from Vaswani
et al. 2017 sec. 3.2.3 (2 per multiply-add); the count's same figures are checked against PyTorch's
FlopCounterMode in tests/test_hf_vlm_encdec.py."""

from __future__ import annotations

from _hf_vlm_encdec_cases import CASES
from test_plan_cp import ideal_cluster
from modelplan.count.blocks import block_of
from modelplan.count.seq2seq import memory_cross_flops
from modelplan.plan.commlist import communication_list
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.validate import plan_notes
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

TROCR = "vision-encoder-decoder/trocr-cross"
"""A 4 x 4-patch ViT (+ class token: m = 17 image tokens, 24 wide) and a TrOCR decoder of h 32,
4 heads, whose k / v read the 24-wide encoder output (cross_attention_hidden_size)."""


def cross_flops(spec, tp: int, seq_len: int = 64) -> int:
    kernels = layer_kernels(spec, tp, 1, seq_len, 2, attention="eager", block=block_of(spec, 0))
    return sum(g.flops for g in kernels.gemms if g.name.startswith("cross_attention/"))


def test_cross_attention_flops_by_hand():
    """b 1, t = 64 text tokens, m 17, h = q = kv = 32, kv_in 24: q 2 x 64 x 32 x 32 = 131,072,
    k / v 2 x 17 x 24 x 64 = 52,224, QK^T and AV 4 x 64 x 17 x 32 = 139,264, out 131,072:
    453,632, the count's figure; tp 2 splits every one of them (4 heads, 4 KV heads): 226,816."""
    spec = from_hf_config(CASES[TROCR])
    assert cross_flops(spec, 1) == 453_632 == sum(memory_cross_flops(spec, 64, 64).values())
    assert cross_flops(spec, 2) == 226_816


def test_the_cross_attention_adds_a_norm_and_a_residual():
    """BartDecoderLayer / TrOCRDecoderLayer: encoder_attn_layer_norm and the residual add after
    encoder_attn: three norms and three residual adds a block (self-attention, cross, MLP)."""
    names = [e.name for e in layer_kernels(from_hf_config(CASES[TROCR]), 1, 1, 64, 2, block=block_of(
        from_hf_config(CASES[TROCR]), 0)).elementwise]
    assert names.count("norm") == 3 and names.count("bias_dropout_add") == 3


def test_step_and_tp_calls_price_the_cross_attention():
    """The same decoder without image tokens to read runs no encoder_attn: its block compute is
    smaller, and at tp 2 only the model with them has the cross-attention's f / g calls; the plan
    no longer says the idle cross-attention is priced as baseline blocks."""
    spec = from_hf_config(CASES[TROCR])
    bare = spec.model_copy(update={"seq2seq": spec.seq2seq.model_copy(update={"cross_memory": None})})
    training = TrainingSpec(global_batch=8, seq_len=64)
    with_image, without = (Evaluator(s, training, ideal_cluster()).block_terms(1, False, 1, "none")
                           for s in (spec, bare))
    assert with_image.compute_s > without.compute_s
    plan = Plan(dp=4, tp=2, micro_batch=1)

    def cross_calls(s) -> int:
        return sum(i.count for i in communication_list(s, training, plan) if str(i.label).startswith("tp/cross_attention"))
    assert cross_calls(spec) > 0 == cross_calls(bare)
    assert not any("idle_cross_attention" in note for note in plan_notes(spec, plan))
    assert estimate_plan(spec, training, plan, ideal_cluster()).step.step_time_s > estimate_plan(
        bare, training, plan, ideal_cluster()).step.step_time_s
