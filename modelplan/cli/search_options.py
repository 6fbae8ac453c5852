"""`modelplan plan` options of the wider search: overlap, offload, HSDP / ZeRO++ and rank order.

Each fixes (or lists) one dimension of `modelplan.plan.search_ext`; left out, the search tries
every value the engine and cluster allow.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

TpOverlapModesOpt = Annotated[Optional[str], typer.Option(
    "--tp-overlap", help="TP comm overlap modes to try: none, ring (async TP / TE ring exchange), userbuffers "
    "(Megatron --tp-comm-overlap, TE defaults), comma list [default: what the engine runs].", show_default=False)]
DpOverlapOpt = Annotated[Optional[bool], typer.Option(
    "--dp-overlap/--no-dp-overlap", help="Fix DP overlap (--overlap-grad-reduce / --overlap-param-gather, FSDP "
    "prefetch) on or off [default: try both].", show_default=False)]
OffloadOptimizerOpt = Annotated[Optional[str], typer.Option(
    "--offload-optimizer", help="Optimizer offload to try: none, cpu (ZeRO-Offload), nvme (ZeRO-Infinity), comma "
    "list [default: none and what the cluster's host offers].", show_default=False)]
OffloadActivationsOpt = Annotated[Optional[bool], typer.Option(
    "--offload-activations/--no-offload-activations", help="Fix activation offload to host memory on or off "
    "[default: try both under --framework megatron where the cluster states its host; off with the other "
    "engines, which do not offload saved activations].", show_default=False)]
FsdpShardOpt = Annotated[Optional[str], typer.Option(
    "--fsdp-shard-size", help="HSDP shard group sizes to try (ZeRO >= 2), comma list; 0: plain sharding (8 tries "
    "only 8, 0,8 both) [default: plain and 1, 2 and 4 nodes' data-parallel ranks].", show_default=False)]
ZeroppOpt = Annotated[Optional[bool], typer.Option(
    "--zeropp/--no-zeropp", help="Fix ZeRO++ (qwZ, hpZ, qgZ on ZeRO-3) on or off [default: try both under --framework deepspeed, off with the other engines, which do not run it].",
    show_default=False)]
RankOrderOpt = Annotated[Optional[str], typer.Option(
    "--rank-order", help="Rank orders to try, fastest axis first, comma list (e.g. tp-cp-dp-pp,tp-cp-pp-dp) "
    "[default: the engine orders that place differently].", show_default=False)]


def parse_words(text: str | None, what: str, allowed: tuple[str, ...]) -> list[str] | None:
    """Comma list of names from `allowed`."""
    from modelplan.errors import SpecError

    if text is None:
        return None
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    bad = [w for w in words if w not in allowed]
    if bad or not words:
        raise SpecError(f"--{what}: unknown value '{', '.join(bad) or text}' (choose from {', '.join(allowed)})")
    return words


def wide_space(tp_overlap: str | None, dp_overlap: bool | None, offload_optimizer: str | None,
               offload_activations: bool | None, fsdp_shard_size: str | None, zeropp: bool | None,
               rank_order: str | None) -> dict:
    """The SearchSpace fields these options set (one-line SpecError on a bad value)."""
    from modelplan.errors import SpecError
    from modelplan.specs.limits import MAX_RANKS

    out: dict = {}
    if tp_overlap is not None:
        out["tp_overlap"] = parse_words(tp_overlap, "tp-overlap", ("none", "ring", "userbuffers"))
    if dp_overlap is not None:
        out["dp_overlap"] = [dp_overlap]
    if offload_optimizer is not None:
        out["offload_optimizer"] = parse_words(offload_optimizer, "offload-optimizer", ("none", "cpu", "nvme"))
    if offload_activations is not None:
        out["offload_activations"] = [offload_activations]
    if fsdp_shard_size is not None:
        try:
            sizes = [int(w) for w in fsdp_shard_size.split(",") if w.strip()]
        except ValueError:
            raise SpecError(f"--fsdp-shard-size: expected integers like 8,16, got '{fsdp_shard_size}'") from None
        if not sizes or min(sizes) < 0:
            raise SpecError(f"--fsdp-shard-size: expected sizes >= 0, got '{fsdp_shard_size}'")
        if max(sizes) > MAX_RANKS:
            raise SpecError(f"--fsdp-shard-size: {max(sizes)} is larger than {MAX_RANKS:,}")
        out["fsdp_shard_size"] = sorted(set(sizes))  # 0: plain sharding over every data-parallel rank
    if zeropp is not None:
        out["zeropp"] = [zeropp]
    if rank_order is not None:
        orders = [w.strip() for w in rank_order.split(",") if w.strip()]
        for order in orders:
            if sorted(order.split("-")) != ["cp", "dp", "pp", "tp"]:
                raise SpecError(f"--rank-order: '{order}' must name each of tp, cp, dp, pp once (e.g. tp-cp-dp-pp)")
        if not orders:
            raise SpecError("--rank-order: give at least one order, e.g. tp-cp-dp-pp")
        out["rank_order"] = orders
    return out
