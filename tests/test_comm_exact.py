"""Exact per-rank bytes of each schedule (what the executor's ledger must show).

Expected numbers are hand-worked from the schedules in modelplan/comm/exact.py's docstring:
a ring chunk travels p-1 hops in each phase, a binomial tree has p-1 edges, and so on.
"""

import pytest

from modelplan.comm.exact import bytes_per_rank, chunk_sizes, rounds_per_rank
from modelplan.errors import SpecError


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_ring_all_reduce_equal_chunks(p):
    """n = 24*p bytes over p ranks: every rank sends and receives 2(p-1)/p*n = 48(p-1)."""
    n = 24 * p
    for r in range(p):
        assert bytes_per_rank("all_reduce", "ring", n, p, r) == (48 * (p - 1), 48 * (p - 1))


def test_ring_all_reduce_rounds():
    """Ring AllReduce takes 2(p-1) rounds on every rank (ReduceScatter then AllGather)."""
    assert rounds_per_rank("all_reduce", "ring", 8, 3) == 14


def test_ring_all_reduce_uneven_chunks():
    """10 bytes over 4 ranks: chunks 3,3,2,2 (numpy.array_split); rank 0 sends all but chunk 0
    in ReduceScatter (7) and all but chunk 1 in AllGather (7) = 14; receives all but chunk 3
    (8) and all but chunk 0 (7) = 15."""
    assert chunk_sizes(10, 4) == [3, 3, 2, 2]
    assert bytes_per_rank("all_reduce", "ring", 10, 4, 0) == (14, 15)


def test_ring_all_reduce_uneven_conserves_bytes():
    """Over all ranks, bytes sent = bytes received = 2(p-1)*n (each chunk crosses p-1 edges
    per phase)."""
    n, p = 1001, 7
    rows = [bytes_per_rank("all_reduce", "ring", n, p, r) for r in range(p)]
    assert sum(s for s, _ in rows) == sum(r for _, r in rows) == 2 * (p - 1) * n


def test_itemsize_splits_whole_elements():
    """10 float32 elements (40 bytes) over 4 ranks: 3,3,2,2 elements = 12,12,8,8 bytes."""
    assert chunk_sizes(40, 4, itemsize=4) == [12, 12, 8, 8]


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_ring_gather_scatter(op):
    """AllGather (whole output) / ReduceScatter (whole input) of 64 B over 4 ranks: 48 B each way."""
    assert bytes_per_rank(op, "ring", 64, 4, 1) == (48, 48)
    assert rounds_per_rank(op, "ring", 4) == 3


def test_all_gather_needs_equal_blocks():
    """AllGather's whole output must split into p equal blocks."""
    with pytest.raises(SpecError, match=r"all_gather nbytes \(10\) must be a multiple of group_size \(4\)"):
        bytes_per_rank("all_gather", "ring", 10, 4)


def test_binomial_broadcast_root_and_leaves():
    """p=8, root 0: the root sends to 4, 2, 1 (3n); rank 4 sends to 5 and 6 (2n); rank 7 is a leaf."""
    n = 100
    assert bytes_per_rank("broadcast", "binomial", n, 8, 0) == (300, 0)
    assert bytes_per_rank("broadcast", "binomial", n, 8, 4) == (200, 100)
    assert bytes_per_rank("broadcast", "binomial", n, 8, 7) == (0, 100)


def test_binomial_broadcast_total_is_p_minus_1_messages():
    """A tree over p ranks has p-1 edges: p-1 messages of n in total, for any root."""
    n, p, root = 10, 11, 5
    rows = [bytes_per_rank("broadcast", "binomial", n, p, r, root=root) for r in range(p)]
    assert sum(s for s, _ in rows) == sum(r for _, r in rows) == (p - 1) * n
    assert rows[root] == (4 * n, 0)  # ceil(lg 11) = 4 children of the root


def test_binomial_reduce_mirrors_broadcast():
    """Reduce: the root receives 3n from its 3 children (p=8); a leaf sends n."""
    assert bytes_per_rank("reduce", "binomial", 100, 8, 0) == (0, 300)
    assert bytes_per_rank("reduce", "binomial", 100, 8, 7) == (100, 0)


def test_ring_broadcast_chain():
    """Chain root 2 -> 3 -> 0 -> 1 over p=4: root sends only, rank 1 (last) receives only."""
    assert bytes_per_rank("broadcast", "ring", 50, 4, 2, root=2) == (50, 0)
    assert bytes_per_rank("broadcast", "ring", 50, 4, 0, root=2) == (50, 50)
    assert bytes_per_rank("broadcast", "ring", 50, 4, 1, root=2) == (0, 50)


def test_recursive_doubling_all_reduce():
    """lg p exchanges of the whole buffer: p=8 -> 3n each way."""
    assert bytes_per_rank("all_reduce", "recursive_doubling", 64, 8, 5) == (192, 192)


def test_halving_doubling_all_reduce_equal_chunks():
    """Rabenseifner, p=8, n=64: n/2 + n/4 + n/8 = 56 each way per phase, 112 in total."""
    assert bytes_per_rank("all_reduce", "halving_doubling", 64, 8, 3) == (112, 112)
    assert rounds_per_rank("all_reduce", "halving_doubling", 8) == 6


def test_halving_doubling_uneven_conserves_bytes():
    """Uneven chunks: over all ranks, sent == received."""
    rows = [bytes_per_rank("all_reduce", "halving_doubling", 1003, 8, r) for r in range(8)]
    assert sum(s for s, _ in rows) == sum(r for _, r in rows)


def test_pairwise_all_to_all():
    """Per-rank send buffer of 4 blocks x 16 B: 3 blocks go out, 3 come in, in p-1 = 3 rounds."""
    assert bytes_per_rank("all_to_all", "pairwise", 64, 4, 2) == (48, 48)
    assert rounds_per_rank("all_to_all", "pairwise", 4) == 3


def test_send_recv_whole_buffer():
    """The sender (root) sends n, the next group rank receives n."""
    assert bytes_per_rank("send_recv", "direct", 99, 2, 0) == (99, 0)
    assert bytes_per_rank("send_recv", "direct", 99, 2, 1) == (0, 99)


def test_barrier_moves_nothing():
    """Dissemination barrier: 0 payload bytes in ceil(lg 5) = 3 rounds."""
    assert bytes_per_rank("barrier", "dissemination", 0, 5, 2) == (0, 0)
    assert rounds_per_rank("barrier", "dissemination", 5, 2) == 3


def test_tree_has_no_exact_schedule():
    """NCCL's double binary tree depends on its placement: only estimates exist."""
    with pytest.raises(SpecError, match=r"no exact per-rank schedule for tree all_reduce"):
        bytes_per_rank("all_reduce", "tree", 64, 8)


def test_group_rank_out_of_range():
    """group_rank must be inside the group."""
    with pytest.raises(SpecError, match=r"group_rank \(4\) must be in \[0, 4\)"):
        bytes_per_rank("all_reduce", "ring", 64, 4, 4)


@pytest.mark.parametrize("op, algo, p", [
    ("all_reduce", "ring", 8), ("all_reduce", "halving_doubling", 8),
    ("all_reduce", "recursive_doubling", 8), ("all_gather", "ring", 8),
    ("reduce_scatter", "halving_doubling", 8), ("all_to_all", "pairwise", 8),
    ("broadcast", "binomial", 8), ("broadcast", "ring", 8),
])
def test_estimate_matches_exact_busiest_rank(op, algo, p):
    """The cost model's bytes for the busiest rank equal the exact schedule's maximum
    (two independent derivations of the same algorithm)."""
    from _comm_toy import toy_cluster

    from modelplan.comm.cost import collective_cost

    n = 64 * p
    c = collective_cost(op, n, p, p, toy_cluster(gpus_per_node=8), algo=algo)
    rows = [bytes_per_rank(op, algo, n, p, r) for r in range(p)]
    assert c.bytes_sent_per_rank == max(s for s, _ in rows)
    assert c.bytes_received_per_rank == max(r for _, r in rows)
