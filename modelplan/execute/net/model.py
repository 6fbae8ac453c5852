"""Forward and backward over a network's node tree, and the single-device reference step.

`forward_nodes` / `backward_nodes` run a list of nodes (leaves and residual blocks) on one
batch; a `LeafHooks` object lets a tensor-parallel rank add its communication around each leaf
(the base class does nothing: the single-device run). The reference step runs the whole model
on the global batch in chunks of `micro_batch` samples with gradient accumulation, the loss of
the step being the mean over all samples. The chunking matters only for BatchNorm, whose
statistics are those of the batch of each forward call: the reference normalises each chunk of
`micro_batch` consecutive samples by its own statistics, exactly what a data-parallel replica
does with its micro-batches (torch BatchNorm2d under DDP); without BatchNorm any chunking gives
the same numbers up to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from modelplan.count.cross_attention import offset_index
from modelplan.count.network_tree import LeafNode, Node
from modelplan.execute.net.cross_attention import attend_backward, attend_forward
from modelplan.execute.net.loss import loss_backward, loss_forward
from modelplan.execute.net.ops import leaf_backward, leaf_forward
from modelplan.execute.net.params import NetBatch
from modelplan.execute.net.saved import RunContext, Saved
from modelplan.execute.optim import OptimizerConfig, optimizer_step
from modelplan.execute.reference import ReferenceResult

Params = dict[str, np.ndarray]


class LeafHooks:
    """What a rank does around each leaf beyond its math; the base class does nothing."""

    def feature(self, node: LeafNode) -> tuple[int, slice] | None:
        """The (axis, slice) of the activations this rank holds (tensor-parallel shard)."""
        return None

    def before_forward(self, node: LeafNode, x: np.ndarray, p: Params) -> None:
        """Called with the leaf's input and parameters (for recording; changes nothing)."""

    def add_bias(self, node: LeafNode) -> bool:
        """Whether the leaf adds its bias itself (row-parallel adds it after the reduce)."""
        return True

    def after_forward(self, node: LeafNode, y: np.ndarray, p: Params) -> np.ndarray:
        """Output as the next leaf sees it (e.g. all-reduced, all-gathered)."""
        return y

    def before_backward(self, node: LeafNode, dy: np.ndarray) -> np.ndarray:
        """Gradient of the output as the leaf's own backward takes it (e.g. this rank's slice)."""
        return dy

    def after_backward(self, node: LeafNode, dx: np.ndarray | None) -> np.ndarray | None:
        """Gradient of the input as the previous leaf sees it (e.g. all-reduced)."""
        return dx


def sub(tensors: Params, prefix: str) -> Params:
    """The tensors under `prefix/`, keyed by their names relative to it."""
    n = len(prefix) + 1
    return {k[n:]: v for k, v in tensors.items() if k.startswith(prefix + "/") and "/" not in k[n:]}


def forward_nodes(nodes: tuple[Node, ...], params: Params, x: np.ndarray, ctx: RunContext,
                  buffers: Params, hooks: LeafHooks, tape: list) -> np.ndarray:
    """Run `nodes` on x; appends one tape entry per node (Saved, or a residual's sub-tapes, its
    activation's Saved and what its gate product keeps)."""
    for node in nodes:
        if isinstance(node, LeafNode):
            x, saved = _leaf_forward(node, params, x, ctx, buffers, hooks)
            tape.append(saved)
            continue
        main_tape: list = []
        short_tape: list = []
        y = forward_nodes(node.main, params, x, ctx, buffers, hooks, main_tape)
        s = forward_nodes(node.shortcut, params, x, ctx, buffers, hooks, short_tape)
        combine = node.add.info.type
        gated = combine == "mul"
        kept = Saved(floats=(y, s)) if gated else Saved()
        if combine == "attend":  # main's queries over the shortcut's stacked keys and values
            x, probs = attend_forward(y, s, node.add.layer.heads, node.add.layer.patch, *_bias(node.add, params),
                                      scale=node.add.layer.scale, window=node.add.layer.window)
            kept = Saved(floats=(y, s, probs))
        elif combine == "concat":  # torch.cat([shortcut, main], dim=1 + the axis the shapes differ on)
            x = np.concatenate([s, y], axis=1 + concat_axis(node.add))
        else:
            x = y * s if gated else y - s if combine == "sub" else y + s  # gate product (y broadcast over s), difference, sum
        act = None
        if node.act is not None:
            x, act = _leaf_forward(node.act, params, x, ctx, buffers, hooks)
        tape.append((main_tape, short_tape, act, kept))
    return x


def concat_axis(leaf: LeafNode) -> int:
    """The sample axis a concat leaf stacks along: the one where main's shape (its input) and the
    output differ."""
    return next(i for i, (a, b) in enumerate(zip(leaf.info.input_shape, leaf.info.output_shape)) if a != b)


def _bias(leaf: LeafNode, params: Params) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(table, index) of an attend leaf's LeViT attention biases, or (None, None)."""
    if not leaf.layer.offset_bias:
        return None, None
    _, index = offset_index(leaf.info.output_shape[1:], leaf.info.input_shape[1:], leaf.layer.offset_bias)
    return params[f"{leaf.path}/attention_biases"], np.asarray(index)


def _leaf_forward(node: LeafNode, params: Params, x, ctx, buffers: Params, hooks: LeafHooks):
    p = sub(params, node.path)
    own = sub(buffers, node.path)
    hooks.before_forward(node, x, p)
    y, saved = leaf_forward(node, p, x, ctx, hooks.feature(node), hooks.add_bias(node), own)
    buffers.update({f"{node.path}/{k}": v for k, v in own.items()})
    return hooks.after_forward(node, y, p), saved


def backward_nodes(nodes: tuple[Node, ...], params: Params, tape: list, dy: np.ndarray,
                   grads: Params, hooks: LeafHooks, need_dx: bool = True) -> np.ndarray | None:
    """Backward through `nodes`; adds into `grads`; `need_dx` False skips the first leaf's dx."""
    for i in reversed(range(len(nodes))):
        node, entry = nodes[i], tape[i]
        wants_dx = need_dx or i > 0
        if isinstance(node, LeafNode):
            dy = _leaf_backward(node, params, entry, dy, grads, hooks, wants_dx)
            continue
        main_tape, short_tape, act, combine = entry
        if node.act is not None:
            dy = _leaf_backward(node.act, params, act, dy, grads, hooks, True)
        dy_main = dy_short = dy
        if node.add.info.type == "attend":
            table, index = _bias(node.add, params)
            dy_main, dy_short, dtable = attend_backward(dy, *combine.floats, node.add.layer.heads,
                                                        node.add.layer.patch, table, index, scale=node.add.layer.scale,
                                                        window=node.add.layer.window)
            if dtable is not None:
                key = f"{node.add.path}/attention_biases"
                grads[key] = grads[key] + dtable if key in grads else dtable
        elif node.add.info.type == "concat":  # each branch takes its own channels' (positions') gradient
            axis = concat_axis(node.add)
            cut = node.add.info.output_shape[axis] - node.add.info.input_shape[axis]
            dy_short, dy_main = np.split(dy, [cut], axis=1 + axis)
        elif combine.floats:  # d(y * s): dy * s summed over the axes y was broadcast along, and dy * y
            y, s = combine.floats
            axes = tuple(i for i in range(1, dy.ndim) if y.shape[i] == 1 and dy.shape[i] != 1)
            dy_main, dy_short = (dy * s).sum(axis=axes, keepdims=True), dy * y
        d_main = backward_nodes(node.main, params, main_tape, dy_main, grads, hooks)
        if node.add.info.type == "sub":
            dy_short = -dy
        d_short = backward_nodes(node.shortcut, params, short_tape, dy_short, grads, hooks)
        dy = d_main + d_short
    return dy


def _leaf_backward(node: LeafNode, params: Params, saved: Saved, dy, grads: Params,
                   hooks: LeafHooks, need_dx: bool):
    dx, g = leaf_backward(node, sub(params, node.path), saved, hooks.before_backward(node, dy), need_dx)
    for name, value in g.items():
        key = f"{node.path}/{name}"
        grads[key] = grads[key] + value if key in grads else value
    return hooks.after_backward(node, dx if need_dx else None)


def tape_leaves(nodes: tuple[Node, ...], tape: list) -> Iterator[tuple[LeafNode, Saved]]:
    """(leaf, Saved) pairs of a tape, in execution order."""
    for node, entry in zip(nodes, tape):
        if isinstance(node, LeafNode):
            yield node, entry
        else:
            main_tape, short_tape, act, combine = entry
            yield from tape_leaves(node.main, main_tape)
            yield from tape_leaves(node.shortcut, short_tape)
            yield node.add, combine
            if node.act is not None:
                yield node.act, act


@dataclass(frozen=True)
class NetReference(ReferenceResult):
    """The reference step's loss, gradients and updated parameters, plus BatchNorm buffers."""

    buffers: Params = field(default_factory=dict, repr=False)
    outputs: np.ndarray | None = field(default=None, repr=False)
    """Network outputs (B, *output_shape) of the step's forward."""


def loss_and_grads(nodes: tuple[Node, ...], params: Params, batch: NetBatch, micro_batch: int,
                   seed: int = 0, buffers: Params | None = None) -> tuple[float, Params, np.ndarray]:
    """Mean loss over the batch, gradients, outputs; BatchNorm statistics per `micro_batch` chunk."""
    total = batch.inputs.shape[0]
    if total % micro_batch:
        raise ValueError(f"batch ({total}) must be divisible by micro_batch ({micro_batch})")
    chunks = total // micro_batch
    hooks, grads, outputs, losses = LeafHooks(), {}, [], []
    buffers = {} if buffers is None else buffers
    for k in range(chunks):
        part = batch.rows(k * micro_batch, (k + 1) * micro_batch)
        ctx = RunContext(seed, k * micro_batch, total)
        tape: list[Any] = []
        y = forward_nodes(nodes, params, part.inputs, ctx, buffers, hooks, tape)
        loss, cache = loss_forward(batch.loss, y, part.targets)
        dy = loss_backward(batch.loss, cache, part.targets, 1.0 / chunks)
        backward_nodes(nodes, params, tape, dy, grads, hooks, need_dx=False)
        losses.append(loss)
        outputs.append(y)
    return float(np.mean(losses)), grads, np.concatenate(outputs)


def reference_step(nodes: tuple[Node, ...], params: Params, batch: NetBatch, optimizer: OptimizerConfig,
                   micro_batch: int, seed: int = 0, buffers: Params | None = None) -> NetReference:
    """One optimizer step of the whole model on one device (fresh optimizer state, step 1)."""
    buffers = {k: v.copy() for k, v in (buffers or {}).items()}
    loss, grads, outputs = loss_and_grads(nodes, params, batch, micro_batch, seed, buffers)
    new = {}
    for name, w in params.items():
        g = grads.get(name, np.zeros_like(w))
        state = optimizer.init_state(w.size)
        new[name] = optimizer_step(optimizer, w.reshape(-1), g.reshape(-1), state, 1).reshape(w.shape)
    return NetReference(loss, grads, new, buffers, outputs)
