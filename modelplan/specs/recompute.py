"""Which recompute settings go together (Megatron-core TransformerConfig.__post_init__ rules,
transformer_config.py core_v0.16): `recompute_modules` only under selective, `recompute_method` /
`recompute_num_layers` only under full and only together, and both only for Megatron."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.training import TrainingSpec

MEGATRON_ONLY = ("recompute_modules", "recompute_method", "recompute_num_layers")
"""Settings that exist in Megatron-core only (DeepSpeed, torchtitan and FSDP stacks have none)."""


def check_recompute_settings(training: "TrainingSpec") -> None:
    """Raise ValueError (one line, naming the field) when the recompute settings disagree."""
    for name in MEGATRON_ONLY:
        value = getattr(training, name)
        if value is not None and training.framework != "megatron":
            raise ValueError(f"{name}: a Megatron-core setting; framework '{training.framework}' has none "
                             f"(use recompute / ac_mode)")
    modules = training.recompute_modules
    if modules is not None:
        if training.recompute != "selective":
            raise ValueError(f"recompute_modules needs recompute 'selective', not '{training.recompute}'")
        if not modules:
            raise ValueError("recompute_modules: give at least one module (or recompute 'none')")
        if training.ac_mode is not None:
            raise ValueError("recompute_modules: give it or ac_mode, not both")
    method, layers = training.recompute_method, training.recompute_num_layers
    if (method is None) != (layers is None):
        missing = "recompute_num_layers" if layers is None else "recompute_method"
        raise ValueError(f"{missing}: needed with {'recompute_method' if layers is None else 'recompute_num_layers'}")
    if method is not None and training.recompute != "full":
        raise ValueError(f"recompute_method needs recompute 'full', not '{training.recompute}'")
