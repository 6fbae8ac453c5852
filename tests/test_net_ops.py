"""Hand-written backward passes of every network layer kind against central finite differences.

Expected values come from the forward pass itself, differentiated numerically: for a random
direction u, dL/dtheta . u ~ (L(theta + eps u) - L(theta - eps u)) / (2 eps), with
L = sum(y * R) for a fixed random R (so dL/dy = R). In float64 with eps = 1e-6 the central
difference is good to about 1e-9 relative, so 1e-6 relative is a bound any wrong term breaks.
Each test builds a one- or few-layer network spec, so the executor runs exactly what
`modelplan verify` runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelplan.count.network import network_layers
from modelplan.count.network_tree import network_tree
from modelplan.execute.net.loss import loss_backward, loss_forward
from modelplan.execute.net.model import LeafHooks, backward_nodes, forward_nodes
from modelplan.execute.net.params import init_params
from modelplan.execute.net.saved import RunContext
from modelplan.specs.network import NetworkSpec

EPS = 1e-6
TOL = 1e-6


def check_gradients(input_shape, layers, batch=3, seed=0, ids_below=None):
    """dL/dx and dL/dparam of a small network equal central differences along random directions."""
    spec = NetworkSpec(input_shape=input_shape, layers=layers)
    nodes = tuple(n for unit in network_tree(spec) for n in unit)
    params = init_params(network_layers(spec), seed)
    rng = np.random.default_rng(seed + 7)
    if ids_below is None:
        x = rng.normal(size=(batch, *input_shape))
    else:
        x = rng.integers(0, ids_below, size=(batch, *input_shape))
    ctx = RunContext(seed=3, sample_offset=0, global_batch=batch)

    def loss(R=None):
        y = forward_nodes(nodes, params, x, ctx, {}, LeafHooks(), [])
        return y if R is None else float(np.sum(y * R))

    R = rng.normal(size=loss().shape)
    tape: list = []
    forward_nodes(nodes, params, x, ctx, {}, LeafHooks(), tape)
    grads: dict = {}
    dx = backward_nodes(nodes, params, tape, R, grads, LeafHooks(), need_dx=ids_below is None)
    arrays = dict(params)
    if ids_below is None:
        arrays["input"], grads["input"] = x, dx
    assert set(grads) == set(arrays)
    for name, a in arrays.items():
        u = rng.normal(size=a.shape)
        a += EPS * u
        plus = loss(R)
        a -= 2 * EPS * u
        minus = loss(R)
        a += EPS * u
        numeric = (plus - minus) / (2 * EPS)
        analytic = float(np.sum(grads[name] * u))
        assert analytic == pytest.approx(numeric, rel=TOL, abs=1e-8), name


def test_linear_gradients():
    """y = x @ w + b over the last dim of a [seq, features] sample."""
    check_gradients([4, 5], [{"type": "linear", "out_features": 3}])


@pytest.mark.parametrize("conv", [
    {"kernel_size": 3, "padding": 1},
    {"kernel_size": [2, 3], "stride": [2, 1], "padding": [1, 0], "dilation": [1, 2]},
    {"kernel_size": 3, "groups": 2, "bias": False},
    {"kernel_size": 4, "padding": "same"},
])
def test_conv2d_gradients(conv):
    """Conv2d with padding, stride, dilation, groups and torch's uneven 'same' padding."""
    check_gradients([4, 7, 6], [{"type": "conv2d", "out_channels": 6} | conv])


def test_conv1d_gradients():
    """Conv1d (run as a height-1 conv2d) with stride and dilation."""
    check_gradients([3, 11], [{"type": "conv1d", "out_channels": 4, "kernel_size": 3, "stride": 2,
                               "dilation": 2, "padding": 1}])


@pytest.mark.parametrize("shape,kind", [([3, 5, 4], "batchnorm2d"), ([6], "batchnorm1d"),
                                        ([3, 7], "batchnorm1d")])
def test_batchnorm_gradients(shape, kind):
    """Training-mode BatchNorm with batch statistics (the statistics depend on every sample)."""
    check_gradients(shape, [{"type": kind}], batch=4)


def test_layernorm_gradients():
    """LayerNorm over the two trailing dims."""
    check_gradients([2, 3, 4], [{"type": "layernorm", "normalized_shape": [3, 4]}])


@pytest.mark.parametrize("kind", ["relu", "gelu", "silu", "tanh", "sigmoid"])
def test_activation_gradients(kind):
    """phi'(x) behind a linear layer (so the activation's input is not the raw data)."""
    check_gradients([5], [{"type": "linear", "out_features": 6}, {"type": kind}])


def test_softmax_gradients():
    """Softmax along the first sample dim."""
    check_gradients([4, 3], [{"type": "softmax", "dim": 0}])


def test_dropout_gradients():
    """Inverted dropout with a fixed mask: dx = dy * keep / (1 - p)."""
    check_gradients([4, 5], [{"type": "dropout", "p": 0.3}])


@pytest.mark.parametrize("pool", [
    {"type": "maxpool2d", "kernel_size": 3, "stride": 2, "padding": 1},
    {"type": "maxpool2d", "kernel_size": 2, "ceil_mode": True},
    {"type": "avgpool2d", "kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"type": "adaptiveavgpool2d", "output_size": [3, 2]},
    {"type": "maxpool1d", "kernel_size": 2},
])
def test_pool_gradients(pool):
    """Max, average and adaptive pooling, with padding and ceil_mode overhang."""
    shape = [2, 7] if pool["type"].endswith("1d") else [2, 7, 5]
    check_gradients(shape, [pool])


def test_flatten_gradients():
    """Flatten then Linear: the gradient is reshaped back."""
    check_gradients([2, 3, 2], [{"type": "flatten"}, {"type": "linear", "out_features": 2}])


def test_residual_gradients():
    """A ResNet BasicBlock with a strided 1x1 projection shortcut and the ReLU after the sum."""
    block = {"type": "residual", "activation": "relu",
             "main": [{"type": "conv2d", "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1},
                      {"type": "batchnorm2d"}, {"type": "relu"},
                      {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1}],
             "shortcut": [{"type": "conv2d", "out_channels": 4, "kernel_size": 1, "stride": 2}]}
    check_gradients([2, 6, 6], [block])


@pytest.mark.parametrize("rnn", [
    {"type": "rnn", "hidden_size": 4},
    {"type": "rnn", "hidden_size": 4, "nonlinearity": "relu", "output": "last"},
    {"type": "lstm", "hidden_size": 4, "num_layers": 2, "dropout": 0.25},
    {"type": "lstm", "hidden_size": 5, "proj_size": 3, "bidirectional": True},
    {"type": "gru", "hidden_size": 4, "num_layers": 2, "bidirectional": True},
])
def test_recurrent_gradients(rnn):
    """Backpropagation through time for RNN, LSTM (stacked, dropout, projection, bidirectional), GRU."""
    check_gradients([5, 3], [rnn])


def test_embedding_gradients():
    """Embedding table gradient (scatter-add of the rows looked up) feeding an LSTM."""
    check_gradients([6], [{"type": "embedding", "num_embeddings": 7, "embedding_dim": 3},
                          {"type": "lstm", "hidden_size": 2}], ids_below=7)


@pytest.mark.parametrize("kind", ["cross_entropy", "mse"])
def test_loss_gradients(kind):
    """dL/dy of mean cross-entropy and mean squared error."""
    rng = np.random.default_rng(4)
    y = rng.normal(size=(3, 4, 5))
    target = rng.integers(0, 5, size=(3, 4)) if kind == "cross_entropy" else rng.normal(size=y.shape)
    _, cache = loss_forward(kind, y, target)
    dy = loss_backward(kind, cache, target, 1.0)
    u = rng.normal(size=y.shape)
    numeric = (loss_forward(kind, y + EPS * u, target)[0] - loss_forward(kind, y - EPS * u, target)[0]) / (2 * EPS)
    assert float(np.sum(dy * u)) == pytest.approx(numeric, rel=TOL)


def test_mse_value():
    """MSE of y = [1, 2] against t = [0, 0] is (1 + 4) / 2 = 2.5 (by hand)."""
    assert loss_forward("mse", np.array([[1.0, 2.0]]), np.zeros((1, 2)))[0] == 2.5
