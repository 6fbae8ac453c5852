"""The numpy network executor against PyTorch's own modules (float64, training mode).

Each spec is rebuilt here as torch modules with the same `named_parameters()` names (a small
builder in this file), the executor's initial weights are copied in (`to_torch`), and torch's
forward, loss, autograd gradients and BatchNorm running statistics are the expected values.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelplan.count.network import network_layers
from modelplan.count.network_tree import network_tree
from modelplan.execute.net.model import reference_step
from modelplan.execute.net.params import init_buffers, init_params, make_batch, to_torch
from modelplan.execute.optim import OptimizerConfig
from modelplan.specs.load import load_model
from modelplan.specs.network import NetworkSpec

torch = pytest.importorskip("torch")
nn = torch.nn


class _Residual(nn.Module):
    def __init__(self, main, shortcut, act):
        super().__init__()
        for name, module in main:
            self.add_module(name, module)
        self._main = [name for name, _ in main]
        self.shortcut = nn.Sequential(*shortcut) if shortcut else None
        self.act = _activation(act) if act else None

    def forward(self, x):
        y = x
        for name in self._main:
            y = getattr(self, name)(y)
        y = y + (self.shortcut(x) if self.shortcut is not None else x)
        return self.act(y) if self.act is not None else y


def _activation(kind):
    return {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU}[kind]()


def _recurrent(layer, input_size):
    cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[layer.type]
    kwargs = dict(num_layers=layer.num_layers, bidirectional=layer.bidirectional, bias=layer.bias,
                  batch_first=True, dropout=layer.dropout)
    if layer.type == "lstm":
        kwargs["proj_size"] = layer.proj_size
    if layer.type == "rnn":
        kwargs["nonlinearity"] = layer.nonlinearity
    last = layer.output == "last"

    class Out(cls):
        def forward(self, x):
            y = super().forward(x)[0]
            return y[:, -1] if last else y

    return Out(input_size, layer.hidden_size, **kwargs)


def _leaf(layer, shape):
    t = layer.type
    if t == "linear":
        return nn.Linear(shape[-1], layer.out_features, bias=layer.bias)
    if t in ("conv1d", "conv2d"):
        cls = nn.Conv1d if t == "conv1d" else nn.Conv2d
        return cls(shape[0], layer.out_channels, layer.kernel_size, stride=layer.stride, padding=layer.padding,
                   dilation=layer.dilation, groups=layer.groups, bias=layer.bias)
    if t.startswith("batchnorm"):
        return (nn.BatchNorm1d if t == "batchnorm1d" else nn.BatchNorm2d)(shape[0], eps=layer.eps, affine=layer.affine)
    if t == "layernorm":
        return nn.LayerNorm(layer.normalized_shape or shape[-1:], eps=layer.eps)
    if t == "embedding":
        return nn.Embedding(layer.num_embeddings, layer.embedding_dim)
    if t in ("maxpool1d", "maxpool2d", "avgpool1d", "avgpool2d"):
        cls = getattr(nn, {"max": "MaxPool", "avg": "AvgPool"}[layer.op] + t[-2:])
        return cls(layer.kernel_size, stride=layer.stride, padding=layer.padding, ceil_mode=layer.ceil_mode)
    if t.startswith("adaptiveavgpool"):
        return getattr(nn, "AdaptiveAvgPool" + t[-2:])(layer.output_size)
    if t == "softmax":
        return nn.Softmax(dim=layer.dim % len(shape) + 1)
    if t == "flatten":
        return nn.Flatten(layer.start_dim % len(shape) + 1, layer.end_dim % len(shape) + 1)
    if t in ("lstm", "gru", "rnn"):
        return _recurrent(layer, shape[-1])
    return _activation(t)


def build_torch(nodes):
    """(name, module) pairs of a node list, named like the executor's paths."""
    out = []
    for node in nodes:
        name = node.path.rsplit("/", 1)[-1]
        if hasattr(node, "main"):
            main = build_torch(node.main)
            short = [m for _, m in build_torch(node.shortcut)]
            out.append((name, _Residual(main, short, node.act.layer.type if node.act else None)))
        else:
            out.append((name, _leaf(node.layer, node.info.input_shape)))
    return out


def _nest(pairs, nodes):
    """Nest modules under their path prefixes (torch Sequential per group)."""
    root = nn.Module()
    order = []
    for (name, module), node in zip(pairs, nodes):
        parent = root
        for part in node.path.split("/")[:-1]:
            if not hasattr(parent, part):
                parent.add_module(part, nn.Module())
            parent = getattr(parent, part)
        parent.add_module(name, module)
        order.append(module)
    return root, order


def torch_step(spec: NetworkSpec, batch_size: int = 2):
    """(executor reference, torch outputs/loss/grads/buffers) of one step on one batch."""
    layers = network_layers(spec)
    nodes = tuple(n for unit in network_tree(spec) for n in unit)
    params, buffers = init_params(layers, seed=1), init_buffers(layers)
    batch = make_batch(layers, batch_size, seed=2)
    ref = reference_step(nodes, params, batch, OptimizerConfig(kind="sgd", lr=0.1), batch_size, buffers=buffers)
    root, order = _nest(build_torch(nodes), nodes)
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
