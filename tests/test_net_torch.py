"""The numpy network executor against PyTorch's own modules (float64, training mode).

Each spec is rebuilt as torch modules with the same `named_parameters()` names (the torch
oracle's builder, `execute/oracle/torch_network.py`, none of the numpy executor's math),
the executor's initial weights are copied in (`to_torch`), and torch's forward, loss, autograd
gradients and BatchNorm running statistics are the expected values.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelplan.count.network import network_layers
from modelplan.count.network_tree import network_tree
from modelplan.execute.net.model import reference_step
from modelplan.execute.net.params import init_buffers, init_params, make_batch, to_torch
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle.torch_network import build_network
from modelplan.specs.load import load_model
from modelplan.specs.network import NetworkSpec

torch = pytest.importorskip("torch")
nn = torch.nn


def torch_step(spec: NetworkSpec, batch_size: int = 2):
    """(executor reference, torch outputs/loss/grads/buffers) of one step on one batch."""
    layers = network_layers(spec)
    nodes = tuple(n for unit in network_tree(spec) for n in unit)
    params, buffers = init_params(layers, seed=1), init_buffers(layers)
    batch = make_batch(layers, batch_size, seed=2)
    ref = reference_step(nodes, params, batch, OptimizerConfig(kind="sgd", lr=0.1), batch_size, buffers=buffers)
    root, order, _ = build_network(torch, nodes)
    root.double().train()
    kinds = {info.path: info.type for info in layers}
    named = dict(root.named_parameters())
    assert {k.replace(".", "/") for k in named} == set(params)
    with torch.no_grad():
        for key, value in named.items():
            path, attr = key.replace(".", "/").rsplit("/", 1)
            value.copy_(torch.from_numpy(to_torch(kinds[path], attr, params[f"{path}/{attr}"]).copy()))
    x = torch.from_numpy(batch.inputs)
    for module in order:
        x = module(x)
    target = torch.from_numpy(batch.targets)
    if batch.loss == "cross_entropy":
        loss = nn.functional.cross_entropy(x.reshape(-1, x.shape[-1]), target.reshape(-1))
    else:
        loss = nn.functional.mse_loss(x, target)
    loss.backward()
    grads = {k.replace(".", "/"): v.grad.numpy() for k, v in named.items()}
    bufs = {k.replace(".", "/"): v.numpy() for k, v in root.named_buffers() if "running" in k}
    return layers, ref, x.detach().numpy(), loss.item(), grads, bufs


def _close(a, b, what):
    scale = max(float(np.max(np.abs(b))), 1e-300)
    assert float(np.max(np.abs(a - b))) / scale < 1e-10, what


TINY_RESNET = NetworkSpec(input_shape=[3, 12, 12], layers=[
    {"type": "conv2d", "name": "conv1", "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1, "bias": False},
    {"type": "batchnorm2d", "name": "bn1"}, {"type": "relu", "name": "relu"},
    {"type": "maxpool2d", "name": "maxpool", "kernel_size": 3, "stride": 2, "padding": 1},
    {"type": "repeat", "name": "layer1", "times": 2, "layers": [{"type": "residual", "activation": "relu", "main": [
        {"type": "conv2d", "name": "conv1", "out_channels": 4, "kernel_size": 3, "padding": 1, "bias": False},
        {"type": "batchnorm2d", "name": "bn1"}, {"type": "relu", "name": "relu"},
        {"type": "conv2d", "name": "conv2", "out_channels": 4, "kernel_size": 3, "padding": 1, "bias": False},
        {"type": "batchnorm2d", "name": "bn2"}]}]},
    {"type": "residual", "name": "down", "activation": "relu", "main": [
        {"type": "conv2d", "name": "conv1", "out_channels": 8, "kernel_size": 3, "stride": 2, "padding": 1, "bias": False},
        {"type": "batchnorm2d", "name": "bn1"}],
     "shortcut": [{"type": "conv2d", "out_channels": 8, "kernel_size": 1, "stride": 2, "bias": False},
                  {"type": "batchnorm2d"}]},
    {"type": "adaptiveavgpool2d", "name": "avgpool", "output_size": 1},
    {"type": "flatten", "name": "flatten"}, {"type": "linear", "name": "fc", "out_features": 5},
])

MIXED = NetworkSpec(input_shape=[3, 10], layers=[
    {"type": "conv1d", "out_channels": 4, "kernel_size": 3, "padding": "same"},
    {"type": "maxpool1d", "kernel_size": 2, "ceil_mode": True},
    {"type": "conv1d", "out_channels": 4, "kernel_size": 2, "groups": 2, "dilation": 2},
    {"type": "avgpool1d", "kernel_size": 2, "stride": 1, "padding": 1},
    {"type": "adaptiveavgpool1d", "output_size": 3},
    {"type": "batchnorm1d"}, {"type": "gelu"}, {"type": "flatten"},
    {"type": "layernorm"}, {"type": "linear", "out_features": 4}, {"type": "silu"},
    {"type": "softmax"}, {"type": "linear", "out_features": 3},
])

RECURRENT = NetworkSpec(input_shape=[6], layers=[
    {"type": "embedding", "name": "encoder", "num_embeddings": 11, "embedding_dim": 4},
    {"type": "lstm", "name": "rnn", "hidden_size": 5, "num_layers": 2, "proj_size": 3, "bidirectional": True},
    {"type": "gru", "name": "gru", "hidden_size": 4, "bidirectional": True},
    {"type": "rnn", "name": "elman", "hidden_size": 3, "nonlinearity": "relu", "output": "last"},
    {"type": "tanh"}, {"type": "linear", "name": "decoder", "out_features": 7},
])


@pytest.mark.parametrize("spec", [load_model("mlp"), load_model("small-cnn"), TINY_RESNET, MIXED, RECURRENT],
                         ids=["mlp", "small-cnn", "tiny-resnet", "conv1d-pools-norms", "lstm-gru-rnn"])
def test_forward_loss_and_gradients_equal_torch(spec):
    """Outputs, loss and every parameter gradient equal torch's forward and autograd."""
    assert_step_equals_torch(spec)


def assert_step_equals_torch(spec) -> None:
    """The executor's outputs, loss and every parameter gradient against torch's forward and
    autograd on the same weights and batch (also used by tests/test_network_gates.py)."""
    layers, ref, out, loss, grads, _ = torch_step(spec)
    _close(ref.outputs, out, "outputs")
    assert ref.loss == pytest.approx(loss, rel=1e-12)
    kinds = {info.path: info.type for info in layers}
    for name, g in ref.grads.items():
        path, attr = name.rsplit("/", 1)
        _close(to_torch(kinds[path], attr, g), grads[name], name)


def test_batchnorm_running_statistics_equal_torch():
    """Running mean/var after one training forward (momentum 0.1, unbiased variance)."""
    _, ref, _, _, _, bufs = torch_step(TINY_RESNET, batch_size=3)
    assert set(bufs) == set(ref.buffers)
    for name, value in bufs.items():
        _close(ref.buffers[name], value, name)
