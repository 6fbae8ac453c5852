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
