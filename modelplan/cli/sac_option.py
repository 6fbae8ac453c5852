"""`modelplan plan --sac-saves-attention/--no-sac-saves-attention`: whether per-op selective AC
keeps attention's output (`TrainingSpec.sac_saves_attention`).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

SacAttentionOpt = Annotated[Optional[bool], typer.Option(
    "--sac-saves-attention/--no-sac-saves-attention", help="Per-op selective AC (--ac-mode op_sac) keeps "
    "attention's output; --no-...: the run's SDPA kernel is not in the engine's save list, so attention is "
    "recomputed (torchtitan May-Nov 2025 on B200: cuDNN attention) [default: yes].", show_default=False)]

