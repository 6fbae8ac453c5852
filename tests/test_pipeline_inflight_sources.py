"""The planner's pipeline in-flight counts and per-micro-batch stage memory against the engines'
own schedule code (issue 13, Llama 3 405B in core; benchmarks/published_runs_model.md, n17dense)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.pipeline.profile import inflight_microbatches
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


def _megatron_core_held(pp: int, vpp: int, m: int, rank: int) -> int:
    """Megatron-core schedules.py get_pp_rank_microbatches (interleaved): warm-up
    (pp - r - 1) * 2 + (vpp - 1) * microbatch_group_size_per_vp_stage (= pp by default), all
    m * vpp when that is more; then one steady forward before the first backward."""
    warmup = (pp - rank - 1) * 2 + (vpp - 1) * pp
    return m * vpp if warmup >= m * vpp else warmup + 1


def _torch_held(pp: int, vpp: int, m: int, rank: int) -> int:
    """torch.distributed.pipelining ScheduleInterleaved1F1B `_get_warmup_ops` (multiply_factor 2,
    microbatches_per_round = m // max(1, m // pp)), capped at m * vpp, plus one steady forward."""
    per_round = m // max(1, m // pp)
    warmup = min((vpp - 1) * per_round + 2 * ((pp - 1) - rank), m * vpp)
    return min(warmup + 1, m * vpp)


@pytest.mark.parametrize("m", [32, 16])
def test_llama3_405b_interleaved_in_flight_is_megatron_core_s_and_torch_s(m):
    """Llama 3 405B, pp 16, vpp 8 (Dubey et al. 2024 Table 4: 32 / 16 sequences per DP group): rank
    r holds 2 (15 - r) + 7 x 16 + 1 chunk forwards at m = 32 (rank 1: 141) and every one of the
    m vpp = 128 at m = 16 (Megatron's are_all_microbatches_in_warmup)."""
    pp, vpp = 16, 8
    for rank in range(pp):
        held = _megatron_core_held(pp, vpp, m, rank)
        assert held == _torch_held(pp, vpp, m, rank)
        assert inflight_microbatches("interleaved", pp, rank, m, vpp) == Fraction(held, vpp)
    assert _megatron_core_held(pp, vpp, 32, 1) == 141
    assert _megatron_core_held(pp, vpp, 16, 1) == 128


def _gpt(layers: int = 8) -> TransformerSpec:
    return TransformerSpec(layers=layers, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200,
                           position="learned", norm="layernorm", norm_bias=True, qkv_bias=True,
                           attn_out_bias=True, mlp_bias=True, gated_mlp=False, activation="gelu",
                           tied_embeddings=True, dropout=True)


def _cluster() -> Cluster:
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    link = Link(name="l", bandwidth_gbps=100.0, latency_us=1.0)
    return Cluster(name="c", accelerator=acc, gpus_per_node=8, intra=link, inter=link)


def test_megatron_last_interleaved_rank_keeps_blocks_and_one_head_only():
    """Megatron, interleaved pp 4 x vpp 2, m 8, L 8 (one block per chunk), tp 2 + SP, s 2048: the
    last rank holds (vpp - 1) pp + 1 = 5 chunk forwards of one block, s b h (34 + 5 a s / h) / t
    each (Korthikanti et al. 2022 Table 2), and the head's 4 s b h (1 + V/h) / t (Megatron
    theoretical_memory_usage.py) once; no stage input or output per in-flight micro-batch
    (Megatron-LM argument_utils.py sets deallocate_pipeline_outputs = True: the output's .data is
    freed after its send; the input is the first block's own saved input)."""
    s, b, h, a, t, pp, vpp, layers, vocab = 2048, 1, 1024, 16, 2, 4, 2, 8, 51200
    ev = Evaluator(_gpt(layers), TrainingSpec(global_batch=8, seq_len=s, attention="eager", framework="megatron"),
                   _cluster())
    _, last = ev.memory(PlanPoint(tp=t, pp=pp, dp=1, vpp=vpp, schedule="interleaved", micro_batch=b,
                                  sequence_parallel=True))
    per_layer = s * b * h * (34 + 5 * a * s // h) // t
    head = 4 * s * b * (h + vocab) // t
    assert last.activations == 5 * per_layer + head
