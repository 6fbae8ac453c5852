"""Tensor- and sequence-parallel communication: Megatron-LM's conjugate region operators.

Each operator is a forward/backward pair (Megatron-LM `tensor_parallel/mappings.py`; Shoeybi et
al. 2019, fig. 3 'f' and 'g'; Korthikanti et al. 2022, sec. 4.2.2 for the sequence-parallel
pair). Activations are (batch, seq, hidden): sequence parallelism splits dim 1. A group of one
rank moves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from modelplan.comm.communicator import Communicator, Group

if TYPE_CHECKING:
    from modelplan.execute.context_parallel import ContextParallel

SEQ_DIM = 1  # activations are (b, s, h): sequence shards split dim 1


@dataclass(frozen=True)
class GroupMember:
    """This rank in one process group: the group's size and this rank's index in it."""

    comm: Communicator
    group: Group

    @property
    def size(self) -> int:
        """Ranks in the group (tp, cp, ...)."""
        return self.group.size

    @property
    def rank(self) -> int:
        """This rank's index in the group (tp_rank, cp_rank, ...)."""
        return self.group.index(self.comm.rank)


@dataclass(frozen=True)
class TensorParallel(GroupMember):
    """This rank's tensor-parallel group and whether sequence parallelism is on."""

    sequence_parallel: bool = False
    cp: "ContextParallel | None" = None
    """The rank's context-parallel group (`execute/context_parallel.py`); None: cp 1."""

    def seq_offset(self, seq_local: int) -> int:
        """Position of this rank's first token of the (cp-local) sequence."""
        return 0 if self.cp is None else self.cp.offset(seq_local)

    def all_reduce(self, x: np.ndarray, label: str) -> np.ndarray:
        return x if self.size == 1 else self.comm.all_reduce(x, self.group, label=label)

    def all_gather(self, x: np.ndarray, axis: int, label: str) -> np.ndarray:
        return x if self.size == 1 else self.comm.all_gather(x, self.group, axis=axis, label=label)

    def reduce_scatter(self, x: np.ndarray, axis: int, label: str) -> np.ndarray:
        return x if self.size == 1 else self.comm.reduce_scatter(x, self.group, axis=axis, label=label)


def copy_to_tensor_model_parallel_region(tp: TensorParallel, x: np.ndarray, label: str) -> np.ndarray:
    """f forward: identity (every tp rank already holds x)."""
    return x


def copy_to_tensor_model_parallel_region_backward(tp: TensorParallel, dy: np.ndarray, label: str) -> np.ndarray:
    """f backward: AllReduce of the partial input gradients."""
    return tp.all_reduce(dy, label)


def reduce_from_tensor_model_parallel_region(tp: TensorParallel, x: np.ndarray, label: str) -> np.ndarray:
    """g forward: AllReduce of the partial outputs of a row-parallel layer."""
    return tp.all_reduce(x, label)


def reduce_from_tensor_model_parallel_region_backward(tp: TensorParallel, dy: np.ndarray, label: str) -> np.ndarray:
    """g backward: identity."""
    return dy


def gather_from_sequence_parallel_region(tp: TensorParallel, x: np.ndarray, label: str) -> np.ndarray:
    """Sequence-parallel f forward: AllGather the sequence shards (b, s/tp, h) -> (b, s, h)."""
    return tp.all_gather(x, SEQ_DIM, label)


def gather_from_sequence_parallel_region_backward(tp: TensorParallel, dy: np.ndarray, label: str) -> np.ndarray:
    """Sequence-parallel f backward: ReduceScatter (b, s, h) -> (b, s/tp, h)."""
    return tp.reduce_scatter(dy, SEQ_DIM, label)


def reduce_scatter_to_sequence_parallel_region(tp: TensorParallel, x: np.ndarray, label: str) -> np.ndarray:
    """Sequence-parallel g forward: ReduceScatter the partial outputs (b, s, h) -> (b, s/tp, h)."""
    return tp.reduce_scatter(x, SEQ_DIM, label)


def reduce_scatter_to_sequence_parallel_region_backward(tp: TensorParallel, dy: np.ndarray, label: str) -> np.ndarray:
    """Sequence-parallel g backward: AllGather (b, s/tp, h) -> (b, s, h)."""
    return tp.all_gather(dy, SEQ_DIM, label)


# Entering and leaving a tensor-parallel region: f/g, or their sequence-parallel pair.
def enter_region(tp: TensorParallel, x: np.ndarray, label: str) -> np.ndarray:
    """Before a column-parallel layer."""
    if tp.sequence_parallel:
        return gather_from_sequence_parallel_region(tp, x, label)
    return copy_to_tensor_model_parallel_region(tp, x, label)


def enter_region_backward(tp: TensorParallel, dy: np.ndarray, label: str) -> np.ndarray:
    if tp.sequence_parallel:
        return gather_from_sequence_parallel_region_backward(tp, dy, label)
    return copy_to_tensor_model_parallel_region_backward(tp, dy, label)


def exit_region(tp: TensorParallel, x: np.ndarray, label: str) -> np.ndarray:
    """After a row-parallel layer (before its bias is added)."""
    if tp.sequence_parallel:
        return reduce_scatter_to_sequence_parallel_region(tp, x, label)
    return reduce_from_tensor_model_parallel_region(tp, x, label)


def exit_region_backward(tp: TensorParallel, dy: np.ndarray, label: str) -> np.ndarray:
    if tp.sequence_parallel:
        return reduce_scatter_to_sequence_parallel_region_backward(tp, dy, label)
    return reduce_from_tensor_model_parallel_region_backward(tp, dy, label)
