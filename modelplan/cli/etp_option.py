"""`modelplan plan --etp`: the expert tensor-parallel sizes to search (MoE).

Megatron-core's `--expert-tensor-parallel-size` (default: tp): the routed experts split over etp
ranks and the expert-parallel group folded over the tp x dp x cp ranks of a stage
(`parallel_state.initialize_model_parallel`: world % (etp x ep x pp) == 0).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

EtpOpt = Annotated[Optional[str], typer.Option(
    "--etp", help="Expert tensor-parallel size (MoE; Megatron-core --expert-tensor-parallel-size): 1, or a comma "
    "list of sizes and 'tp' (the plan's tp) to search each, e.g. 1,tp [default: tp, Megatron-core's].",
    show_default=False)]


def parse_etp(text: str | None) -> list[int | str] | None:
    """`1` -> [1]; `1,tp` -> [1, 'tp']; one-line SpecError naming --etp otherwise."""
    from modelplan.errors import SpecError
    from modelplan.specs.limits import MAX_RANKS

    if text is None:
        return None
    out: list[int | str] = []
    for word in (w.strip().lower() for w in text.split(",")):
        if word == "tp":
            out.append("tp")
            continue
        try:
            value = int(word)
        except ValueError:
            raise SpecError(f"--etp: expected sizes >= 1 or 'tp', comma-separated (got '{text[:40]}')") from None
        if not 1 <= value <= MAX_RANKS:
            raise SpecError(f"--etp: {value} must be between 1 and {MAX_RANKS:,}")
        out.append(value)
    return out


def check_etp(values: list[int | str] | None, spec) -> None:
    """--etp on a model without routed experts: one-line SpecError (etp sizes only the experts)."""
    from modelplan.errors import SpecError

    if values and any(v != "tp" for v in values) and getattr(spec, "moe", None) is None:
        raise SpecError(f"--etp: {spec.name} has no routed experts (etp is the MoE experts' tensor-parallel size)")
