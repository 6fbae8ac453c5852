"""Flatten a network's layer tree into leaves in execution order, inferring every shape.

Shapes are per sample (no batch dimension). Paths are torch `named_modules()` names with '/'
for '.': a child is named by its `name`, else its position in the parent list (as in
`nn.Sequential`); see `Repeat` and `Residual` for their children. Any mismatch raises a one-line
`SpecError` naming the layer path and every number involved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from modelplan.errors import SpecError
from modelplan.specs import context_attention, focal_modulation
from modelplan.specs.context_attention import AdditiveAttention, SeparableAttention
from modelplan.specs.focal_modulation import FocalModulation
from modelplan.specs.layers import (
    Activation,
    AdaptiveAvgPool,
    Attend,
    BatchNorm,
    Conv,
    Dropout,
    Embedding,
    Flatten,
    GlobalResponseNorm,
    GroupNorm,
    LayerNorm,
    LayerScale,
    LeafLayer,
    Linear,
    Pool,
    Recurrent,
    Softmax,
    SpaceToDepth,
    WindowAttention,
    ZeroPad2d,
    PositionEmbedding,
    ClsToken,
    Select,
    Unflatten,
)

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Leaf:
    """One computing step: a leaf layer, or the sum `add` closing a residual block."""

    path: str
    """Slash path, e.g. 'layer2/0/conv1' or 'layer2/0/add'."""
    type: str
    """The layer's `type`, or 'add' / 'mul' / 'sub' / 'attend' / 'concat' closing a residual block
    (sum / gate product / difference / attention of main's queries over the shortcut's keys and
    values / the shortcut's and main's channels stacked)."""
    layer: LeafLayer | None
    """The leaf spec (None for 'add', 'mul', 'sub', 'concat' (input_shape main's output); `layers.Attend`
    for 'attend', input_shape its keys and values, output_shape its queries)."""
    input_shape: Shape
    """Per-sample input shape."""
    output_shape: Shape
    """Per-sample output shape."""
    unit: int
    """Index of the smallest unit a pipeline stage or a recompute checkpoint can hold: every
    leaf outside residual blocks is one unit, a whole residual block is one; sequential and
    repeat groups are transparent. Units count from 0 in execution order."""


def as_tuple(value: int | tuple[int, ...], n: int, field: str, where: str) -> Shape:
    """An int-or-tuple field as n ints."""
    if isinstance(value, int):
        return (value,) * n
    if len(value) != n:
        raise SpecError(f"{where}: {field} {list(value)} must have {n} entries")
    return tuple(value)


def _fmt(shape: Shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _conv_out(size: int, pad: int, dilation: int, kernel: int, stride: int) -> int:
    """floor((L + 2p - d(k-1) - 1) / s) + 1, the shape formula of torch.nn.Conv/MaxPool docs."""
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _linear(layer: Linear, shape: Shape, where: str) -> Shape:
    if layer.in_features is not None and layer.in_features != shape[-1]:
        raise SpecError(
            f"{where}: in_features ({layer.in_features}) != input last dim ({shape[-1]}) "
            f"of input {_fmt(shape)}"
        )
    return shape[:-1] + (layer.out_features,)


def _conv(layer: Conv, shape: Shape, where: str) -> Shape:
    n = layer.spatial_dims
    if len(shape) != n + 1:
        raise SpecError(f"{where}: needs a {n + 1}-dim [channels, ...] input, got {_fmt(shape)}")
    channels = shape[0]
    if layer.in_channels is not None and layer.in_channels != channels:
        raise SpecError(
            f"{where}: in_channels ({layer.in_channels}) != input channels ({channels})"
        )
    if channels % layer.groups:
        raise SpecError(f"{where}: groups ({layer.groups}) must divide in_channels ({channels})")
    kernel = as_tuple(layer.kernel_size, n, "kernel_size", where)
    stride = as_tuple(layer.stride, n, "stride", where)
    dilation = as_tuple(layer.dilation, n, "dilation", where)
    if layer.padding == "same":
        if any(s != 1 for s in stride):
            raise SpecError(f"{where}: padding 'same' needs stride 1, got {list(stride)}")
        return (layer.out_channels,) + shape[1:]
    pad = (0,) * n if layer.padding == "valid" else as_tuple(layer.padding, n, "padding", where)
    out = []
    for axis in range(n):
        size = _conv_out(shape[1 + axis], pad[axis], dilation[axis], kernel[axis], stride[axis])
        if size < 1:
            raise SpecError(
                f"{where}: output size {size} < 1 along dim {1 + axis}: input {shape[1 + axis]}, "
                f"padding {pad[axis]}, dilation {dilation[axis]}, kernel {kernel[axis]}, "
                f"stride {stride[axis]}"
            )
        out.append(size)
    return (layer.out_channels, *out)


def _pool(layer: Pool, shape: Shape, where: str) -> Shape:
    n = layer.spatial_dims
    if len(shape) != n + 1:
        raise SpecError(f"{where}: needs a {n + 1}-dim [channels, ...] input, got {_fmt(shape)}")
    kernel = as_tuple(layer.kernel_size, n, "kernel_size", where)
    stride = kernel if layer.stride is None else as_tuple(layer.stride, n, "stride", where)
    pad = as_tuple(layer.padding, n, "padding", where)
    out = []
    for axis in range(n):
        size, k, s, p = shape[1 + axis], kernel[axis], stride[axis], pad[axis]
        if 2 * p > k:
            raise SpecError(f"{where}: padding ({p}) must be at most half of kernel_size ({k})")
        if layer.ceil_mode:
            o = -(-(size + 2 * p - k) // s) + 1
            if (o - 1) * s >= size + p:  # torch: the last window must start inside the input
                o -= 1
        else:
            o = (size + 2 * p - k) // s + 1
        if o < 1:
            raise SpecError(
                f"{where}: output size {o} < 1 along dim {1 + axis}: input {size}, padding {p}, "
                f"kernel {k}, stride {s}"
            )
        out.append(o)
    return (shape[0], *out)


def _recurrent(layer: Recurrent, shape: Shape, where: str) -> Shape:
    if len(shape) != 2:
        raise SpecError(f"{where}: needs a [seq, features] input, got {_fmt(shape)}")
    if layer.input_size is not None and layer.input_size != shape[1]:
        raise SpecError(f"{where}: input_size ({layer.input_size}) != input features ({shape[1]})")
    width = layer.directions * layer.h_out
    return (shape[0], width) if layer.output == "sequence" else (width,)


def unflatten_sizes(layer: Unflatten, shape: Shape) -> tuple[int, ...]:
    """The sizes an Unflatten leaf gives the last axis of `shape` (None: the square root, twice)."""
    if layer.sizes is not None:
        return tuple(layer.sizes)
    side = math.isqrt(shape[-1])
    return (side, side)


def _dim(dim: int, rank: int, field: str, where: str) -> int:
    if not -rank <= dim < rank:
        raise SpecError(f"{where}: {field} ({dim}) out of range for a {rank}-dim sample")
    return dim % rank


def leaf_output_shape(layer: LeafLayer, shape: Shape, where: str) -> Shape:
    """Output shape of one leaf layer for a per-sample input shape (torch's shape rules)."""
    if isinstance(layer, Linear):
        return _linear(layer, shape, where)
    if isinstance(layer, Conv):
        return _conv(layer, shape, where)
    if isinstance(layer, Pool):
        return _pool(layer, shape, where)
    if isinstance(layer, Recurrent):
        return _recurrent(layer, shape, where)
    if isinstance(layer, BatchNorm):
        ranks = (1, 2) if layer.type == "batchnorm1d" else (3,)
        if len(shape) not in ranks:
            raise SpecError(f"{where}: needs a {' or '.join(map(str, ranks))}-dim input, got {_fmt(shape)}")
        if layer.num_features is not None and layer.num_features != shape[0]:
            raise SpecError(f"{where}: num_features ({layer.num_features}) != input channels ({shape[0]})")
        return shape
    if isinstance(layer, LayerNorm) and layer.type == "layernorm2d":
        if len(shape) < 2:
            raise SpecError(f"{where}: needs a [channels, ...] input, got {_fmt(shape)}")
        return shape
    if isinstance(layer, LayerNorm):
        normalized = tuple(layer.normalized_shape or shape[-1:])
        if shape[len(shape) - len(normalized):] != normalized or len(normalized) > len(shape):
            raise SpecError(
                f"{where}: normalized_shape {list(normalized)} != trailing dims of input {_fmt(shape)}"
            )
        return shape
    if isinstance(layer, AdaptiveAvgPool):
        n = layer.spatial_dims
        if len(shape) != n + 1:
            raise SpecError(f"{where}: needs a {n + 1}-dim [channels, ...] input, got {_fmt(shape)}")
        return (shape[0], *as_tuple(layer.output_size, n, "output_size", where))
    if isinstance(layer, Embedding):
        return shape + (layer.embedding_dim,)
    if isinstance(layer, Flatten):
        start = _dim(layer.start_dim, len(shape), "start_dim", where)
        end = _dim(layer.end_dim, len(shape), "end_dim", where)
        if start > end:
            raise SpecError(f"{where}: start_dim ({layer.start_dim}) is after end_dim ({layer.end_dim})")
        return shape[:start] + (math.prod(shape[start : end + 1]),) + shape[end + 1 :]
    if isinstance(layer, Softmax):
        _dim(layer.dim, len(shape), "dim", where)
        return shape
    if isinstance(layer, (Activation, Dropout, LayerScale)):
        return shape
    if isinstance(layer, GlobalResponseNorm):
        if len(shape) < 2:
            raise SpecError(f"{where}: needs a [channels, ...] input, got {_fmt(shape)}")
        return shape
    if isinstance(layer, GroupNorm):
        if len(shape) < 2 or shape[0] % layer.num_groups:
            raise SpecError(f"{where}: num_groups ({layer.num_groups}) must divide the channels of a [C, ...] input, "
                            f"got {_fmt(shape)}")
        return shape
    if isinstance(layer, WindowAttention):
        if len(shape) != 3 or shape[0] % (3 * layer.heads):
            raise SpecError(f"{where}: needs a [3 C, H, W] input of stacked q, k, v with 3 x heads ({layer.heads}) "
                            f"dividing its channels, got {_fmt(shape)}")
        return (shape[0] // 3, *shape[1:])
    if isinstance(layer, PositionEmbedding):
        return shape
    if isinstance(layer, (SeparableAttention, AdditiveAttention)):
        return context_attention.output_shape(layer, shape, where)
    if isinstance(layer, FocalModulation):
        return focal_modulation.output_shape(layer, shape, where)
    if isinstance(layer, (ClsToken, Select)):
        if len(shape) != 2:
            raise SpecError(f"{where}: needs a [C, L] input, got {_fmt(shape)}")
        if isinstance(layer, ClsToken):
            return (shape[0], shape[1] + 1)
        start = _dim(layer.index, shape[1], "index", where)
        if layer.length is None:
            return (shape[0],)
        length = layer.length or shape[1] - start
        if start + length > shape[1]:
            raise SpecError(f"{where}: {length} positions from index {layer.index} run past the {shape[1]} of the input")
        return (shape[0], length)
    if isinstance(layer, Unflatten):
        sizes = unflatten_sizes(layer, shape)
        if len(shape) != 2 or math.prod(sizes) != shape[1] or min(sizes) < 1:
            raise SpecError(f"{where}: sizes {layer.sizes} must multiply to the last axis of a [C, L] input "
                            f"(None: L a square), got {_fmt(shape)}")
        return (shape[0], *sizes)
    if isinstance(layer, ZeroPad2d):
        if len(shape) != 3:
            raise SpecError(f"{where}: needs a [C, H, W] input, got {_fmt(shape)}")
        left, right, top, bottom = layer.padding
        return (shape[0], shape[1] + top + bottom, shape[2] + left + right)
    if isinstance(layer, SpaceToDepth):
        if len(shape) != 3:
            raise SpecError(f"{where}: needs a [C, H, W] input, got {_fmt(shape)}")
        b = layer.block
        return (shape[0] * b * b, -(-shape[1] // b), -(-shape[2] // b))
    raise SpecError(f"{where}: unsupported layer type '{layer.type}'")  # pragma: no cover


class _Walker:
    """Depth-first traversal that appends leaves and threads the shape through."""

    def __init__(self) -> None:
        self.leaves: list[Leaf] = []
        self.unit = -1
        self.in_residual = 0

    def _open_unit(self) -> None:
        """A leaf or residual block outside any residual block starts a new unit."""
        if not self.in_residual:
            self.unit += 1

    @staticmethod
    def _join(parent: str, segment: str) -> str:
        return f"{parent}/{segment}" if parent else segment

    def _attend(self, item, path: str, queries: Shape, keys_values: Shape) -> Shape:
        """The `attend` leaf of an attention residual: main's [C, *P] queries over the
        shortcut's [C + C_v, *M] stacked keys and values, output [C_v, *P]."""
        values = keys_values[0] - queries[0] if len(keys_values) == len(queries) else 0
        if len(queries) < 2 or values < 1 or queries[0] % item.heads or values % item.heads:
            raise SpecError(f"layer '{path}' (residual, attend): needs main [C, ...] queries and shortcut [C + C_v, ...] "
                            f"keys and values of the same rank, heads ({item.heads}) dividing C and C_v, got main "
                            f"{_fmt(queries)} and shortcut {_fmt(keys_values)}")
        if item.offset_bias and (len(queries) != 3 or any(
                -(-m // item.offset_bias) != q for q, m in zip(queries[1:], keys_values[1:]))):
            raise SpecError(f"layer '{path}' (residual, attend): offset_bias ({item.offset_bias}) needs [C, H, W] "
                            f"queries on every offset_bias-th position of the keys' grid, got main {_fmt(queries)} "
                            f"and shortcut {_fmt(keys_values)}")
        p = item.patch
        if p > 1 and (len(queries) != 3 or queries[1:] != keys_values[1:] or queries[1] % p or queries[2] % p):
            raise SpecError(f"layer '{path}' (residual, attend): patch ({p}) needs queries, keys and values on one "
                            f"[C, H, W] grid that {p} divides, got main {_fmt(queries)} and shortcut {_fmt(keys_values)}")
        w = item.window
        if w and (len(queries) != 3 or any(m % w or q % (m // w) for q, m in zip(queries[1:], keys_values[1:]))):
            raise SpecError(f"layer '{path}' (residual, attend): window ({w}) needs [C, H, W] keys whose grid {w} "
                            f"divides and queries whose grid as many blocks divide, got main {_fmt(queries)} and "
                            f"shortcut {_fmt(keys_values)}")
        layer = Attend(type="attend", heads=item.heads, patch=p, offset_bias=item.offset_bias, scale=item.scale,
                       window=w)
        out = (values, *queries[1:])
        self.leaves.append(Leaf(self._join(path, "attend"), "attend", layer, keys_values, out, self.unit))
        return out

    def items(self, items: list, shape: Shape, parent: str, index_prefix: str = "") -> Shape:
        """Walk a list; an unnamed repeat splices its copies into the positions of this list."""
        position = 0
        for item in items:
            copies = item.times if item.type == "repeat" and item.name is None else 0
            expanded = [sub for _ in range(copies) for sub in item.layers] if copies else [item]
            for sub in expanded:
                segment = sub.name if sub.name is not None else f"{index_prefix}{position}"
                shape = self.item(sub, shape, self._join(parent, segment))
                position += 1
        return shape

    def item(self, item, shape: Shape, path: str) -> Shape:
        """Walk one item at `path`."""
        if item.type == "sequential":
            return self.items(item.layers, shape, path)
        if item.type == "repeat":
            for copy in range(item.times):
                copy_path = f"{path}/{copy}"
                if len(item.layers) == 1:
                    if item.layers[0].name is not None:
                        raise SpecError(
                            f"layer '{path}' (repeat): its single item cannot be named "
                            f"('{item.layers[0].name}'); copies are named by index"
                        )
                    shape = self.item(item.layers[0], shape, copy_path)
                else:
                    shape = self.items(item.layers, shape, copy_path)
            return shape
        if item.type == "residual":
            self._open_unit()
            self.in_residual += 1
            main = self.items(item.main, shape, path)
            short = self.items(item.shortcut, shape, path, index_prefix="shortcut/")
            self.in_residual -= 1
            if item.combine == "attend":
                main = self._attend(item, path, main, short)
            elif item.combine == "concat":  # torch.cat([shortcut, main], dim=1 + axis): the other axes equal
                axis = item.axis % len(main) if main else 0
                if len(main) != len(short) or len(main) < 2 or any(
                        m != s for i, (m, s) in enumerate(zip(main, short)) if i != axis):
                    raise SpecError(f"layer '{path}' (residual, concat): main branch output {_fmt(main)} and "
                                    f"shortcut output {_fmt(short)} must share every axis but axis {item.axis}")
                joined = tuple(m + s if i == axis else m for i, (m, s) in enumerate(zip(main, short)))
                self.leaves.append(Leaf(self._join(path, "concat"), "concat", None, main, joined, self.unit))
                main = joined
            elif item.combine == "mul":  # the gate broadcasts over the shortcut's axes where it has size 1
                if len(main) != len(short) or any(g not in (1, s) for g, s in zip(main, short)):
                    raise SpecError(f"layer '{path}' (residual, mul): main branch output {_fmt(main)} does not "
                                    f"broadcast over shortcut output {_fmt(short)}")
                self.leaves.append(Leaf(self._join(path, "mul"), "mul", None, main, short, self.unit))
                main = short
            elif main != short:
                raise SpecError(
                    f"layer '{path}' (residual): main branch output {_fmt(main)} != "
                    f"shortcut output {_fmt(short)}"
                )
            else:
                self.leaves.append(Leaf(self._join(path, item.combine), item.combine, None, main, main, self.unit))
            if item.activation is not None:
                act = Activation(type=item.activation)
                self.leaves.append(Leaf(self._join(path, "act"), act.type, act, main, main, self.unit))
            return main
        where = f"layer '{path}' ({item.type})"
        if isinstance(item, Embedding) and self.leaves:
            raise SpecError(f"{where}: an embedding must be the first layer (it reads token ids)")
        out = leaf_output_shape(item, shape, where)
        self._open_unit()
        self.leaves.append(Leaf(path, item.type, item, shape, out, self.unit))
        return out


def walk(layers: list, input_shape: Shape) -> list[Leaf]:
    """Leaves of a layer list in execution order with inferred shapes; paths are checked unique."""
    walker = _Walker()
    walker.items(layers, tuple(input_shape), "")
    seen: set[str] = set()
    for leaf in walker.leaves:
        if leaf.path in seen:
            raise SpecError(f"duplicate layer path '{leaf.path}' (names must be unique among siblings)")
        seen.add(leaf.path)
    for leaf in walker.leaves:
        parts = leaf.path.split("/")
        for cut in range(1, len(parts)):
            prefix = "/".join(parts[:cut])
            if prefix in seen:
                raise SpecError(f"layer path '{prefix}' is both a layer and a group of '{leaf.path}'")
    return walker.leaves
