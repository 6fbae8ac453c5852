"""`modelplan plan --pp-flush-microbatches`: micro-batches per call of the pipeline schedule
(`TrainingSpec.pp_flush_microbatches`) when the engine accumulates gradients outside it.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

PpFlushOpt = Annotated[Optional[int], typer.Option(
    "--pp-flush-microbatches", min=1, help="Micro-batches per pipeline-schedule call (a flush) when gradients "
    "accumulate outside the schedule (NeMo AutoModel, torchtitan: local_batch_size / pp_microbatch_size); the "
    "bubble is paid per flush [default: all of the step's micro-batches in one flush].", show_default=False)]


def pp_flush_settings(per_flush: int | None) -> dict:
    """The TrainingSpec field the option sets ({} when not given: one flush per step)."""
    return {} if per_flush is None else {"pp_flush_microbatches": per_flush}
