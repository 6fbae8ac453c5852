"""Tensor-parallel building blocks on simulated ranks: the conjugate f/g operators, the
sequence-parallel pair, and vocabulary-parallel cross-entropy against the unsplit loss."""

from __future__ import annotations

import numpy as np
import pytest

from modelplan.comm.communicator import Group
from modelplan.comm.ops import Axis
from modelplan.execute import mappings, run_spmd
from modelplan.execute.layers.loss import cross_entropy_backward, cross_entropy_forward
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.vocab_parallel import vocab_parallel_cross_entropy


def tp_group(n: int) -> Group:
    return Group(Axis.TP, tuple(range(n)))


def test_g_forward_sums_rank_ids():
    """Each rank holds its rank id; g's forward AllReduce over ranks 0..3 gives 6 (Megatron's test)."""
    def fn(comm):
        tp = TensorParallel(comm, tp_group(4), False)
        return mappings.reduce_from_tensor_model_parallel_region(tp, np.array([float(comm.rank)]), "g")

    assert [float(v[0]) for v in run_spmd(4, fn).results] == [6.0] * 4


def test_f_is_identity_forward_and_sum_backward():
    """f passes x through unchanged and sums the gradients in backward: f and g are conjugate."""
    def fn(comm):
        tp = TensorParallel(comm, tp_group(2), False)
        x = np.array([1.0, 2.0])
        y = mappings.copy_to_tensor_model_parallel_region(tp, x, "f")
        dx = mappings.copy_to_tensor_model_parallel_region_backward(tp, np.array([float(comm.rank + 1)]), "f")
        return y is x, float(dx[0])

    assert run_spmd(2, fn).results == ((True, 3.0), (True, 3.0))


def test_sequence_parallel_pair_is_adjoint():
    """AllGather along the sequence and ReduceScatter are adjoint: sum_r <AG(x)_r, y_r> = sum_r <x_r, RS(y)_r>."""
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(2, 3, 4)) for _ in range(2)]  # (b, s/tp, h)
    ys = [rng.normal(size=(2, 6, 4)) for _ in range(2)]  # (b, s, h)

    def fn(comm):
        tp = TensorParallel(comm, tp_group(2), True)
        gathered = mappings.gather_from_sequence_parallel_region(tp, xs[comm.rank], "ag")
        scattered = mappings.gather_from_sequence_parallel_region_backward(tp, ys[comm.rank], "rs")
        return float(np.sum(gathered * ys[comm.rank])), float(np.sum(xs[comm.rank] * scattered)), gathered.shape

    res = run_spmd(2, fn).results
    assert res[0][2] == (2, 6, 4)
    assert sum(r[0] for r in res) == pytest.approx(sum(r[1] for r in res), rel=1e-13)


def test_vocab_parallel_cross_entropy_equals_the_full_loss():
    """Loss and logit gradients from 4 vocabulary shards equal the unsplit cross-entropy."""
    rng = np.random.default_rng(1)
    logits, labels = rng.normal(size=(2, 5, 12)), rng.integers(0, 12, size=(2, 5))
    loss, probs = cross_entropy_forward(logits, labels)
    dlogits = cross_entropy_backward(probs, labels, 1.0)

    def fn(comm):
        tp = TensorParallel(comm, tp_group(4), False)
        shard = logits[..., 3 * comm.rank : 3 * comm.rank + 3]
        local_loss, local_probs, inside = vocab_parallel_cross_entropy(tp, shard, labels)
        return local_loss, local_probs

    res = run_spmd(4, fn).results
    for local_loss, _ in res:
        assert local_loss == pytest.approx(loss, rel=1e-13)
    np.testing.assert_allclose(np.concatenate([p for _, p in res], axis=-1), probs, rtol=1e-13)
    assert dlogits.shape == probs.shape
