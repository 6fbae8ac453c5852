"""Which blocks and which communication units each pipeline stage holds, as data.

Like the schedule, this layout is consumed by both sides: the executor builds its model chunks
from it and the cost side (`shard.py`, `commlist.py`) counts from it. Blocks are split evenly
over the pp * vpp virtual stages when pp * vpp divides them, and otherwise split as evenly as
possible with the first and last virtual stage holding the fewer blocks (`split_layers`);
virtual stage v runs on pipeline rank v % pp as model chunk v // pp (Megatron's interleaving).

Units are the groups of parameters one data-parallel collective moves: `embedding/word`,
`embedding/extra` (position / token-type embeddings, embedding norm), `layers/<i>` (block i
without its routed experts), `layers/<i>/experts` and `head` (final norm, output projection).
"""

from __future__ import annotations

from modelplan.specs.transformer import TransformerSpec


def split_layers(layers: int, num_stages: int) -> tuple[int, ...]:
    """Blocks of each virtual stage: layers // num_stages each, and the remainder one block each
    to the middle stages first, then to the last and the first stage.

    The first stage also runs the embedding and the last the output layer and loss, so they are
    the ones left lighter, as Megatron-LM's --decoder-first/last-pipeline-num-layers and
    torchtitan's first/last stage with fewer layers do (Llama 3 405B: 126 layers on 16 stages =
    7 + 14 x 8 + 7; Dubey et al. 2024, sec. 3.3.2). Needs layers >= num_stages."""
    if layers < num_stages:
        raise ValueError(f"layers ({layers}) must be >= pipeline stages ({num_stages})")
    base, extra = divmod(layers, num_stages)
    counts = [base] * num_stages
    order = list(range(1, num_stages - 1)) + ([num_stages - 1, 0] if num_stages > 1 else [0])
    for stage in order[:extra]:
        counts[stage] += 1
    return tuple(counts)


def stage_layers(layers: int, num_stages: int, stage: int) -> range:
    """Blocks of virtual stage `stage` when `layers` blocks are split over `num_stages`
    (`split_layers`; every stage holds layers / num_stages when that divides)."""
    counts = split_layers(layers, num_stages)
    start = sum(counts[:stage])
    return range(start, start + counts[stage])


def stage_units(spec: TransformerSpec, num_stages: int) -> list[list[str]]:
    """Units of each virtual stage in forward order (units without parameters included).

    With tied embeddings and more than one stage the last stage holds its own copy of
    `embedding/word` (Megatron keeps the word embedding on the first and last stage and
    all-reduces its gradient between them)."""
    out = []
    for v in range(num_stages):
        units = ["embedding/word", "embedding/extra"] if v == 0 else []
        for i in stage_layers(spec.layers, num_stages, v):
            units += [f"layers/{i}"] + ([f"layers/{i}/experts"] if spec.is_moe_layer(i) else [])
        if v == num_stages - 1:
            units += ["head"] + (["embedding/word"] if spec.tied_embeddings and num_stages > 1 else [])
        out.append(units)
    return out
