"""Which blocks and which communication units each pipeline stage holds, as data.

Like the schedule, this layout is consumed by both sides: the executor builds its model chunks
from it and the cost side (`shard.py`, `commlist.py`) counts from it. Blocks are split evenly
over the pp * vpp virtual stages when pp * vpp divides them, and otherwise split as evenly as
possible with the first and last virtual stage holding the fewer blocks (`split_layers`);
virtual stage v runs on pipeline rank v % pp as model chunk v // pp (Megatron's interleaving).

Units are the groups of parameters one data-parallel collective moves: `embedding/word`,
`embedding/extra` (position / token-type embeddings, embedding norm), `layers/<i>` (block i
without its routed experts), `layers/<i>/experts`, `head` (final norm, output projection) and
`vision` (a vision tower and its projector, on the first stage before the embedding: it feeds the
image tokens into the embedded sequence, as Megatron-core's LLaVAModel runs it on its first
pipeline stage).
"""

from __future__ import annotations

from itertools import accumulate

from typing import NamedTuple

from modelplan.comm.regions import Region
from modelplan.plan.pipeline.actions import StageLayout
from modelplan.specs.transformer import TransformerSpec

Split = tuple[int | None, int | None]
"""(first, last): blocks of the first and of the last virtual stage when the plan fixes them
(Megatron-LM --decoder-first/last-pipeline-num-layers, `Plan.stage_split`); None: the rule of
`split_layers`."""


def split_layers(layers: int, num_stages: int, split: Split | None = None) -> tuple[int, ...]:
    """Blocks of each virtual stage: layers // num_stages each, and the remainder one block each
    to the middle stages first (the latest first), then to the last and the first stage.

    The first stage also runs the embedding and the last the output layer and loss, so they are
    the ones left lighter, as Megatron-LM's --decoder-first/last-pipeline-num-layers and
    torchtitan's first/last stage with fewer layers do (Llama 3 405B: 126 layers on 16 stages =
    7 + 14 x 8 + 7; Dubey et al. 2024, sec. 3.3.2). Needs layers >= num_stages. `split` fixes the
    first and / or the last stage's blocks (Megatron's flags); the other stages share the rest by
    the same rule."""
    if split is not None and split != (None, None) and num_stages > 1:
        first, last = split
        inner = layers - (first or 0) - (last or 0)
        free = num_stages - (first is not None) - (last is not None)
        if min(first if first is not None else 1, last if last is not None else 1) < 1 or inner < free or (
                free == 0 and inner):
            raise ValueError(f"first / last stage blocks ({first}, {last}) leave {inner} blocks for the "
                             f"{free} other stages of {num_stages} ({layers} layers): each stage needs >= 1")
        if free == 0:
            return (first, last)
        if first is None or last is None:  # the free first or last stage joins the rest
            rest = split_layers(inner, free)
            return (*rest, last) if first is None else (first, *rest)
        return (first, *split_layers(inner, free), last)
    if layers < num_stages:
        raise ValueError(f"layers ({layers}) must be >= pipeline stages ({num_stages})")
    base, extra = divmod(layers, num_stages)
    counts = [base] * num_stages
    # the latest middle stages first: under 1F1B pipeline rank r keeps pp - r micro-batches in
    # flight, so an extra block costs the least memory late in the pipeline (time is the same)
    order = list(range(num_stages - 2, 0, -1)) + ([num_stages - 1, 0] if num_stages > 1 else [0])
    for stage in order[:extra]:
        counts[stage] += 1
    return tuple(counts)


def stage_layers(layers: int, num_stages: int, stage: int, split: Split | None = None) -> range:
    """Blocks of virtual stage `stage` when `layers` blocks are split over `num_stages`
    (`split_layers`; every stage holds layers / num_stages when that divides)."""
    counts = split_layers(layers, num_stages, split)
    start = sum(counts[:stage])
    return range(start, start + counts[stage])


def stage_units(spec: TransformerSpec, num_stages: int, split: Split | None = None) -> list[list[str]]:
    """Units of each virtual stage in forward order (units without parameters included).

    With tied embeddings, or multi-token prediction modules (which look tokens up), and more than
    one stage the last stage holds its own copy of `embedding/word` (Megatron keeps the word
    embedding on the first and last stage and all-reduces its gradient between them)."""
    out = []
    counts = split_layers(spec.num_blocks, num_stages, split)
    moe = spec.moe is not None
    start = 0
    for v in range(num_stages):
        units = [*(["vision"] if spec.vision is not None else []), "embedding/word", "embedding/extra"] if v == 0 else []
        first, start = start, start + counts[v]
        for i in range(first, start):  # stage_layers(spec.num_blocks, num_stages, v, split)
            units.append(f"layers/{i}")
            if moe and spec.is_moe_layer(i):
                units.append(f"layers/{i}/experts")
        if v == num_stages - 1:
            units += ["head"]
            for k in range(spec.mtp_layers):  # MTP modules run on the last stage (Megatron-core)
                units += [f"mtp/{k}"] + ([f"mtp/{k}/experts"] if spec.moe is not None else [])
            shares_embedding = spec.tied_embeddings or spec.mtp_layers > 0
            units += ["embedding/word"] if shares_embedding and num_stages > 1 else []
        out.append(units)
    return out


def rank_units(spec: TransformerSpec, layout: StageLayout, split: Split | None = None) -> list[list[str]]:
    """Units each pipeline rank holds under a schedule's layout, chunk by chunk, each once (a rank
    that runs both the first and the last stage keeps one word embedding for both uses)."""
    stages = stage_units(spec, layout.num_stages, split)
    out = []
    for chunks in layout.rank_stages:
        mine: dict[str, None] = {}  # an insertion-ordered set
        for s in chunks:
            mine.update(dict.fromkeys(stages[s]))
        out.append(list(mine))
    return out


def unit_replicas(units: list[list[str]]) -> dict[str, tuple[int, ...]]:
    """Units held by more than one pipeline rank, and those ranks: the tied word embedding (first
    and last stage), every unit of a schedule that runs each stage on two ranks (DualPipe). Their
    gradients are all-reduced over those ranks after the data-parallel reduction."""
    where: dict[str, list[int]] = {}
    for r, names in enumerate(units):
        for u in names:
            where.setdefault(u, []).append(r)
    return {u: tuple(ranks) for u, ranks in where.items() if len(ranks) > 1}


def rank_blocks(spec: TransformerSpec, layout: StageLayout, shares, split: Split | None = None) -> list[RankBlocks]:
    """Per pipeline rank, the (dense, MoE) blocks it holds and those a micro-batch runs on it,
    from the layout and each chunk's share of the micro-batches (`pipeline.profile.chunk_shares`)."""
    counts = split_layers(spec.num_blocks, layout.num_stages, split)
    starts = [0, *accumulate(counts)][:-1]
    last = layout.num_stages - 1
    moe_layer = [spec.is_moe_layer(i) for i in range(spec.num_blocks)] if spec.moe is not None else None
    out = []
    for chunks, share in zip(layout.rank_stages, shares):
        held = [0, 0]
        run = [0, 0]
        emb = head = 0
        for s, w in zip(chunks, share):
            w = int(w) if w == 1 else w  # whole shares stay ints (Megatron's schedules)
            moe = sum(moe_layer[starts[s]:starts[s] + counts[s]]) if moe_layer else 0
            held[0] += counts[s] - moe
            held[1] += moe
            run[0] += w * (counts[s] - moe)
            run[1] += w * moe
            emb += w if s == 0 else 0
            head += w if s == last else 0
        out.append(RankBlocks(held[0], held[1], _num(run[0]), _num(run[1]), _num(emb), _num(head)))
    return out


def _num(x):
    """An int when the share-weighted count is whole (Megatron's schedules), else a float."""
    return int(x) if x == int(x) else float(x)


class RankBlocks(NamedTuple):
    """What one pipeline rank holds and what one micro-batch runs on it (a tuple: the search
    hashes and compares these in its hot loop)."""

    dense: int
    """Dense blocks held (all chunks)."""
    moe: int
    """MoE blocks held."""
    dense_run: int | float
    """Dense blocks a micro-batch runs on the rank (chunks weighted by their share of micro-batches)."""
    moe_run: int | float
    embedding: int | float
    """Share of micro-batches whose embedding runs here (1 on the first stage's rank)."""
    head: int | float
    """Share of micro-batches whose output head and loss run here."""


def replica_label(unit: str) -> str:
    """Ledger label of the AllReduce of a replicated unit's gradient (`unit_replicas`)."""
    return Region.PP_TIED_EMBEDDING if unit == "embedding/word" else Region.PP_REPLICA
