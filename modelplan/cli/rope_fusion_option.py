"""`modelplan plan --no-rope-fusion`: Megatron-core's unfused rotary path (`TrainingSpec.rope_fusion`;
NeMo 2's DeepSeekConfig default, megatron-core 0.12's only MLA path).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

RopeFusionOpt = Annotated[Optional[bool], typer.Option(
    "--rope-fusion/--no-rope-fusion", help="Megatron: the rotary embedding in a fused kernel (Megatron-LM's "
    "default; --no-rope-fusion: the unfused PyTorch path, with MLA's q / k cats) [default: yes].",
    show_default=False)]
