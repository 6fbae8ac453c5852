"""Tensor-parallel communication around a network's leaves (roles from `plan/net_tp.py`).

- column-parallel leaf: forward needs nothing (its input is whole on every rank); backward
  all-reduces the partial input gradient dx = dy_i @ w_i.T (Megatron's f,
  `copy_to_tensor_model_parallel_region`), unless the leaf is the network's first;
- row-parallel leaf: forward all-reduces the partial outputs x_i @ w_i, then adds the bias once
  (Megatron's g, `reduce_from_tensor_model_parallel_region`); backward needs nothing;
- gather point: forward all-gathers the feature slices along the shard axis in tp-rank order
  (`gather_from_tensor_model_parallel_region`); backward keeps this rank's slice of dy.
"""

from __future__ import annotations

import numpy as np

from modelplan.comm.communicator import Communicator, Group
from modelplan.count.network_tree import LeafNode
from modelplan.execute.net.model import LeafHooks, Params
from modelplan.plan.net_tp import LeafTp, TpRole


def shard_slice(size: int, tp: int, tp_rank: int) -> slice:
    """This rank's block of `size` features (tp divides size)."""
    per = size // tp
    return slice(tp_rank * per, (tp_rank + 1) * per)


def _take(x: np.ndarray, axis: int, cut: slice) -> np.ndarray:
    index = [slice(None)] * x.ndim
    index[axis] = cut
    return np.ascontiguousarray(x[tuple(index)])


class NetTensorParallel(LeafHooks):
    """The hooks of one rank of a tp group for one stage."""

    def __init__(self, comm: Communicator, group: Group, roles: dict[str, LeafTp]) -> None:
        self.comm, self.group, self.roles = comm, group, roles
        self.tp, self.tp_rank = group.size, group.index(comm.rank)

    def _role(self, node: LeafNode) -> LeafTp:
        return self.roles[node.path]

    def feature(self, node: LeafNode) -> tuple[int, slice] | None:
        r = self._role(node)
        if r.role is not TpRole.SHARDED:
            return None
        size = node.info.input_shape[r.axis - 1]
        return r.axis, shard_slice(size, self.tp, self.tp_rank)

    def add_bias(self, node: LeafNode) -> bool:
        return self._role(node).role is not TpRole.ROW

    def after_forward(self, node: LeafNode, y: np.ndarray, p: Params) -> np.ndarray:
        r = self._role(node)
        if r.role is TpRole.ROW and self.tp > 1:
            y = self.comm.all_reduce(y, self.group, label=f"tp/{node.path}/row")  # sum_i x_i @ w_i
            if "bias" in p:  # once, after the reduce; a conv bias is per channel (axis 1)
                conv = node.info.type.startswith("conv")
                y = y + (p["bias"].reshape((-1,) + (1,) * (y.ndim - 2)) if conv else p["bias"])
        if r.gather_after and self.tp > 1:
            y = self.comm.all_gather(y, self.group, axis=r.axis, label=f"tp/{node.path}/gather")
        return y

    def before_backward(self, node: LeafNode, dy: np.ndarray) -> np.ndarray:
        r = self._role(node)
        if r.gather_after and self.tp > 1:
            return _take(dy, r.axis, shard_slice(dy.shape[r.axis], self.tp, self.tp_rank))
        return dy

    def after_backward(self, node: LeafNode, dx: np.ndarray | None) -> np.ndarray | None:
        if dx is not None and self._role(node).role is TpRole.COLUMN and self.tp > 1:
            return self.comm.all_reduce(dx, self.group, label=f"tp/{node.path}/column-dx")
        return dx
