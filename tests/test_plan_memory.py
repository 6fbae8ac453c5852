"""Planner memory (modelplan.plan.memory): ZeRO model states, in-flight micro-batches, stage totals."""

from __future__ import annotations

from fractions import Fraction

import pytest

from modelplan.plan.evaluator import Evaluator
from modelplan.plan.evaluator import PlanPoint
from modelplan.plan.parallel.dp_zero import state_bytes as model_state_bytes, state_bytes_per_param
from modelplan.plan.pipeline import pipeline_schedule
from modelplan.plan.pipeline.profile import inflight_microbatches
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

P = 1_000_000_000
ADAM_MIXED = state_bytes_per_param(optimizer_states=2, master_weights=True)  # 12 = 4 master + 8 m, v


def test_megatron_18_bytes_per_parameter():
    """bf16 weight 2 + fp32 grad 4 + fp32 master/m/v 12 = 18 bytes (training_formulas.md 1.2)."""
    assert sum(model_state_bytes(P, 0, 1, 0, 2, 4, ADAM_MIXED)) == 18 * P


def test_distributed_optimizer_6_plus_12_over_d():
    """ZeRO-1 / Megatron distributed optimizer: 6 + 12/d bytes per parameter (d = 8: 7.5)."""
    assert sum(model_state_bytes(P, 0, 8, 1, 2, 4, ADAM_MIXED)) == pytest.approx(7.5 * P)


def test_zero2_shards_gradients():
    """ZeRO-2 with K = 12 and 2-byte grads: 2 + (2 + 12)/d (Rajbhandari et al. 2020, fig. 1)."""
    assert sum(model_state_bytes(P, 0, 64, 2, 2, 2, ADAM_MIXED)) == pytest.approx((2 + 14 / 64) * P)


def test_zero3_shards_everything_and_holds_two_gathered_blocks():
    """ZeRO-3: (2 + 2 + 12)/d per parameter, plus the current and the prefetched block in bf16."""
    layer = 10_000_000
    got = sum(model_state_bytes(P, layer, 64, 3, 2, 2, ADAM_MIXED))
    assert got == pytest.approx(16 * P / 64 + 2 * layer * 2)


def _max_in_flight(steps) -> int:
    """Largest number of forwards whose backward has not run yet, counted on the schedule itself."""
    live = peak = 0
    for step in steps:
        live += 1 if step.kind == "F" else -1
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("pp,m", [(4, 8), (4, 2), (8, 16), (2, 1)])
def test_1f1b_in_flight_matches_the_schedule(pp, m):
    """1F1B: rank r holds min(pp - r, m) micro-batches (Narayanan et al. 2021), and that is what
    the schedule itself keeps in flight."""
    steps = pipeline_schedule("1f1b", pp, m).actions
    for rank in range(pp):
        assert inflight_microbatches("1f1b", pp, rank, m) == min(pp - rank, m) == _max_in_flight(steps[rank])


@pytest.mark.parametrize("pp,m,vpp", [(4, 8, 2), (4, 4, 3), (2, 8, 4)])
def test_interleaved_in_flight_matches_the_schedule(pp, m, vpp):
    """Interleaved: Megatron's warmup + 1 chunks, min(2(pp - r - 1) + (vpp - 1) pp + 1, m vpp), per
    vpp chunks (Megatron-LM schedules.py num_warmup_microbatches), counted on its order."""
    steps = pipeline_schedule("interleaved", pp, m, vpp).actions
    for rank in range(pp):
        chunks = min(2 * (pp - rank - 1) + (vpp - 1) * pp + 1, m * vpp)
        assert inflight_microbatches("interleaved", pp, rank, m, vpp) == Fraction(chunks, vpp)
        assert _max_in_flight(steps[rank]) == chunks


def test_interleaved_first_stage_factor():
    """First stage holds 1 + (p-1)/(p v) of 1F1B's p micro-batches (Korthikanti et al. 2022, sec. 4.3)."""
    pp, vpp = 4, 2
    assert inflight_microbatches("interleaved", pp, 0, 64, vpp) == pytest.approx(pp * (1 + (pp - 1) / (pp * vpp)))


def test_gpipe_holds_every_micro_batch():
    """GPipe stashes all m micro-batches on every stage."""
    assert inflight_microbatches("gpipe", 4, 3, 16) == 16


def _gpt(layers: int = 8) -> TransformerSpec:
    return TransformerSpec(layers=layers, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200,
                           position="learned", norm="layernorm", norm_bias=True, qkv_bias=True,
                           attn_out_bias=True, mlp_bias=True, gated_mlp=False, activation="gelu",
                           tied_embeddings=True, dropout=True)


def _cluster() -> Cluster:
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    link = Link(name="l", bandwidth_gbps=100.0, latency_us=1.0)
    return Cluster(name="c", accelerator=acc, gpus_per_node=8, intra=link, inter=link)


def test_first_stage_activations_korthikanti():
    """TP 2 + SP, 1F1B, pp 4, L 8, s 2048, b 1: the first stage keeps L/p blocks x p micro-batches
    of s b h (34 + 5 a s / h) / t bytes, plus p embedding inputs (8 s b token ids + s b h / t mask)
    (Korthikanti et al. 2022, sec. 4.2.2 and 4.3: 'about L x per-layer, independent of p')."""
    s, b, h, a, t, pp, layers = 2048, 1, 1024, 16, 2, 4, 8
    ev = Evaluator(_gpt(layers), TrainingSpec(global_batch=8, seq_len=s, attention="eager"), _cluster())
    first, _ = ev.memory(PlanPoint(tp=t, pp=pp, dp=1, micro_batch=b, sequence_parallel=True))
    per_layer = s * b * h * (34 + 5 * a * s // h) // t
    embedding = 8 * s * b + s * b * h // t
    assert first.activations == layers // pp * pp * per_layer + pp * embedding


def test_stage_total_adds_buffers_fragmentation_and_reserved():
    """total = allocated + fragmentation + reserved, allocated = states + activations + buffers,
    fragmentation a fraction of the activations and buffers only (states are contiguous buffers)."""
    cost = CostModel(fragmentation_fraction=0.1, runtime_reserved_bytes=123)
    ev = Evaluator(_gpt(), TrainingSpec(global_batch=8, seq_len=1024), _cluster(), cost)
    first, _ = ev.memory(PlanPoint(tp=2, pp=2, dp=2, recompute="full", zero=1))
    allocated = first.weights + first.gradients + first.optimizer + first.activations + first.comm_buffers
    assert first.fragmentation == pytest.approx(0.1 * (first.activations + first.comm_buffers))
    assert first.total == pytest.approx(allocated + first.fragmentation + 123)


def test_torch_pipelining_buffers_per_rank_1f1b():
    """torch.distributed.pipelining under 1F1B, pp 4, m 8 (stage.py, torch 2.13): a receive buffer
    per micro-batch for activations (every stage but the first) and for gradients (every stage
    but the last); the in-flight inputs are the blocks' own; fwd_cache keeps each in-flight
    stage output; the last stage keeps all m outputs (output_chunks) or its in-flight one."""
    from modelplan.plan.memory import pipeline_stage_bytes

    B, O, m = 1000, 50_000, 8
    assert pipeline_stage_bytes((0,), 4, m, 4, B, O, True) == (4 * B, 8 * B)
    assert pipeline_stage_bytes((1,), 4, m, 3, B, O, True) == (3 * B, (8 - 3) * B + 8 * B)
    assert pipeline_stage_bytes((3,), 4, m, 1, B, O, True) == (8 * O, (8 - 1) * B)
    assert pipeline_stage_bytes((3,), 4, m, 1, B, O, False) == (1 * O, (8 - 1) * B)


def test_torch_pipelining_buffers_per_chunk_interleaved():
    """Interleaved pp 2 x 2 chunks, m 4: rank 0 runs stages 0 and 2 of 4, rank 1 stages 1 and 3;
    each stage (a PipelineStage of its own) holds its own m receive buffers."""
    from modelplan.plan.memory import pipeline_stage_bytes

    B, O, m = 1000, 50_000, 4
    # stage 0: 4 gradient buffers, 3 outputs; stage 2: 1 spare input + 4 gradient buffers, 3 outputs
    assert pipeline_stage_bytes((0, 2), 4, m, 3, B, O, True) == (6 * B, 9 * B)
    # stage 1: 2 spare inputs + 4 gradient buffers, 2 outputs; stage 3: 2 spare inputs, m logits
    assert pipeline_stage_bytes((1, 3), 4, m, 2, B, O, True) == (2 * B + 4 * O, 8 * B)


def test_torchtitan_last_stage_keeps_every_micro_batch_s_logits():
    """torchtitan, 1F1B pp 2, tp 2 + SP, b 1, s 512: doubling m from 4 to 8 leaves the last rank's
    in-flight micro-batches at 1 but adds 4 kept logits (b s V / tp x 2 bytes, vocab-sharded by
    loss_parallel) and 4 activation-receive buffers (b s / tp x h x 2); Megatron's adds nothing."""
    spec, s, t = _gpt(), 512, 2
    point = PlanPoint(tp=t, pp=2, dp=1, micro_batch=1, sequence_parallel=True, recompute="full")
    grown = {}
    for framework in ("torchtitan", "megatron"):
        last = [Evaluator(spec, TrainingSpec(global_batch=m, seq_len=s, framework=framework), _cluster()).memory(point)[1]
                for m in (4, 8)]
        grown[framework] = (last[1].activations + last[1].comm_buffers) - (last[0].activations + last[0].comm_buffers)
    assert grown["torchtitan"] == 4 * (s * spec.vocab // t * 2) + 4 * (s // t * spec.hidden * 2)
    assert grown["megatron"] == 0


def test_megatron_last_interleaved_rank_keeps_blocks_and_one_head_only():
    """Megatron, interleaved pp 4 x vpp 2, m 8, L 8 (one block per chunk), tp 2 + SP, s 2048: the
    last rank holds (vpp - 1) pp + 1 = 5 chunk forwards of one block, s b h (34 + 5 a s / h) / t
    each (Korthikanti et al. 2022 Table 2), and the head once: the output layer's 2 x 2 s b h / t
    input and (4 + 2) s b V / t for the loss (the fp32 copy of the logits beside the 16-bit logits
    gpt_model.py `_postprocess` still holds, megatron-core 0.16.1; Megatron's estimator,
    theoretical_memory_usage.py, counts only the 4); no stage input or output per in-flight micro-batch
    (Megatron-LM argument_utils.py sets deallocate_pipeline_outputs = True: the output's .data is
    freed after its send; the input is the first block's own saved input)."""
    s, b, h, a, t, pp, vpp, layers, vocab = 2048, 1, 1024, 16, 2, 4, 2, 8, 51200
    ev = Evaluator(_gpt(layers), TrainingSpec(global_batch=8, seq_len=s, attention="eager", framework="megatron"),
                   _cluster())
    _, last = ev.memory(PlanPoint(tp=t, pp=pp, dp=1, vpp=vpp, schedule="interleaved", micro_batch=b,
                                  sequence_parallel=True))
    per_layer = s * b * h * (34 + 5 * a * s // h) // t
    head = (4 * s * b * h + (4 + 2) * s * b * vocab) // t
    assert last.activations == 5 * per_layer + head
