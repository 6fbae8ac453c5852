"""`modelplan plan --fake-balanced-gate`: the router replaced by NeMo AutoModel's benchmark
FakeBalancedGate (`TrainingSpec.fake_balanced_gate`; what DeepEP then sends, `plan/deepep.py`).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

FakeGateOpt = Annotated[Optional[bool], typer.Option(
    "--fake-balanced-gate/--no-fake-balanced-gate", help="The router replaced by NeMo AutoModel's FakeBalancedGate "
    "(token t to the k consecutive experts t*k..t*k+k-1 mod E): DeepEP's exchange sends one copy per destination "
    "[default: a learned router, read as uniform].", show_default=False)]

