"""Tensor-parallel roles of a network's leaves (shared by the planner and the executor).

**Tensor parallel** (Shoeybi et al. 2019, sec. 3, applied to any matmul layer): a Linear or
Conv (groups 1) whose output size tp divides is *column-parallel*: each rank holds a slice of
the output features/channels (weight split along its last, output dim) and computes
`x @ w_i` on the whole input; its input gradient is a partial sum, all-reduced in backward
(Megatron's f). Its sharded output flows through *shard-compatible* layers (activations,
dropout, and on the channel axis BatchNorm and pooling; flatten turns a channel shard into a
contiguous feature block), each on its slice. It then ends in one of two ways:
- *pair* (Megatron): the next Linear/Conv takes the shard as a **row-parallel** layer (weight
  split along dim 0, partial outputs all-reduced in forward, bias added once after);
- *gather* (the textbook C = A[B_1 ... B_p]): an **AllGather** concatenates the slices at the end
  of the compatible run; the backward takes each rank's slice of the gradient.
A pair is used when the next matmul can take the shard, unless its output cannot itself be
split (tp does not divide it, so a gather would leave it replicated) and the AllGather moves
fewer bytes than the pair's AllReduce (numel_gather < 2 * numel_out, from the ring factors
(p-1)/p and 2(p-1)/p of nccl-tests PERFORMANCE.md): the 2-3-2-1 MLP with tp 3 thus gathers its
3 hidden units rather than all-reducing the 2 outputs of the next layer. Anything else
(LayerNorm, softmax, embedding, RNN/LSTM/GRU, a layer tp does not divide) is *replicated*: every
tensor-parallel rank computes it whole. Shards never cross a residual block or a stage edge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from modelplan.count.network_tree import LeafNode, Node, leaves_of

MATMUL = ("linear", "conv1d", "conv2d")
ELEMENTWISE = ("relu", "relu6", "gelu", "silu", "tanh", "sigmoid", "hardswish", "hardsigmoid", "dropout")
CHANNELWISE = ("batchnorm1d", "batchnorm2d", "maxpool1d", "maxpool2d", "avgpool1d", "avgpool2d",
               "adaptiveavgpool1d", "adaptiveavgpool2d")


class TpRole(StrEnum):
    """What a leaf does under tensor parallelism."""

    REPLICATED = "replicated"
    """Whole layer on every tp rank (identical inputs, weights and gradients)."""
    COLUMN = "column"
    """Output features split: weight dim -1 and bias split; backward all-reduces dx."""
    ROW = "row"
    """Input features split: weight dim 0 split; forward all-reduces y, then adds the bias."""
    SHARDED = "sharded"
    """Runs on a feature slice (activation, dropout, BatchNorm with its channels, pooling)."""


@dataclass(frozen=True)
class LeafTp:
    """One leaf's tensor-parallel role."""

    role: TpRole
    axis: int | None = None
    """Batched-layout axis of the sharded activations this leaf reads/writes (1: channels)."""
    gather_after: bool = False
    """AllGather the output along `axis` (and slice the gradient in backward)."""


def _out_size(leaf: LeafNode) -> int:
    """Output features (linear) or channels (conv)."""
    return leaf.layer.out_features if leaf.info.type == "linear" else leaf.layer.out_channels


def _splittable(leaf: LeafNode, tp: int) -> bool:
    return leaf.info.type in MATMUL and _out_size(leaf) % tp == 0 and getattr(leaf.layer, "groups", 1) == 1


def _carry(leaf: LeafNode, axis: int) -> int | None:
    """The shard axis after a compatible leaf, or None when the leaf cannot run on the shard."""
    t = leaf.info.type
    if t in ELEMENTWISE:
        return axis
    if t in CHANNELWISE:
        return axis if axis == 1 else None
    if t == "flatten":
        rank = len(leaf.info.input_shape)
        start, end = leaf.layer.start_dim % rank + 1, leaf.layer.end_dim % rank + 1
        if axis < start:
            return axis
        if axis == start:
            return start  # the first merged axis: each shard is one contiguous block
        return axis - (end - start) if axis > end else None
    return None


def _row_ok(leaf: LeafNode, axis: int) -> bool:
    """A matmul that can take an input sharded along `axis` as a row-parallel layer."""
    t = leaf.info.type
    if t == "linear":
        return axis == len(leaf.info.input_shape)
    return t in ("conv1d", "conv2d") and axis == 1 and leaf.layer.groups == 1


def assign_tp(nodes: tuple[Node, ...], tp: int) -> dict[str, LeafTp]:
    """Tensor-parallel role of every leaf of a node list (a stage); shards end inside the list."""
    roles: dict[str, LeafTp] = {}
    if tp == 1:
        return {leaf.path: LeafTp(TpRole.REPLICATED) for leaf in leaves_of(nodes)}
    i = 0
    while i < len(nodes):
        node = nodes[i]
        if not isinstance(node, LeafNode):
            roles.update(assign_tp(node.main, tp))
            roles.update(assign_tp(node.shortcut, tp))
            for leaf in (node.add, node.act):
                if leaf is not None:
                    roles[leaf.path] = LeafTp(TpRole.REPLICATED)
            i += 1
            continue
        if not _splittable(node, tp):
            roles[node.path] = LeafTp(TpRole.REPLICATED)
            i += 1
            continue
        i = _column_run(nodes, i, tp, roles)
    return roles


def _column_run(nodes: tuple[Node, ...], i: int, tp: int, roles: dict[str, LeafTp]) -> int:
    """Assign a column-parallel leaf at i and the run it starts; returns the next index."""
    column = nodes[i]
    axis = 1 if column.info.type != "linear" else len(column.info.output_shape)
    run, j, axes = [], i + 1, [axis]
    while j < len(nodes) and isinstance(nodes[j], LeafNode):
        nxt = _carry(nodes[j], axes[-1])
        if nxt is None:
            break
        run.append(nodes[j])
        axes.append(nxt)
        j += 1
    partner = nodes[j] if j < len(nodes) and isinstance(nodes[j], LeafNode) else None
    pair = partner is not None and _row_ok(partner, axes[-1])
    if pair and not _splittable(partner, tp):
        gathered = math.prod(run[-1].info.output_shape if run else column.info.output_shape)
        pair = not gathered < 2 * math.prod(partner.info.output_shape)  # AllGather cheaper than AllReduce
    roles[column.path] = LeafTp(TpRole.COLUMN, axis, gather_after=not pair and not run)
    for k, leaf in enumerate(run):
        roles[leaf.path] = LeafTp(TpRole.SHARDED, axes[k], gather_after=not pair and k == len(run) - 1)
    if pair:
        roles[partner.path] = LeafTp(TpRole.ROW, axes[-1])
        return j + 1
    return j


def param_tp_dim(leaf: LeafNode, role: TpRole, name: str, ndim: int) -> int | None:
    """Dimension of an executor-layout parameter split over tp (None: replicated)."""
    if role is TpRole.COLUMN:
        return ndim - 1 if name == "weight" else 0
    if role is TpRole.ROW:
        return 0 if name == "weight" else None
    if role is TpRole.SHARDED and leaf.info.params:
        return 0  # BatchNorm weight and bias per channel
    return None


def tp_degree_check(nodes: tuple[Node, ...], tp: int) -> int:
    """How many matmul leaves tp splits (0: tensor parallelism only replicates)."""
    roles = assign_tp(nodes, tp)
    return sum(1 for r in roles.values() if r.role in (TpRole.COLUMN, TpRole.ROW))
