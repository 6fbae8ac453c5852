"""A network as the executor and planner run it: leaves and residual blocks, grouped into units.

`network_layers` lists the leaves flat; running them needs the residual structure back (a
block's shortcut reads the block's input). `network_tree` walks the spec tree in the walker's
depth-first order (main items, shortcut items, `add`, `act`), pairing each spec item with its
`LayerInfo` row, so paths, shapes and costs come from the one table. A **unit**
(`LayerInfo.unit`) is the smallest block a pipeline stage can hold: a leaf outside residual
blocks, or a whole block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Union

from modelplan.count.network import LayerInfo, network_layers
from modelplan.specs.layers import LeafLayer
from modelplan.specs.network import NetworkSpec, Repeat, Residual, Sequential
from modelplan.specs.network_walk import Leaf, walk


@dataclass(frozen=True)
class LeafNode:
    """One computing leaf: its spec (None for a residual `add`) and its table row."""

    layer: LeafLayer | None
    info: LayerInfo

    @property
    def path(self) -> str:
        """Slash path, e.g. 'layer1/0/conv1'."""
        return self.info.path


@dataclass(frozen=True)
class ResidualNode:
    """main(x) + shortcut(x), then the optional activation (ResNet blocks)."""

    path: str
    main: tuple["Node", ...]
    shortcut: tuple["Node", ...]
    """Empty: the identity."""
    add: LeafNode
    act: LeafNode | None

    @property
    def info(self) -> LayerInfo:
        """The row of the closing sum (its shapes are the block's output)."""
        return self.add.info


Node = Union[LeafNode, ResidualNode]


def leaves_of(nodes: tuple[Node, ...] | list[Node]) -> Iterator[LeafNode]:
    """Every leaf under `nodes` in execution order."""
    for node in nodes:
        if isinstance(node, LeafNode):
            yield node
        else:
            yield from leaves_of(node.main)
            yield from leaves_of(node.shortcut)
            yield node.add
            if node.act is not None:
                yield node.act


class _Builder:
    """Consumes (Leaf, LayerInfo) pairs in walk order while retracing the spec tree."""

    def __init__(self, pairs: list[tuple[Leaf, LayerInfo]]) -> None:
        self._pairs = iter(pairs)

    def _next(self) -> LeafNode:
        leaf, info = next(self._pairs)
        return LeafNode(leaf.layer, info)

    def items(self, items: list) -> list[Node]:
        out: list[Node] = []
        for item in items:
            out.extend(self.item(item))
        return out

    def item(self, item) -> list[Node]:
        if isinstance(item, Sequential):
            return self.items(item.layers)
        if isinstance(item, Repeat):
            return [node for _ in range(item.times) for node in self.items(item.layers)]
        if isinstance(item, Residual):
            main = tuple(self.items(item.main))
            shortcut = tuple(self.items(item.shortcut))
            add = self._next()
            act = self._next() if item.activation is not None else None
            return [ResidualNode(add.path.rsplit("/", 1)[0], main, shortcut, add, act)]
        return [self._next()]


def network_tree(spec: NetworkSpec, dtype_bytes: int = 4) -> list[tuple[Node, ...]]:
    """The network as units (`LayerInfo.unit`), each a tuple of nodes in execution order."""
    leaves = walk(spec.layers, tuple(spec.input_shape))
    rows = network_layers(spec, dtype_bytes)
    nodes = _Builder(list(zip(leaves, rows))).items(spec.layers)
    units: dict[int, list[Node]] = {}
    for node in nodes:
        units.setdefault(node.info.unit, []).append(node)
    return [tuple(units[k]) for k in sorted(units)]


def unit_flops(units: list[tuple[Node, ...]]) -> list[int]:
    """Forward FLOPs per sample of each unit (the weights of a balanced pipeline split)."""
    return [sum(leaf.info.forward_flops for leaf in leaves_of(unit)) for unit in units]
