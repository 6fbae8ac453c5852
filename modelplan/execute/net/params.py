"""A network's parameter tensors in executor layout, their seeded initialisation and the data.

Layout: torch's names (`layer1/0/conv1/weight`, `rnn/weight_ih_l0`) with the input dimensions
first, so `y = x @ w`: Linear (in, out) is torch's (out, in) transposed; Conv
(C_in/groups, *kernel, C_out) is torch's (C_out, C_in/groups, *kernel) with the out axis moved
last; RNN weight_ih/hh/hr are transposed. Everything else keeps torch's shape.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from modelplan.count.network import LayerInfo
from modelplan.execute.net.loss import LossKind

Params = dict[str, np.ndarray]

_TRANSPOSED = ("linear", "lstm", "gru", "rnn")


def to_executor(layer_type: str, name: str, torch_value: np.ndarray) -> np.ndarray:
    """A torch-layout tensor in executor layout."""
    if layer_type.startswith("conv") and name == "weight":
        return np.moveaxis(torch_value, 0, -1)
    if layer_type in _TRANSPOSED and name.startswith("weight"):
        return torch_value.T
    return torch_value


def to_torch(layer_type: str, name: str, value: np.ndarray) -> np.ndarray:
    """An executor-layout tensor in torch layout (the inverse of `to_executor`)."""
    if layer_type.startswith("conv") and name == "weight":
        return np.moveaxis(value, -1, 0)
    if layer_type in _TRANSPOSED and name.startswith("weight"):
        return value.T
    return value


def executor_shape(layer_type: str, name: str, torch_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Shape of a parameter in executor layout."""
    return to_executor(layer_type, name, np.empty(torch_shape)).shape


def _init(info: LayerInfo, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if info.type.startswith("batchnorm") or info.type in ("layernorm", "layernorm2d", "groupnorm", "grn", "layerscale"):
        return (1.0 if name == "weight" else 0.0) + 0.1 * rng.normal(size=shape)
    if info.type == "embedding":
        return rng.normal(size=shape)
    fan_in = math.prod(shape[:-1]) if len(shape) > 1 else shape[0]
    if info.type in ("lstm", "gru", "rnn"):  # torch: scale 1/sqrt(hidden_size)
        gates = {"lstm": 4, "gru": 3, "rnn": 1}[info.type]
        fan_in = shape[0] if name.startswith("weight_hr") else shape[-1] // gates
    return rng.normal(size=shape) / math.sqrt(fan_in)


def init_params(layers: list[LayerInfo], seed: int = 0) -> Params:
    """Every parameter, drawn from a generator seeded by (seed, name): any subset or shard of the
    model initialises to the same values as the whole."""
    out: Params = {}
    for info in layers:
        for name, torch_shape in info.param_shapes.items():
            key = f"{info.path}/{name}"
            rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
            out[key] = _init(info, name, executor_shape(info.type, name, torch_shape), rng)
    return out


def init_buffers(layers: list[LayerInfo]) -> Params:
    """BatchNorm running_mean (0), running_var (1) per channel (torch's initial values)."""
    out: Params = {}
    for info in layers:
        if info.buffers:
            channels = info.input_shape[0]
            out[f"{info.path}/running_mean"] = np.zeros(channels)
            out[f"{info.path}/running_var"] = np.ones(channels)
    return out


@dataclass(frozen=True)
class NetBatch:
    """Inputs (N, *input_shape) floats or int64 token ids, and targets for the loss."""

    inputs: np.ndarray
    targets: np.ndarray
    loss: LossKind

    def rows(self, start: int, stop: int) -> "NetBatch":
        """Samples [start, stop), as their own arrays (a micro-batch a layer keeps is its own
        buffer, not a view that pins the whole batch)."""
        return NetBatch(self.inputs[start:stop].copy(), self.targets[start:stop].copy(), self.loss)


def default_loss(layers: list[LayerInfo]) -> LossKind:
    """Cross-entropy over the last dim when it holds several classes; MSE for a single output."""
    return "mse" if layers[-1].output_shape[-1] == 1 else "cross_entropy"


def make_batch(layers: list[LayerInfo], batch: int, seed: int = 0, loss: LossKind | None = None,
               vocab: int | None = None, step: int = 0) -> NetBatch:
    """Seeded inputs (token ids below `vocab` for an embedding first layer) and targets; `step`
    draws another batch of the same run (step 0 is the first)."""
    rng = np.random.default_rng([seed, 1] if step == 0 else [seed, 1, step])
    first, last = layers[0], layers[-1]
    if first.type == "embedding":
        rows = vocab or first.param_shapes["weight"][0]
        inputs = rng.integers(0, rows, size=(batch, *first.input_shape))
    else:
        inputs = rng.normal(size=(batch, *first.input_shape))
    kind = loss or default_loss(layers)
    out = last.output_shape
    if kind == "cross_entropy":
        targets = rng.integers(0, out[-1], size=(batch, *out[:-1]))
    else:
        targets = rng.normal(size=(batch, *out))
    return NetBatch(inputs, targets, kind)
