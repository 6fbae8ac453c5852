"""`modelplan plan --tensor-rate`: the fraction of the priced tensor-core rate the run's step keeps
(`TrainingSpec.tensor_rate`), replacing the engine's figure for the part's architecture
(`EngineProfile.tensor_rate_by_arch`; `modelplan.plan.tensor_rate`).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from modelplan.cli.options import finite

TensorRateOpt = Annotated[Optional[float], typer.Option(
    "--tensor-rate", min=0.01, max=1.0, callback=finite, help="Fraction of the priced tensor-core rate (GEMMs, "
    "fused attention) your stack keeps on this part, e.g. measured; 1 prices the part as is [default: the "
    "engine's figure for the architecture, printed with the plan's assumptions].", show_default=False)]


def tensor_rate_settings(rate: float | None) -> dict:
    """The TrainingSpec field the option sets ({} when not given: the engine's figure applies)."""
    return {} if rate is None else {"tensor_rate": rate}
