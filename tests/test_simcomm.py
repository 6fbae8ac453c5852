"""The in-process communicator simulator: results against numpy, ledgers against hand formulas,
and failures (a raising rank, a deadlock, a timeout) that end the run with a clear error."""

import math
import threading
import time

import numpy as np
import pytest

from modelplan.comm.communicator import Group
from modelplan.comm.ops import Axis, Collective
from modelplan.execute import (
    CommError,
    SpmdDeadlock,
    SpmdError,
    SpmdTimeout,
    run_spmd,
)
from modelplan.plan.dims import ParallelDims

SIZES = list(range(1, 9))  # group sizes 1..8, including non-powers of two


def world(p: int) -> Group:
    return Group(Axis.WORLD, tuple(range(p)))


def rank_inputs(p: int, shape: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    """Rank r's input: an independent standard-normal array (the same in every test run)."""
    return [np.random.default_rng([seed, r]).standard_normal(shape) for r in range(p)]


# --- results ------------------------------------------------------------------------------


def test_megatron_rank_id_all_reduce():
    """Each rank holds its rank id; AllReduce over ranks 0..3 is 0+1+2+3 = 6 (Megatron tests)."""
    run = run_spmd(4, lambda c: c.all_reduce(np.array([float(c.rank)]), world(4)))
    assert [float(v[0]) for v in run.results] == [6.0] * 4


@pytest.mark.parametrize("p", SIZES)
def test_all_reduce_matches_numpy_sum(p):
    """all_reduce equals np.sum over ranks; 5*7 = 35 elements do not split evenly for most p."""
    xs = rank_inputs(p, (5, 7))
    run = run_spmd(p, lambda c: c.all_reduce(xs[c.rank], world(p)))
    for out in run.results:
        np.testing.assert_allclose(out, np.sum(xs, axis=0), rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("p", SIZES)
@pytest.mark.parametrize("axis", [0, 1])
def test_all_gather_matches_concatenate(p, axis):
    """all_gather equals np.concatenate of every rank's block along the axis, in rank order."""
    xs = rank_inputs(p, (3, 4))
    run = run_spmd(p, lambda c: c.all_gather(xs[c.rank], world(p), axis=axis))
    for out in run.results:
        np.testing.assert_array_equal(out, np.concatenate(xs, axis=axis))


@pytest.mark.parametrize("p", SIZES)
def test_reduce_scatter_matches_split_sum(p):
    """reduce_scatter along axis 1 gives rank r the r-th of p equal blocks of the sum."""
    xs = rank_inputs(p, (3, 2 * p))
    run = run_spmd(p, lambda c: c.reduce_scatter(xs[c.rank], world(p), axis=1))
    expected = np.split(np.sum(xs, axis=0), p, axis=1)
    for r, out in enumerate(run.results):
        np.testing.assert_allclose(out, expected[r], rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("p", SIZES)
def test_broadcast_from_every_root(p):
    """broadcast delivers the root's array unchanged to every rank, whichever rank is root."""
    xs = rank_inputs(p, (4, 3))
    for root in range(p):
        run = run_spmd(p, lambda c: c.broadcast(xs[c.rank], world(p), root=root))
        for out in run.results:
            np.testing.assert_array_equal(out, xs[root])


@pytest.mark.parametrize("p", SIZES)
def test_reduce_to_a_non_zero_root(p):
    """reduce puts np.sum over ranks on the root (rank p-1) and None elsewhere."""
    xs = rank_inputs(p, (6,))
    run = run_spmd(p, lambda c: c.reduce(xs[c.rank], world(p), root=p - 1))
    np.testing.assert_allclose(run.results[p - 1], np.sum(xs, axis=0), rtol=1e-14, atol=1e-14)
    assert all(out is None for out in run.results[: p - 1])


@pytest.mark.parametrize("p", SIZES)
def test_all_to_all_transposes_chunks(p):
    """all_to_all: rank r receives chunk r of every rank j; chunks of different lengths pass."""
    chunks = [[np.full(j + r + 1, 10.0 * j + r) for r in range(p)] for j in range(p)]
    run = run_spmd(p, lambda c: c.all_to_all(chunks[c.rank], world(p)))
    for r, out in enumerate(run.results):
        for j in range(p):
            np.testing.assert_array_equal(out[j], chunks[j][r])


@pytest.mark.parametrize("p", SIZES)
def test_send_recv_around_a_ring(p):
    """Every rank sends first, then receives from its left neighbour (senders never block)."""
    xs = rank_inputs(p, (2, 2))

    def fn(c):
        c.send(xs[c.rank], (c.rank + 1) % p, world(p))
        return c.recv((c.rank - 1) % p, world(p))

    run = run_spmd(p, fn)
    for r, out in enumerate(run.results):
        np.testing.assert_array_equal(out, xs[(r - 1) % p])


def test_send_recv_is_fifo_per_channel():
    """Three sends from rank 0 arrive at rank 1 in the order they were sent."""
    g = world(2)

    def fn(c):
        if c.rank == 0:
            for k in range(3):
                c.send(np.array([k]), 1, g)
            return None
        return [int(c.recv(0, g)[0]) for _ in range(3)]

    assert run_spmd(2, fn).results[1] == [0, 1, 2]


def test_inputs_are_not_modified():
    """all_reduce and reduce_scatter leave the caller's arrays as they were."""
    xs = rank_inputs(4, (8,))
    copies = [x.copy() for x in xs]
    run_spmd(4, lambda c: (c.all_reduce(xs[c.rank], world(4)),
                           c.reduce_scatter(xs[c.rank], world(4))))
    for x, orig in zip(xs, copies):
        np.testing.assert_array_equal(x, orig)


def test_float64_all_reduce_is_deterministic_and_identical_on_all_ranks():
    """Two runs give bitwise the same sum on every rank, within 1e-15 (relative) of np.sum."""
    xs = rank_inputs(6, (1000,))
    a = run_spmd(6, lambda c: c.all_reduce(xs[c.rank], world(6))).results
    b = run_spmd(6, lambda c: c.all_reduce(xs[c.rank], world(6))).results
    for out in a + b:
        np.testing.assert_array_equal(out, a[0])
    ref = np.sum(xs, axis=0)
    assert np.max(np.abs(a[0] - ref)) <= 1e-15 * 6 * np.max(np.abs(xs))


def test_concurrent_sub_groups_of_a_rank_grid():
    """tp groups all-reduce and dp groups all-gather at the same time on a dp=2, tp=2, pp=2 grid."""
    grid = ParallelDims(dp=2, tp=2, pp=2)

    def fn(c):
        tp = Group(Axis.TP, grid.group(Axis.TP, c.rank))
        dp = Group(Axis.DP, grid.group(Axis.DP, c.rank))
        return c.all_reduce(np.array([float(c.rank)]), tp), c.all_gather(np.array([c.rank]), dp)

    run = run_spmd(grid.world_size, fn)
    for r, (tp_sum, dp_ranks) in enumerate(run.results):
        # expected: the sum of the global ranks in r's tp group, and r's dp group in order
        assert tp_sum[0] == sum(grid.group(Axis.TP, r))
        assert tuple(dp_ranks) == grid.group(Axis.DP, r)


# --- ledgers ------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [2, 3, 4, 6, 8])
def test_ring_all_reduce_ledger(p):
    """Ring AllReduce of n bytes: each rank sends and receives 2(p-1)/p * n in 2(p-1) steps.

    n = 24 float64 = 192 B splits evenly for every p here (Patarasuk & Yuan 2009).
    """
    n_bytes = 24 * 8
    run = run_spmd(p, lambda c: c.all_reduce(np.ones(24), world(p)))
    for ledger in run.ledgers:
        (e,) = ledger.entries
        assert e.op == Collective.ALL_REDUCE and e.group_size == p
        assert e.bytes_sent == e.bytes_received == 2 * (p - 1) * n_bytes // p
        assert e.steps == 2 * (p - 1)


@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_ring_all_gather_and_reduce_scatter_ledgers(p):
    """AllGather of n_in bytes per rank: (p-1)*n_in each way; ReduceScatter of n: (p-1)*n/p."""
    n_in = 6 * 8  # 6 float64 per rank
    run = run_spmd(p, lambda c: (c.all_gather(np.ones(6), world(p)),
                                 c.reduce_scatter(np.ones(6 * p), world(p))))
    for ledger in run.ledgers:
        ag, rs = ledger.entries
        assert (ag.bytes_sent, ag.bytes_received, ag.steps) == ((p - 1) * n_in,) * 2 + (p - 1,)
        # reduce_scatter input is n = 6p float64 = p * n_in bytes, so (p-1)*n/p = (p-1)*n_in
        assert (rs.bytes_sent, rs.bytes_received, rs.steps) == ((p - 1) * n_in,) * 2 + (p - 1,)


@pytest.mark.parametrize("p, root_sends", [(4, 2), (8, 3)])
def test_binomial_broadcast_ledger(p, root_sends):
    """Binomial broadcast: the root sends log2(p) copies (p=4: to 2 then 1; p=8: to 4, 2, 1);
    every other rank receives exactly one copy, so all ranks together send (p-1)*n."""
    n = 10 * 8
    run = run_spmd(p, lambda c: c.broadcast(np.ones(10), world(p), root=0))
    root = run.ledgers[0].entries[0]
    assert (root.bytes_sent, root.bytes_received, root.steps) == (root_sends * n, 0, root_sends)
    for ledger in run.ledgers[1:]:
        assert ledger.entries[0].bytes_received == n
    assert sum(lg.entries[0].bytes_sent for lg in run.ledgers) == (p - 1) * n


def test_binomial_reduce_ledger():
    """Binomial reduce to rank 0 of 8: the root gets 3 partial sums; every other rank sends 1."""
    n = 4 * 8
    run = run_spmd(8, lambda c: c.reduce(np.ones(4), world(8), root=0))
    root = run.ledgers[0].entries[0]
    assert (root.bytes_sent, root.bytes_received, root.steps) == (0, 3 * n, 3)
    assert all(lg.entries[0].bytes_sent == n for lg in run.ledgers[1:])


@pytest.mark.parametrize("p", [1, 2, 5, 8])
def test_dissemination_barrier_ledger(p):
    """Dissemination barrier: ceil(log2 p) rounds, no payload."""
    run = run_spmd(p, lambda c: c.barrier(world(p)))
    for ledger in run.ledgers:
        e = ledger.entries[0]
        assert (e.op, e.bytes_sent, e.bytes_received) == (Collective.BARRIER, 0, 0)
        assert e.steps == math.ceil(math.log2(p))


def test_all_to_all_and_send_recv_ledgers():
    """all_to_all over 3 ranks: 2 steps, every chunk but its own is sent; a send records nbytes."""
    p = 3
    chunks = [np.ones(r + 1) for r in range(p)]  # chunk j has j+1 float64

    def fn(c):
        c.all_to_all(chunks, world(p))
        if c.rank == 0:
            c.send(np.ones(5), 1, world(p))
        if c.rank == 1:
            c.recv(0, world(p))

    run = run_spmd(p, fn)
    for r, ledger in enumerate(run.ledgers):
        a2a = ledger.entries[0]
        assert a2a.steps == p - 1
        assert a2a.bytes_sent == sum((j + 1) * 8 for j in range(p) if j != r)
        assert a2a.bytes_received == (p - 1) * (r + 1) * 8
    assert run.ledgers[0].entries[1].bytes_sent == 40
    assert run.ledgers[1].entries[1].bytes_received == 40


def test_group_of_one_moves_nothing():
    """A group of one rank: all_reduce returns a copy, no bytes, no steps."""
    run = run_spmd(1, lambda c: c.all_reduce(np.arange(3.0), world(1)))
    np.testing.assert_array_equal(run.results[0], np.arange(3.0))
    e = run.ledgers[0].entries[0]
    assert (e.bytes_sent, e.bytes_received, e.steps) == (0, 0, 0)


# --- failures -----------------------------------------------------------------------------


def test_raising_rank_ends_the_run_with_its_name():
    """Rank 2 raises while ranks 0, 1, 3 wait in all_reduce: one error names rank 2, no hang."""

    def fn(c):
        if c.rank == 2:
            raise ValueError("boom")
        return c.all_reduce(np.ones(3), world(4))

    start = time.monotonic()
    with pytest.raises(SpmdError, match=r"rank 2 failed: ValueError: boom") as info:
        run_spmd(4, fn, timeout_s=30)
    assert info.value.rank == 2 and isinstance(info.value.cause, ValueError)
    assert time.monotonic() - start < 5


def test_deadlock_is_reported_at_once():
    """Both ranks recv first: reported as a deadlock naming each wait, long before the timeout."""

    def fn(c):
        c.recv(1 - c.rank, world(2))

    start = time.monotonic()
    with pytest.raises(SpmdDeadlock, match=r"rank 0 waits for recv from rank 1.*"
                                           r"rank 1 waits for recv from rank 0"):
        run_spmd(2, fn, timeout_s=30)
    assert time.monotonic() - start < 5


def test_timeout_names_waiting_and_running_ranks():
    """Rank 0 computes past the 0.3 s timeout while rank 1 waits: the error says both."""
    release = threading.Event()

    def fn(c):
        if c.rank == 0:
            release.wait(10)  # stands in for a long computation
            return None
        return c.recv(0, world(2))

    try:
        with pytest.raises(SpmdTimeout, match=r"timed out after 0.3 s: rank 1 waits for recv "
                                              r"from rank 0.*rank 0 is running outside"):
            run_spmd(2, fn, timeout_s=0.3)
    finally:
        release.set()


def test_reduce_scatter_needs_divisible_axis():
    """reduce_scatter of 10 rows over 4 ranks is a one-line error with both numbers."""
    with pytest.raises(SpmdError,
                       match=r"group size \(4\) must divide axis 0 of shape \[10\] \(10\)"):
        run_spmd(4, lambda c: c.reduce_scatter(np.ones(10), world(4)))


def test_rank_outside_group_is_an_error():
    """Calling a collective on a group without this rank is a CommError naming rank and group."""
    with pytest.raises(SpmdError,
                       match=r"CommError: rank 2 called all_reduce on tp group \(0, 1\)"):
        run_spmd(3, lambda c: c.all_reduce(np.ones(1), Group(Axis.TP, (0, 1))))
    assert issubclass(CommError, Exception)


def test_mismatched_collectives_are_named():
    """Rank 0 all_reduces while rank 1 all_gathers on the same group: a mismatch error."""

    def fn(c):
        if c.rank == 0:
            return c.all_reduce(np.ones(2), world(2))
        return c.all_gather(np.ones(2), world(2))

    with pytest.raises(SpmdError, match=r"collective mismatch"):
        run_spmd(2, fn, timeout_s=10)


def test_unreceived_send_is_an_error():
    """A message nobody receives is reported when the run ends."""
    with pytest.raises(SpmdError, match=r"rank 0 sent 1 message\(s\) to rank 1 that were never"):
        run_spmd(2, lambda c: c.send(np.ones(1), 1, world(2)) if c.rank == 0 else None)


def test_object_arrays_are_rejected():
    """Python objects cannot travel as bytes between processes, so no backend sends them."""
    with pytest.raises(SpmdError, match=r"cannot send an array of dtype object"):
        run_spmd(2, lambda c: c.all_gather(np.array([None]), world(2)))
