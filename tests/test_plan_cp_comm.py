"""Context-parallel exchange types (`TrainingSpec.cp_comm_type`, plan/parallel/cp.py) against
hand-worked volumes from each engine's code path:

- Transformer Engine all_gather (AttnFuncWithCPAndKVAllGather; Llama 3, Dubey et al. 2024 sec.
  3.3.2): forward and backward each all-gather K, V (cp x one rank's K, V block), backward
  reduce-scatters the full-sequence dK, dV; all exposed;
- a2a (DeepSpeed-Ulysses, Jacobs et al. 2023; TE AttnFuncWithCPAndQKVOA2A): AllToAll of Q, K, V and
  of the output forward, of dO and of dQ, dK, dV backward;
- PyTorch CP (torchtitan): one AllGather of K, V per pass (rotate method allgather, hidden behind
  the first of cp steps) and dK, dV passed round the ring in fp32 in cp steps, the last waited at
  once (torch/distributed/tensor/experimental/_attention.py `_templated_ring_attention_backward`).

Shapes: Llama-like GQA block, hidden 4096, 32 heads of 128, 8 kv heads; b 1, s 32768, cp 4, tp 2,
bf16: this rank's 8192 tokens, 16 heads and 4 kv heads per TP rank, so one K, V block is
2 x 8192 x 4 x 128 x 2 B = 16,777,216 B and the queries 8192 x 16 x 128 x 2 B = 33,554,432 B.
"""

from __future__ import annotations

from typing import get_args

import pytest

from modelplan.comm.ops import Collective
from modelplan.plan.commlist import communication_list
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.parallel.cp import CpSeconds, cp_exposure
from modelplan.plan.problems import Reason
from modelplan.plan.validate import plan_problems
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.load import load_engine
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

LLAMA_GQA = TransformerSpec(layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=11008, vocab=32000)
KV, Q = 2 * 8192 * 4 * 128 * 2, 8192 * 16 * 128 * 2
NO_INTERFERENCE = CostModel(overlap_interference=0.0)


def _cp_items(framework: str, kind: str | None, recompute: str = "none") -> dict:
    training = TrainingSpec(global_batch=1, seq_len=32768, framework=framework, cp_comm_type=kind, recompute=recompute)
    items = communication_list(LLAMA_GQA, training, Plan(tp=2, cp=4))
    return {(i.label, i.op, i.role, i.nbytes): i.count for i in items if i.label.startswith("cp/")}


def test_block_sizes_by_hand():
    assert (KV, Q) == (16_777_216, 33_554_432)


def test_te_all_gather_gathers_kv_twice_and_reduce_scatters_dkv():
    """Megatron / TE all_gather, no recompute: per block one AllGather of 4 x 16,777,216 B in
    forward and one in backward, one ReduceScatter of the full-sequence dK, dV; no ring sends."""
    got = _cp_items("megatron", "all_gather")
    layers = LLAMA_GQA.layers
    assert got == {("cp/attention/kv", Collective.ALL_GATHER, None, 67_108_864): 2 * layers,
                   ("cp/attention/dkv", Collective.REDUCE_SCATTER, None, 67_108_864): layers}


def test_full_recompute_gathers_kv_once_more():
    """The recomputed forward all-gathers K, V again: 3 AllGathers per block."""
    got = _cp_items("megatron", "all_gather", "full")
    assert got[("cp/attention/kv", Collective.ALL_GATHER, None, 67_108_864)] == 3 * LLAMA_GQA.layers


def test_ulysses_all_to_alls_qkv_and_output():
    """a2a: one AllToAll per tensor (DeepSpeed `DistributedAttention` applies `_SeqAllToAll` to
    query, key and value in turn, arXiv 2309.14509 sec. 3.1): forward Q (33,554,432 B per rank),
    K and V (16,777,216 / 2 = 8,388,608 B each) and the output (33,554,432 B); backward dO, dQ,
    dK, dV of the same sizes: 8 AllToAlls per block."""
    got = _cp_items("megatron", "a2a")
    n = LLAMA_GQA.layers
    assert got == {("cp/attention/qkv", Collective.ALL_TO_ALL, None, 33_554_432): n,
                   ("cp/attention/qkv", Collective.ALL_TO_ALL, None, 8_388_608): 2 * n,
                   ("cp/attention/out", Collective.ALL_TO_ALL, None, 33_554_432): 2 * n,
                   ("cp/attention/dkv", Collective.ALL_TO_ALL, None, 33_554_432): n,
                   ("cp/attention/dkv", Collective.ALL_TO_ALL, None, 8_388_608): 2 * n}


def test_torch_all_gather_rotates_fp32_dkv_round_the_ring():
    """torchtitan (rotate method allgather): one AllGather of K, V per forward and per backward;
    dK, dV in fp32 (2 x 16,777,216 B) sent cp = 4 times per block backward."""
    got = _cp_items("torchtitan", None)
    n = LLAMA_GQA.layers
    assert got == {("cp/attention/kv", Collective.ALL_GATHER, None, 67_108_864): 2 * n,
                   ("cp/attention/dkv", Collective.SEND_RECV, "send", 33_554_432): 4 * n,
                   ("cp/attention/dkv", Collective.SEND_RECV, "recv", 33_554_432): 4 * n}


def test_megatron_p2p_ring_is_unchanged_by_the_default():
    """Megatron's default (p2p): cp - 1 = 3 K, V sends per pass, forward and backward, and 3 dK,
    dV sends in backward, each one 16,777,216 B block."""
    got = _cp_items("megatron", None)
    n = LLAMA_GQA.layers
    assert got[("cp/attention/kv", Collective.SEND_RECV, "send", KV)] == 2 * 3 * n
    assert got[("cp/attention/dkv", Collective.SEND_RECV, "send", KV)] == 3 * n


def _seconds(**kw) -> CpSeconds:
    base = dict(kv_send_s=0.0, dkv_send_s=0.0, gather_s=0.0, scatter_s=0.0, qkv_a2a_s=0.0, out_a2a_s=0.0)
    return CpSeconds(**(base | kw))


def test_te_all_gather_is_exposed_whatever_the_attention():
    """TE: 'KV all-gather between CP ranks is exposed': forward 3 s, backward 3 + 2 s, even with
    100 s of attention to hide behind."""
    x = cp_exposure(4, "all_gather", False, _seconds(gather_s=3.0, scatter_s=2.0), 100.0, 200.0, False,
                    NO_INTERFERENCE)
    assert (x.fwd_s, x.bwd_s, x.hidden_s) == pytest.approx((3.0, 5.0, 0.0))


def test_torch_all_gather_hides_behind_the_first_step():
    """PyTorch allgather, cp 4: the 3 s AllGather hides behind one step (4/4 = 1 s forward, 8/4 =
    2 s backward): forward 2 s; backward 1 s of it, the three 1 s fp32 dK, dV sends behind 2 s
    steps hidden, and the last one waited: 1 + 0 + 1 = 2 s."""
    x = cp_exposure(4, "all_gather", True, _seconds(gather_s=3.0, dkv_send_s=1.0), 4.0, 8.0, False,
                    NO_INTERFERENCE)
    assert (x.fwd_s, x.bwd_s) == pytest.approx((2.0, 2.0))
    assert x.hidden_s == pytest.approx(3.0 - 2.0 + 3.0 + 4 * 1.0 - 2.0)


def test_torch_alltoall_rotate_is_a_ring_with_fp32_dkv():
    """PyTorch alltoall (p2p here), cp 4: 3 forward steps of 1 s sends against 0.5 s of attention
    expose 1.5 s; backward 3 steps of 1 + 2 s against 2 s expose 3 s, plus the last 2 s dK, dV."""
    x = cp_exposure(4, "p2p", True, _seconds(kv_send_s=1.0, dkv_send_s=2.0), 2.0, 8.0, False, NO_INTERFERENCE)
    assert (x.fwd_s, x.bwd_s) == pytest.approx((1.5, 5.0))


def test_ulysses_exposes_all_its_all_to_alls():
    """a2a: forward Q, K, V (0.5 s) + output (0.25 s); backward dO + dQ, dK, dV: the same."""
    x = cp_exposure(4, "a2a", False, _seconds(qkv_a2a_s=0.5, out_a2a_s=0.25), 100.0, 200.0, True, NO_INTERFERENCE)
    assert (x.fwd_s, x.bwd_s, x.recompute_s) == pytest.approx((0.75, 0.75, 0.75))


def _ideal() -> Cluster:
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    return Cluster(name="ideal", accelerator=acc, gpus_per_node=8, call_latency_us=0.0,
                   intra=Link(name="nvl", bandwidth_gbps=100.0, latency_us=0.0),
                   inter=Link(name="ib", bandwidth_gbps=10.0, latency_us=0.0))


def test_all_gather_holds_the_whole_sequence_of_kv():
    """TE all_gather's transient buffers: the gathered K, V (4 x 16,777,216 B) and in backward the
    full-sequence dK, dV (as much again): 134,217,728 B, against p2p's send and receive buffers of
    one K, V and one dK, dV block each (4 x 16,777,216 B): 67,108,864 B more working memory."""
    def working(kind):
        ev = Evaluator(LLAMA_GQA, TrainingSpec(global_batch=1, seq_len=32768, cp_comm_type=kind), _ideal())
        return ev.block_terms(2, True, 1, "selective", cp=4).working_bytes
    assert working("all_gather") - working("p2p") == 134_217_728 - 67_108_864


def test_ulysses_needs_heads_per_tp_rank_divisible_by_cp():
    """8 kv heads over tp 2 leave 4 per rank: cp 8 cannot split them (TE: 'The number of attention
    heads needs to be divisible by CP size!'); cp 4 can."""
    training = TrainingSpec(global_batch=1, seq_len=32768, cp_comm_type="a2a")
    reasons = [p.reason for p in plan_problems(LLAMA_GQA, training, Plan(tp=2, cp=8))]
    assert Reason.CP_COMM in reasons
    assert Reason.CP_COMM not in [p.reason for p in plan_problems(LLAMA_GQA, training, Plan(tp=2, cp=4))]


def test_pytorch_cp_has_no_ulysses():
    """torchtitan's CP (PyTorch's rotate methods allgather / alltoall) cannot run a2a."""
    training = TrainingSpec(global_batch=1, seq_len=32768, framework="torchtitan", cp_comm_type="a2a")
    assert Reason.CP_COMM in [p.reason for p in plan_problems(LLAMA_GQA, training, Plan(tp=2, cp=4))]


def test_engine_defaults_are_the_engines_own():
    """Megatron-LM arguments.py `--cp-comm-type` default ['p2p']; torchtitan 9dec370
    `context_parallel_rotate_method` default 'allgather'; DeepSpeed's CP is Ulysses."""
    assert [load_engine(n).cp_comm_type for n in ("megatron", "torchtitan", "deepspeed")] == [
        "p2p", "all_gather", "a2a"]


def test_cli_choices_match_the_spec():
    """`modelplan --help` repeats the choices without importing pydantic; they must stay equal."""
    from modelplan.cli import options
    from modelplan.specs import engine
    assert get_args(options.CpCommType) == get_args(engine.CpCommType)


def _megatron_flags(training: TrainingSpec, plan: Plan) -> dict:
    from _megatron_rules import parse_flags, read_script
    from modelplan.export.engines import export_plan
    return parse_flags(read_script(export_plan("megatron", LLAMA_GQA, training, plan).text)[1])


def test_megatron_export_names_the_planned_exchange():
    """Megatron-LM `--cp-comm-type all_gather` (TE's spelling) for an all_gather plan, and the
    engine's default p2p written out when the plan leaves it to the engine."""
    plan = Plan(dp=1, tp=2, cp=4, sequence_parallel=True)
    flags = _megatron_flags(TrainingSpec(global_batch=4, seq_len=32768, cp_comm_type="all_gather"), plan)
    assert (flags["--context-parallel-size"], flags["--cp-comm-type"]) == ("4", "all_gather")
    assert _megatron_flags(TrainingSpec(global_batch=4, seq_len=32768), plan)["--cp-comm-type"] == "p2p"


def test_megatron_rules_refuse_what_transformer_engine_refuses():
    """validate_args l. 406: a2a+p2p without --hierarchical-context-parallel-sizes; TE: 'allgather'
    (Megatron's help text spelling) is not a TE type; a2a with 4 kv heads per TP rank on cp 8."""
    from _megatron_rules import broken_rules
    base = {"--tensor-model-parallel-size": "2", "--pipeline-model-parallel-size": "1", "--num-layers": "4",
            "--context-parallel-size": "8", "--seq-length": "32768", "--max-position-embeddings": "32768",
            "--num-attention-heads": "32", "--num-query-groups": "8"}
    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert broken_rules(base | {"--cp-comm-type": "all_gather"}, env, 16) == []
    assert len(broken_rules(base | {"--cp-comm-type": "allgather"}, env, 16)) == 1
    assert len(broken_rules(base | {"--cp-comm-type": "a2a+p2p"}, env, 16)) == 1
    assert len(broken_rules(base | {"--cp-comm-type": "a2a"}, env, 16)) == 1
    assert broken_rules(base | {"--cp-comm-type": "a2a", "--context-parallel-size": "4"}, env, 8) == []


def test_ulysses_pays_three_call_latencies_for_q_k_v():
    """Alpha-beta (a fixed cost per call, independent of the bytes): the Q, K, V exchange is three
    AllToAlls and the output's one, so a per-call latency adds 3x to the first what it adds to the
    second; the bytes stay those of Q + K + V (same seconds without latency)."""
    from test_plan_cp import gpt, ideal_cluster
    training = TrainingSpec(global_batch=8, seq_len=4096)
    fast = Evaluator(gpt(), training, ideal_cluster()).cp_seconds(1, 1, 4)
    slow = Evaluator(gpt(), training, ideal_cluster().model_copy(update={"call_latency_us": 10.0})).cp_seconds(1, 1, 4)
    extra_out = slow.out_a2a_s - fast.out_a2a_s
    assert extra_out > 0
    assert slow.qkv_a2a_s - fast.qkv_a2a_s == pytest.approx(3 * extra_out)
    q, kv = 1024 * 16 * 64 * 2, 2 * 1024 * 16 * 64 * 2  # MHA: K, V together twice Q's bytes
    assert fast.qkv_a2a_s == pytest.approx(fast.out_a2a_s * (q + kv) / q)
