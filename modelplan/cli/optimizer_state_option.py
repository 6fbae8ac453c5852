"""`modelplan plan --optimizer-state-dtype`: the dtype of the optimizer's state tensors
(`TrainingSpec.optimizer_state_dtype`): fp32, or the compute dtype when the optimizer steps 16-bit
parameters without a master copy (`torch.optim.AdamW` over bf16 parameters).
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

OptimizerStateDtypeOpt = Annotated[Optional[Literal["fp32", "same"]], typer.Option(
    "--optimizer-state-dtype", help="Optimizer states (Adam m, v): fp32, or same (the compute dtype: "
    "torch.optim.AdamW over bf16 parameters without master weights) [default: fp32].", show_default=False)]


def optimizer_state_settings(dtype: str | None) -> dict:
    """The TrainingSpec field the option sets ({} when not given: fp32 states)."""
    return {} if dtype is None else {"optimizer_state_dtype": dtype}
