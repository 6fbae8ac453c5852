"""What a search may try: each plan field fixed, ranged or listed (`SearchSpace`), and the small
helpers the searches of every model family share."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import Field

from modelplan.specs.base import Spec
from modelplan.specs.plan import Schedule, TpOverlap
from modelplan.specs.training import Recompute

__all__ = ["LONG_SEQUENCE", "IntChoice", "IntRange", "SearchSpace", "divisors", "paused_gc"]


class IntRange(Spec):
    """Inclusive range of integers, e.g. `--pp 1..16`."""

    lo: int = Field(ge=1)
    hi: int = Field(ge=1)


IntChoice = list[int] | IntRange

LONG_SEQUENCE = 32768
"""The search tries context parallelism by default from this sequence length on (below it a
sequence's activations fit with sequence parallelism and recompute, and CP's ring only adds
traffic; Megatron-core documents CP for long-context training); `--cp` asks for it at any length."""


class SearchSpace(Spec):
    """Which values each plan field may take; None means every value that can be valid."""

    tp: IntChoice | None = None
    pp: IntChoice | None = None
    dp: IntChoice | None = None
    vpp: IntChoice | None = None
    """Model chunks per pipeline rank; values >= 2 use the interleaved schedule."""
    micro_batch: IntChoice | None = None
    ep: IntChoice | None = None
    """Expert-parallel sizes (MoE); default: every divisor of dp that divides num_experts (with an
    etp other than tp: of tp x dp x cp / etp)."""
    etp: list[int | Literal["tp"]] | None = None
    """Expert tensor-parallel sizes (MoE, Megatron-core `--expert-tensor-parallel-size`; 'tp': the
    plan's tp), each searched on its own and merged (`plan/etp_search.py`); default: tp alone
    (the experts split like the dense layers, Megatron-core's default)."""
    cp: IntChoice | None = None
    """Context-parallel sizes; default: 1, or from seq_len >= LONG_SEQUENCE on every divisor of
    gpus/tp that divides seq_len."""
    max_tp: int | None = Field(None, ge=1)
    schedule: list[Schedule] | None = None
    """Default: 1f1b and interleaved (GPipe has 1F1B's bubble and more memory; the others are
    asked for by name)."""
    sequence_parallel: list[bool] | None = None
    recompute: list[Recompute] | None = None
    zero: list[Literal[0, 1, 2, 3]] | None = None
    allow_tp_across_nodes: bool = False
    memory_headroom: float = Field(0.0, ge=0, lt=1)
    """Fraction of accelerator memory kept free."""
    tp_overlap: list[TpOverlap] | None = None
    """TP comm overlap modes (`plan/search_ext.py`); default: the engine's (none, ring, userbuffers)."""
    dp_overlap: list[bool] | None = None
    """DP overlap on / off; default both."""
    offload_optimizer: list[Literal["none", "cpu", "nvme"]] | None = None
    """Optimizer offload; default none and what the cluster's host offers."""
    offload_activations: list[bool] | None = None
    """Activation offload; default off and, with a host, on."""
    fsdp_shard_size: list[int] | None = None
    """HSDP shard groups (zero >= 2), 0 standing for plain sharding; default plain and 1, 2 and 4
    nodes' data-parallel ranks. A list without 0 tries plain sharding only where none of its
    sizes applies."""
    zeropp: list[bool] | None = None
    """ZeRO++ on ZeRO-3; default both."""
    rank_order: list[str] | None = None
    """Rank orders (`plan/placement.py`); default the engine orders that place differently."""
    batch_splits: list[int] | None = None
    """Other global batches every plan must also split into dp x micro_batch (a ramp-up's start
    and increment, as Megatron's ramp-up calculator requires)."""
    search_split: bool = True
    """Search the first / last stage's blocks (`Evaluator.split_candidates`); False: the default
    split of `plan.stages.split_layers`."""
    first_stage_layers: int | None = Field(None, gt=0)
    """Fix the first virtual stage's blocks (`Plan.first_stage_layers`, Megatron-LM
    `--decoder-first-pipeline-num-layers`); with `last_stage_layers` the split is not searched."""
    last_stage_layers: int | None = Field(None, gt=0)
    """Fix the last virtual stage's blocks (`Plan.last_stage_layers`)."""
    reshard_after_forward: bool | Literal["default"] = "default"
    """ZeRO-3 / FSDP: every plan's `Plan.reshard_after_forward` ('default': the engine's rule)."""

    @property
    def stage_split(self) -> tuple[int | None, int | None] | None:
        """The fixed (first, last) stage blocks, or None: searched."""
        if self.first_stage_layers is None and self.last_stage_layers is None:
            return None
        return (self.first_stage_layers, self.last_stage_layers)


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _choose(choice: IntChoice | None, defaults: list[int], cap: int) -> list[int]:
    """User values (explicit list, or every integer of a range up to cap) or the defaults."""
    if choice is None:
        return defaults
    if isinstance(choice, IntRange):
        return list(range(choice.lo, min(choice.hi, cap) + 1))
    return sorted(set(choice))




@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a search runs: a search allocates hundreds of
    thousands of small tuples and cache entries, none of them garbage cycles, and the collector's
    passes over them took a fifth of the search's CPU time (1T classic search). Reference
    counting still frees everything; cycles left behind are collected once it resumes. Restores
    the collector only when it was running on entry."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
