"""Per-op SAC (torchtitan `selective_ac_option = "op"`) re-gathers the sequence-parallel inputs in
its recompute: torchtitan's save list holds `_c10d_functional.reduce_scatter_tensor` but not
`all_gather_into_tensor` (torchtitan parallelize_llama.py `_save_list`, activation_checkpoint.py
`comm_ops`), so the two forward AllGathers of each block (Korthikanti et al. 2022 fig. 5) run again."""

import pytest

from modelplan.count.checkpointing import op_sac_recomputed_shares
from modelplan.comm.ops import Collective
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.parallel.tp import TpSeconds, forward_gather_calls, tp_exposure
from modelplan.specs.costmodel import CostModel
from modelplan.specs.load import load_model


def test_llama3_8b_recomputed_gemm_shares_by_hand():
    """Llama 3 8B (h 4096, 32 q heads and 8 kv heads of 128, ffn 14336; Meta's config.json): per
    token wq 4096^2, wk = wv 4096 x 1024, wo 4096^2, w1 = w3 = w2 4096 x 14336, i.e. 4, 1, 1, 4, 14,
    14, 14 units of 4096 x 1024 (52 in all). SAC saves the 1st, 3rd, 5th, 7th mm (wq, wv, w1, w2),
    so wk (1/52) is redone from the attention input and w3 (14/52) from the MLP input."""
    shares = op_sac_recomputed_shares(load_model("llama-3-8b"))
    assert shares["qkv"] == pytest.approx(1 / 52)
    assert shares["fc1"] == pytest.approx(14 / 52)


def test_regathered_recompute_adds_the_forward_gathers():
    """A block of 8 equal SP collectives of 1 s (4 forward, 4 backward) whose 2 forward AllGathers
    (2 s) run again in the recompute: nothing overlapped (tp_exposed_fraction 1), 4 s forward,
    4 s backward, 2 s recompute; without the re-gather no recompute traffic."""
    cost = CostModel(tp_exposed_fraction=1.0)
    t = TpSeconds(block_s=8.0, block_recompute_s=12.0, embedding_s=0.0, head_s=0.0, gathers_fwd_s=2.0)
    x = tp_exposure(t, 0.0, cost, None, 8, regathered=True)
    assert (x.fwd_s, x.bwd_s, x.recompute_s) == pytest.approx((4.0, 4.0, 2.0))
    assert tp_exposure(t, 0.0, cost, None, 8).recompute_s == 0.0
    # full recompute re-runs all 4 forward calls (12 - 8 s), and the re-gather comes on top only
    # when asked for: the evaluator asks only under selective op_sac
    assert tp_exposure(t, 1.0, cost, None, 8).recompute_s == pytest.approx(4.0)


def test_forward_gathers_are_the_two_sp_allgathers_of_a_block():
    """Under SP a block enters attention and the MLP through f = AllGather of its (b, s, h) input
    in forward (Korthikanti et al. 2022 fig. 5): two AllGathers of 12 x 8192 x 4096 bf16 values
    (805,306,368 bytes) per block; without SP f is the identity in forward, nothing is re-gathered.
    The 1-byte fp8 gathers (torchtitan tensorwise float8) carry half of it."""
    calls = RankCalls()
    forward_gather_calls(calls, 8, True, 805_306_368, 1)
    assert [(k[0], k[3], n) for k, n in calls.counts.items()] == [(Collective.ALL_GATHER, 805_306_368, 1)] * 2
    fp8 = RankCalls()
    forward_gather_calls(fp8, 8, True, 805_306_368, 1, gather_bytes=402_653_184)
    assert sum(k[3] * n for k, n in fp8.counts.items()) == 805_306_368
    none = RankCalls()
    forward_gather_calls(none, 8, False, 805_306_368, 1)
    assert not none.counts


def test_communication_list_lists_the_regathers():
    """Llama-7B-shaped model (32 layers, h 4096), b 2, s 1024, tp 8, SP, m 4, torchtitan per-op SAC:
    the blocks' TP AllGathers (tp/attention and tp/mlp, forward f + backward of g) rise from
    4 to 6 (b, s, h) gathers per layer and micro-batch: each sends 7/8 x 2 x 1024 x 4096 x 2 B
    = 14,680,064 B per rank, x 32 layers x 4 micro-batches x 2 more = 3,758,096,384 B."""
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec
    from tests.test_commlist import sent
    from modelplan.plan.commlist import communication_list

    llama = TransformerSpec(layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000)
    plan = Plan(tp=8, micro_batch=2, sequence_parallel=True)

    def gathers(recompute: str) -> int:
        training = TrainingSpec(global_batch=8, seq_len=1024, framework="torchtitan", recompute=recompute,
                                ac_mode="op_sac")
        items = communication_list(llama, training, plan)
        return sum(sent(items, op=Collective.ALL_GATHER, label_prefix=p) for p in ("tp/attention", "tp/mlp"))

    assert gathers("selective") - gathers("none") == 7 * 2 * 1024 * 4096 * 2 // 8 * 32 * 4 * 2 == 3_758_096_384
