"""`modelplan plan --moe-dispatcher`: the MoE token dispatcher (Megatron-core).

Megatron-LM `--moe-token-dispatcher-type {allgather, alltoall, flex}` with, for flex,
`--moe-flex-dispatcher-backend {deepep, hybridep}`: `alltoall` is today's default, `deepep` and
`hybridep` name the flex dispatcher by its backend (`TrainingSpec.moe_flex_dispatcher`; priced in
`modelplan.plan.expert_sort`, written by the Megatron export).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

DISPATCHERS = ("alltoall", "deepep", "hybridep")
"""alltoall: MoEAlltoAllTokenDispatcher; deepep / hybridep: MoEFlexTokenDispatcher's backends."""

MoeDispatcherOpt = Annotated[Optional[str], typer.Option(
    "--moe-dispatcher", help="MoE token dispatcher (Megatron-core): alltoall (--moe-token-dispatcher-type "
    "alltoall), or the flex dispatcher with its backend, deepep or hybridep (--moe-token-dispatcher-type flex "
    "--moe-flex-dispatcher-backend ...) [default: alltoall].", show_default=False)]


def dispatcher_settings(text: str | None, spec) -> dict:
    """The TrainingSpec field the option sets ({} for alltoall / unset); one-line SpecError
    naming --moe-dispatcher for an unknown value or a flex backend on a model without routed experts."""
    from modelplan.errors import SpecError

    if text is None:
        return {}
    word = text.strip().lower()
    if word not in DISPATCHERS:
        raise SpecError(f"--moe-dispatcher: expected one of {', '.join(DISPATCHERS)} (got '{text[:40]}')")
    if word != "alltoall" and getattr(spec, "moe", None) is None:  # alltoall: the default, as --etp tp
        raise SpecError(f"--moe-dispatcher: {spec.name} has no routed experts (the dispatcher moves tokens "
                        "to MoE experts)")
    return {} if word == "alltoall" else {"moe_flex_dispatcher": word}
