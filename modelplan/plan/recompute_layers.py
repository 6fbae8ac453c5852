"""Megatron-core's full recompute of some layers in the planner (`--recompute-method uniform|block
--recompute-num-layers N`, `modelplan.count.recompute_layers`): uniform changes what one block
keeps and holds transiently (`uniform_group_bytes`, applied where the block's bytes are made);
block mixes recomputed and plain blocks on each stage (`block_method_terms`, applied where a
stage's terms are made). A stage's chunk is read as ceil(layers / (pp vpp)) layers."""

from __future__ import annotations

from dataclasses import replace

from modelplan.count.recompute_layers import full_recompute
from modelplan.plan.block_mix import mean_terms


def uniform_group_bytes(stored: int, working: int, method: str | None, num_layers: int | None) -> tuple[int, int]:
    """(kept bytes per block, transient bytes) of full recompute under Megatron-core's uniform
    method with groups of `num_layers` (`count.recompute_layers`): one checkpoint input per group,
    so 1/N of a block's kept input per block (exact when N divides the chunk's layers, a short last
    group keeps one more), and the group's N blocks live while it is recomputed."""
    if method != "uniform" or not num_layers or num_layers == 1:
        return stored, working
    return -(-stored // num_layers), num_layers * working


def block_method_terms(full, none, method: str | None, num_layers: int | None, chunk_layers: int):
    """One block's terms on a stage whose chunks hold `chunk_layers` layers under Megatron-core's
    block method (`count.recompute_layers`): the first N layers of each chunk recomputed (`full`
    terms), the others not (`none`), at their shares; the transient set is a fully recomputed
    block's. Other methods: `full` unchanged."""
    if method != "block" or full is None:
        return full
    counts = full_recompute(method, num_layers, chunk_layers)
    if counts.kept_whole == 0:
        return full
    mixed = mean_terms([full, none], [counts.recomputed, counts.kept_whole])
    return replace(mixed, working_bytes=max(full.working_bytes, none.working_bytes))
