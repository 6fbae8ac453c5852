"""Megatron-core's full recompute of some layers (`--recompute-granularity full
--recompute-method uniform|block --recompute-num-layers N`), transformer_block.py
`_checkpointed_forward` (core_v0.16), per transformer block (one pipeline chunk):
- uniform: the chunk's layers in groups of N, each group one checkpoint: only the group's input
  is kept, every layer is recomputed, and the group's N layers are live at once while it is
  recomputed for its backward.
- block: the chunk's first N layers each checkpointed on its own (input kept, recomputed), the
  others keep everything and are not recomputed.
Without a method (modelplan's `recompute = "full"`) every layer is its own checkpoint: uniform 1.
"""

from __future__ import annotations

from typing import NamedTuple


class FullRecompute(NamedTuple):
    """Layer counts of one chunk of `chunk_layers` layers under a method."""

    checkpointed: int
    """Layers that keep only their checkpoint input (uniform: one per group)."""
    kept_whole: int
    """Layers that keep every activation (block: those after the first N)."""
    recomputed: int
    """Layers whose forward re-runs in backward."""
    live_while_recomputing: int
    """Layers whose full activations are live at once during a recompute (uniform: a group)."""


def full_recompute(method: str | None, num_layers: int | None, chunk_layers: int) -> FullRecompute:
    """The counts of one chunk (module docstring); `chunk_layers` 0 gives zeros."""
    if chunk_layers <= 0:
        return FullRecompute(0, 0, 0, 0)
    n = num_layers or 1
    if method == "block":
        r = min(n, chunk_layers)
        return FullRecompute(r, chunk_layers - r, r, 1)
    groups = -(-chunk_layers // n)  # uniform: the last group may be short
    return FullRecompute(groups, 0, chunk_layers, min(n, chunk_layers))
