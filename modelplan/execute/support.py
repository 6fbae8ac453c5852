"""What the numpy executor runs, and the one check `verify` makes before anything else: a model
feature it cannot execute is refused by name (exit 2), never dropped from the executed step.

`EXECUTED` lists the `specs.features` names the executor implements; today it runs the baseline
block only (pre-norm q/k/v attention over the full sequence, dense or softmax-routed MoE MLP
with ungated shared experts, LM head), so every listed feature is refused.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.features import architecture_features

EXECUTED: frozenset[str] = frozenset()
"""Feature names of specs.features.architecture_features that execute/ implements."""


def unexecuted_features(spec) -> list[str]:
    """The features of a transformer spec the executor would not run (empty for network specs)."""
    if getattr(spec, "kind", None) != "transformer":
        return []
    return [name for name in architecture_features(spec) if name not in EXECUTED]


def check_supported(spec) -> None:
    """Refuse a model whose features verify cannot execute, naming every one of them."""
    missing = unexecuted_features(spec)
    if missing:
        raise SpecError(
            f"verify cannot execute {', '.join(missing)} of {spec.name} yet: the numpy executor runs "
            "baseline blocks only, and a feature it does not run is refused rather than dropped"
        )
