"""The tensor-parallel walk-through (`verify --explain`): its numbers obey C = A B by hand."""

from __future__ import annotations

import numpy as np

from modelplan.execute.net.explain import tp_walkthrough
from modelplan.specs.load import load_model
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan


def _values(m):
    return np.array(m.values)


def test_each_rank_computes_its_column_block_of_a_times_b():
    """MLP tp 3: on every rank C_i = A B_i + b_i (multiplied here, by numpy, from the shown
    shards), and the three C_i side by side are the one-device C."""
    walk = tp_walkthrough(load_model("mlp"), Plan(tp=3))
    column = next(s for s in walk.steps if "column-parallel" in s.title)
    a = _values(column.result[0])
    pieces = []
    for b_i, bias_i, c_i in column.ranks:
        assert np.allclose(a @ _values(b_i) + _values(bias_i), _values(c_i), rtol=0, atol=1e-15)
        pieces.append(_values(c_i))
    assert np.array_equal(np.concatenate(pieces, axis=1), _values(column.result[1]))
    assert walk.passed


def test_a_residual_cnn_walks_through_pairs_and_gathers():
    """A BasicBlock with tp 2: the row-parallel AllReduce and the shortcut's AllGather both appear,
    every comparison with one device passes (the residual sum is not a split step)."""
    spec = NetworkSpec(input_shape=[2, 6, 6], layers=[{"type": "residual", "activation": "relu", "main": [
        {"type": "conv2d", "name": "c1", "out_channels": 4, "kernel_size": 3, "padding": 1},
        {"type": "batchnorm2d", "name": "b1"}, {"type": "relu", "name": "r"},
        {"type": "conv2d", "name": "c2", "out_channels": 2, "kernel_size": 3, "padding": 1}],
        "shortcut": [{"type": "conv2d", "out_channels": 2, "kernel_size": 1}]},
        {"type": "flatten"}, {"type": "linear", "out_features": 3}])
    walk = tp_walkthrough(spec, Plan(tp=2, micro_batch=2))
    titles = " | ".join(s.title for s in walk.steps)
    assert "0/c2 (conv2d): row-parallel, then AllReduce" in titles
    assert "AllGather after 0/shortcut/0" in titles
    assert walk.passed
