"""What a leaf keeps between its forward and backward, and the per-call context of a forward."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Saved:
    """A leaf's cache: float activations, fixed-width arrays (bool masks, int64 indices), and
    small per-channel statistics or shapes that the activation-memory model leaves out."""

    floats: tuple[np.ndarray, ...] = ()
    fixed: tuple[np.ndarray, ...] = ()
    extra: Any = field(default=None, repr=False)

    @property
    def float_elements(self) -> int:
        """Float elements kept (counted in the compute dtype by the memory model)."""
        return sum(a.size for a in self.floats)

    @property
    def fixed_bytes(self) -> int:
        """Bytes of masks and indices (1 per bool, 8 per int64)."""
        return sum(a.nbytes for a in self.fixed)


@dataclass(frozen=True)
class RunContext:
    """Where a forward call sits in the global batch: dropout masks are drawn for the whole
    global batch from (seed, layer path) and sliced, so any split of the batch, the pipeline or
    the features draws the same mask for the same element."""

    seed: int = 0
    sample_offset: int = 0
    """Global index of the first sample of this call's batch."""
    global_batch: int = 1
    """Samples in the whole step (the masks' leading size)."""


def dropout_keep(ctx: RunContext, path: str, sample_shape: tuple[int, ...], batch: int,
                 p: float, feature: tuple[int, slice] | None = None) -> np.ndarray:
    """Bool keep-mask (N, *sample_shape) of this call: rows [offset, offset + batch) of the global
    mask; `feature` = (axis, slice) cuts a tensor-parallel shard out of it."""
    rng = np.random.default_rng([ctx.seed, zlib.crc32(path.encode())])
    full = rng.random((ctx.global_batch, *sample_shape)) >= p  # (B, *sample)
    keep = full[ctx.sample_offset : ctx.sample_offset + batch]
    if feature is not None:
        axis, cut = feature
        index = [slice(None)] * keep.ndim
        index[axis] = cut
        keep = keep[tuple(index)]
    return keep.copy()  # its own buffer: a view would pin the whole global batch's mask
