"""Data parallelism and ZeRO over flat per-unit buffers (one bucket per communication unit).

Each unit's local parameter shards are laid out flat, padded to a multiple of the group size
(Megatron's grad buffer pads the same way for its distributed optimizer), so every rank of the
group owns one equal slice. The group is the data-parallel group, or for routed experts the
expert-data-parallel group (data-parallel ranks with the same expert shard). Gradients are
summed over the group and divided by dp (the global mean loss). What each stage does:

- zero 0 (DDP): full gradient buffer, one AllReduce per bucket after the last micro-batch;
  full optimizer state.
- zero 1 (Megatron distributed optimizer): full gradient buffer, one ReduceScatter after the
  last micro-batch; optimizer state and update for this rank's slice only; AllGather of the
  updated parameters.
- zero 2 (DeepSpeed stage 2): the gradient is reduce-scattered after every micro-batch's
  backward and only this rank's slice is accumulated; update and AllGather as zero 1.
- zero 3 (FSDP / DeepSpeed stage 3): only this rank's slice of the parameters is kept; the unit
  is AllGathered before each forward and each backward that uses it, gradients are
  reduce-scattered after every backward.

Before the data-parallel reduction, gradients that are partial sums over tp (sequence-parallel
norms and biases, the MoE router) are all-reduced over tp; after it, a unit whose copies sit on
several pipeline ranks (the word embedding of a tied output head on the first and last stage,
every unit of DualPipe's two copies of each stage) is all-reduced over those ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from modelplan.comm.regions import Region
from modelplan.comm.communicator import Communicator, Group
from modelplan.comm.ops import Collective
from modelplan.execute.optim import OptimizerConfig, optimizer_step


@dataclass(frozen=True)
class Entry:
    """One parameter shard inside a bucket."""

    name: str
    shape: tuple[int, ...]
    """Local (per-rank) shape."""
    offset: int
    """First element inside the flat bucket."""
    index: tuple[tuple[int, int], ...]
    """(start, stop) per dimension: where the local shard sits in the global tensor."""
    partial_over_tp: bool
    """Its gradient is a partial sum over tp and is all-reduced over tp before the dp reduction."""

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Bucket:
    """One unit's parameters, gradients and optimizer state on this rank."""

    unit: str
    entries: tuple[Entry, ...]
    group: Group
    group_index: int
    """This rank's index in `group`."""
    zero: int
    replicas: Group | None = None
    """The pipeline ranks holding a copy of this unit (`plan.stages.unit_replicas`), or None."""
    replica_label: str = ""
    params: dict[str, np.ndarray] | None = None
    """Full local shards (zero < 3)."""
    param_shard: np.ndarray | None = None
    """This rank's slice of the flat parameters (zero 3)."""
    grad: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Padded flat gradient (zero 0, 1) or this rank's slice of it (zero 2, 3)."""
    optim: list[np.ndarray] = field(default_factory=list)
    """Optimizer state over the padded flat buffer (zero 0) or this rank's slice (zero >= 1)."""

    @property
    def numel(self) -> int:
        return sum(e.numel for e in self.entries)

    @property
    def padded(self) -> int:
        """numel rounded up to a multiple of the group size."""
        return -(-self.numel // self.group.size) * self.group.size

    @property
    def shard(self) -> tuple[int, int]:
        """[lo, hi) of the flat buffer this rank owns."""
        size = self.padded // self.group.size
        return self.group_index * size, (self.group_index + 1) * size

    def flatten(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """Padded flat copy of the named arrays (missing gradients count as zeros)."""
        flat = np.zeros(self.padded)
        for e in self.entries:
            if e.name in arrays:
                flat[e.offset : e.offset + e.numel] = arrays[e.name].reshape(-1)
        return flat

    def unflatten(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Named arrays (copies) from a flat buffer."""
        return {e.name: flat[e.offset : e.offset + e.numel].reshape(e.shape).copy() for e in self.entries}

    def partial_index(self) -> np.ndarray:
        """Flat positions of the gradients that are partial sums over tp."""
        parts = [np.arange(e.offset, e.offset + e.numel) for e in self.entries if e.partial_over_tp]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _grad_size(bucket: Bucket) -> int:
    """Elements of the gradient buffer this rank keeps."""
    return bucket.padded if bucket.zero <= 1 else bucket.padded // bucket.group.size


@dataclass(frozen=True)
class DataParallel:
    """The collectives and update of data parallelism / ZeRO for one rank."""

    comm: Communicator
    dp: int
    """Data-parallel size: the divisor of the summed gradients."""
    tp_group: Group
    optimizer: OptimizerConfig

    def _collective(self, op: Collective, group: Group, x: np.ndarray, label: str) -> np.ndarray:
        """AllReduce / AllGather / ReduceScatter of a flat buffer over `group` (nothing for one rank)."""
        if group.size == 1:
            return x
        if op is Collective.ALL_REDUCE:
            return self.comm.all_reduce(x, group, label=label)
        if op is Collective.ALL_GATHER:
            return self.comm.all_gather(x, group, label=label)
        return self.comm.reduce_scatter(x, group, label=label)

    def place(self, bucket: Bucket, values: dict[str, np.ndarray] | None) -> None:
        """Start-up: Broadcast the unit from the group's first rank, keep what this rank holds."""
        flat = bucket.flatten(values) if values is not None else np.zeros(bucket.padded)
        if bucket.group.size > 1:
            root = bucket.group.ranks[0]
            flat[: bucket.numel] = self.comm.broadcast(flat[: bucket.numel], bucket.group, root, label=Region.DP_BROADCAST)
        if bucket.zero == 3:
            lo, hi = bucket.shard
            bucket.param_shard = flat[lo:hi].copy()
        else:
            bucket.params = bucket.unflatten(flat)
        bucket.grad = np.zeros(_grad_size(bucket))
        n = bucket.padded if bucket.zero == 0 else bucket.padded // bucket.group.size
        bucket.optim = self.optimizer.init_state(n)

    def materialize(self, bucket: Bucket) -> dict[str, np.ndarray]:
        """The unit's full local parameters (zero 3: AllGather of the slices)."""
        if bucket.zero < 3:
            return bucket.params
        return bucket.unflatten(self._collective(Collective.ALL_GATHER, bucket.group, bucket.param_shard, Region.DP_PARAMS))

    def _reduce_partial_over_tp(self, bucket: Bucket, flat: np.ndarray) -> None:
        idx = bucket.partial_index()
        if self.tp_group.size > 1 and idx.size:
            flat[idx] = self.comm.all_reduce(flat[idx], self.tp_group, label=Region.TP_PARTIAL_GRADS)

    @staticmethod
    def zero_grad(bucket: Bucket) -> None:
        """Clear the gradient buffer before a step's first backward (optimizer.zero_grad)."""
        bucket.grad = np.zeros_like(bucket.grad)

    def add_grads(self, bucket: Bucket, grads: dict[str, np.ndarray]) -> None:
        """After a micro-batch's backward of the unit: accumulate (zero 0, 1) or reduce-scatter (2, 3)."""
        if bucket.zero <= 1:
            bucket.grad += bucket.flatten(grads)
            return
        flat = bucket.flatten(grads)
        self._reduce_partial_over_tp(bucket, flat)
        bucket.grad += self._collective(Collective.REDUCE_SCATTER, bucket.group, flat, Region.DP_GRADS)

    def finish_grads(self, bucket: Bucket) -> None:
        """After the last micro-batch: complete the reduction and divide by dp."""
        lo, hi = bucket.shard
        if bucket.zero == 0:
            self._reduce_partial_over_tp(bucket, bucket.grad)
            bucket.grad = self._collective(Collective.ALL_REDUCE, bucket.group, bucket.grad, Region.DP_GRADS) / self.dp
        elif bucket.zero == 1:  # full buffer kept; only [lo, hi) holds the reduced gradient
            self._reduce_partial_over_tp(bucket, bucket.grad)
            bucket.grad[lo:hi] = self._collective(Collective.REDUCE_SCATTER, bucket.group, bucket.grad, Region.DP_GRADS) / self.dp
        else:
            bucket.grad /= self.dp
        if bucket.replicas is not None:
            view = bucket.grad if bucket.zero == 0 else (bucket.grad[lo:hi] if bucket.zero == 1 else bucket.grad)
            view[:] = self.comm.all_reduce(view, bucket.replicas, label=bucket.replica_label)

    def step(self, bucket: Bucket, step: int = 1) -> None:
        """Optimizer update of what this rank owns; zero 1/2 then AllGather the parameters."""
        lo, hi = bucket.shard
        cfg = self.optimizer
        if bucket.zero == 0:
            flat = optimizer_step(cfg, bucket.flatten(bucket.params), bucket.grad, bucket.optim, step)
            bucket.params = bucket.unflatten(flat)
        elif bucket.zero == 3:
            bucket.param_shard = optimizer_step(cfg, bucket.param_shard, bucket.grad, bucket.optim, step)
        else:
            grad = bucket.grad[lo:hi] if bucket.zero == 1 else bucket.grad
            mine = optimizer_step(cfg, bucket.flatten(bucket.params)[lo:hi], grad, bucket.optim, step)
            bucket.params = bucket.unflatten(self._collective(Collective.ALL_GATHER, bucket.group, mine, Region.DP_PARAMS))

    @staticmethod
    def held(bucket: Bucket) -> tuple[int, int, int]:
        """(weight, gradient, optimizer-state) elements this rank keeps for the unit."""
        weights = bucket.param_shard.size if bucket.zero == 3 else sum(a.size for a in bucket.params.values())
        return weights, bucket.grad.size, sum(s.size for s in bucket.optim)

    @staticmethod
    def valid_grad(bucket: Bucket) -> tuple[int, np.ndarray]:
        """(first flat element, values) of the fully reduced gradient this rank holds."""
        if bucket.zero == 0:
            return 0, bucket.grad
        lo, hi = bucket.shard
        return lo, (bucket.grad[lo:hi] if bucket.zero == 1 else bucket.grad)

    @staticmethod
    def valid_params(bucket: Bucket) -> tuple[int, np.ndarray]:
        """(first flat element, values) of the updated parameters this rank holds."""
        if bucket.zero == 3:
            return bucket.shard[0], bucket.param_shard
        return 0, bucket.flatten(bucket.params)
