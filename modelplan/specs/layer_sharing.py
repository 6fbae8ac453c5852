"""Cross-layer parameter sharing (ALBERT, Lan et al. 2020, arXiv 1909.11942, sec. 3.1): the
encoder's `layers` blocks run `extras.weight_groups` distinct weight sets, block i the set
i * weight_groups // layers (transformers 5.24 AlbertTransformer: group_idx = int(i / (layers /
num_hidden_groups))). A set's parameters are counted once, at its first block; its FLOPs and
activations at every block that runs it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def weight_group(spec: "TransformerSpec", index: int) -> int:
    """The weight set block `index` runs (its own index when the stack shares nothing)."""
    groups = spec.extras.weight_groups if spec.extras is not None else None
    return index if groups is None else index * groups // spec.layers


def reuses_weights(spec: "TransformerSpec", index: int) -> bool:
    """Block `index` runs a weight set an earlier block holds (its parameters are not its own)."""
    return index > 0 and weight_group(spec, index) == weight_group(spec, index - 1)
