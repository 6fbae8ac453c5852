"""`modelplan plan --fsdp-ends-in-root`: FSDP2's root group holds the embedding, norm and head
(`TrainingSpec.fsdp_ends_in_root`, torchtitan before 83e694105).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

FsdpRootOpt = Annotated[Optional[bool], typer.Option(
    "--fsdp-ends-in-root/--no-fsdp-ends-in-root", help="ZeRO-3 (FSDP2): the word embedding, final norm and "
    "output head sit in the root group, never resharded after forward and reduce-scattered at the end of "
    "backward (torchtitan before July 2025) [default: no].", show_default=False)]

