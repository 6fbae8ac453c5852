"""Which blocks and which communication units each pipeline stage holds, as data.

Like the schedule, this layout is consumed by both sides: the executor builds its model chunks
from it and the cost side (`shard.py`, `commlist.py`) counts from it. Blocks are split evenly
over the pp * vpp virtual stages; virtual stage v runs on pipeline rank v % pp as model chunk
v // pp (Megatron's interleaving).

Units are the groups of parameters one data-parallel collective moves: `embedding/word`,
`embedding/extra` (position / token-type embeddings, embedding norm), `layers/<i>` (block i
without its routed experts), `layers/<i>/experts` and `head` (final norm, output projection).
"""

from __future__ import annotations

from modelplan.specs.transformer import TransformerSpec


def stage_layers(layers: int, num_stages: int, stage: int) -> range:
    """Blocks of virtual stage `stage` when `layers` blocks are split evenly over `num_stages`."""
    per_stage = layers // num_stages
    return range(stage * per_stage, (stage + 1) * per_stage)


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
