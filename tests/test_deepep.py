"""DeepEP's deduplicated exchange (`modelplan.plan.deepep`): one copy per destination rank (or
node), against hand counts of the routers it reads."""

from __future__ import annotations

from fractions import Fraction

import pytest

from modelplan.plan.deepep import balanced_gate_distinct_groups, deepep_copy_fraction, uniform_distinct_groups


def test_uniform_router_distinct_groups_is_hypergeometric():
    """2 of 8 experts in 4 groups of 2: a group misses both with C(6,2)/C(8,2) = 15/28, so
    4 x 13/28 = 13/7 groups are hit on average."""
    assert uniform_distinct_groups(8, 2, 4) == Fraction(13, 7)


def test_balanced_gate_keeps_a_deepseek_token_on_one_node():
    """FakeBalancedGate gives token t experts 8t..8t+7 mod 256: one aligned block of 8 inside one
    node's 32 experts (EP 64 over 8 nodes), so DeepEP sends 1 of the 8 AllToAll copies."""
    assert balanced_gate_distinct_groups(256, 8, 8) == 1
    assert deepep_copy_fraction(256, 8, 64, 8, balanced_gate=True) == pytest.approx(1 / 8)


def test_balanced_gate_straddles_ranks_when_k_does_not_align():
    """Nemotron 3 Nano (E 128, k 6, EP 8: 16 experts a rank): starts 6t mod 16 cycle through
    0, 6, 12, 2, 8, 14, 4, 10; only 12 and 14 cross a rank boundary -> 1 + 2/8 = 5/4 ranks."""
    assert balanced_gate_distinct_groups(128, 6, 8) == Fraction(5, 4)
    assert deepep_copy_fraction(128, 6, 8, 8, balanced_gate=True) == pytest.approx(5 / 4 / 6)


def test_no_expert_parallelism_sends_everything():
    """ep 1 (nothing leaves the rank) or top-1 routing: no duplicates to drop."""
    assert deepep_copy_fraction(64, 8, 1, 8) == 1.0
    assert deepep_copy_fraction(64, 1, 8, 8) == 1.0


def _moe_spec(experts: int, top_k: int):
    from modelplan.specs.transformer import MoESpec, TransformerSpec

    return TransformerSpec(layers=2, hidden=1024, heads=8, kv_heads=8, ffn_hidden=4096, vocab=1024,
                           moe=MoESpec(num_experts=experts, top_k=top_k, expert_ffn_hidden=2048))


def _a2a_bytes(items) -> set[int]:
    from modelplan.comm.ops import Collective

    return {i.nbytes for i in items if i.op is Collective.ALL_TO_ALL}


def test_communication_list_lists_deepeps_one_copy_per_destination_rank():
    """E 8, k 2, ep 4 in one node of 8 (2 experts a rank), FakeBalancedGate: token t goes to
    experts 2t mod 8 and 2t + 1, both on rank (t mod 4), so DeepEP sends each token once.
    b 2 x s 1024 = 2,048 tokens, h 1024, bf16: the AllToAll dispatcher's buffer at capacity
    factor 1 is k x 2,048 x 1,024 x 2 = 8,388,608 B (top-k copies); DeepEP's is 2,048 x 1,024
    x 2 = 4,194,304 B, and the list says so for dispatch and combine alike."""
    from modelplan.plan.commlist import communication_list
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    spec, plan = _moe_spec(8, 2), Plan(dp=4, ep=4, micro_batch=2)
    plain = TrainingSpec(global_batch=8, seq_len=1024)
    deepep = plain.model_copy(update={"moe_flex_dispatcher": "deepep", "fake_balanced_gate": True})
    assert _a2a_bytes(communication_list(spec, plain, plan, capacity_factor=1.0)) == {8_388_608}
    assert _a2a_bytes(communication_list(spec, deepep, plan, capacity_factor=1.0, gpus_per_node=8)) == {4_194_304}


def test_communication_list_lists_deepeps_one_copy_per_destination_node():
    """E 64, k 4, ep 16 over 2 nodes of 8 (32 experts a node), a learned router read as uniform:
    a token misses a node with C(32, 4) / C(64, 4) = 35,960 / 635,376, so it reaches
    2 (1 - 35,960 / 635,376) = 1.886... nodes; DeepEP sends that / 4 of the top-4 copies:
    16,777,216 x 2 x 599,416 / 635,376 / 4 = 7,913,842.9 -> 7,913,843 B (was 16,777,216)."""
    from modelplan.plan.commlist import communication_list
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    spec, plan = _moe_spec(64, 4), Plan(dp=16, ep=16, micro_batch=2)
    training = TrainingSpec(global_batch=32, seq_len=1024, moe_flex_dispatcher="deepep")
    assert _a2a_bytes(communication_list(spec, training, plan, capacity_factor=1.0, gpus_per_node=8)) == {7_913_843}


def test_communication_list_needs_the_node_size_under_deepep():
    """DeepEP's destinations are ranks inside a node or nodes across them: without the node size
    the list cannot count them, and says which argument is missing."""
    from modelplan.plan.commlist import communication_list
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    training = TrainingSpec(global_batch=8, seq_len=1024, moe_flex_dispatcher="deepep")
    with pytest.raises(ValueError, match="gpus_per_node"):
        communication_list(_moe_spec(8, 2), training, Plan(dp=4, ep=4, micro_batch=2))


def test_planner_prices_the_bytes_the_list_lists():
    """The evaluator's exposed AllToAll seconds of one MoE block are the list's four EP calls per
    block and micro-batch (dispatch and combine, forward and backward) priced on the EP group,
    both at the planner's dropless capacity (a drift between the two rules fails here)."""
    from modelplan.comm.ops import Axis
    from modelplan.plan.commlist import communication_list
    from modelplan.plan.evaluator import Evaluator
    from modelplan.comm.clusters import load_cluster
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    cluster = load_cluster("dgx-h100")
    spec = _moe_spec(64, 4)
    training = TrainingSpec(global_batch=16, seq_len=1024, moe_flex_dispatcher="deepep")
    ev = Evaluator(spec, training, cluster)
    items = communication_list(spec, training, Plan(dp=16, ep=16, micro_batch=1), capacity_factor=ev.capacity_factor,
                               gpus_per_node=cluster.gpus_per_node)
    shape = ev.shapes(1, 16, 2, 16, 1)[Axis.EP]
    per_block = sum(ev.pricer.time_s(i.op, i.nbytes, shape) * i.count for i in items if i.axis is Axis.EP)
    per_block /= spec.layers * 1  # m = 16 / 16 = 1 micro-batch, every block MoE
    assert ev.block_terms(1, False, 1, "none", 1, 16).ep_s == pytest.approx(per_block)
