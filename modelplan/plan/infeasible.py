"""Why a search found no plan: one line naming the nearest blocker (too little memory for the
model states at any split, the plan closest to fitting, or the rules every candidate broke)."""

from __future__ import annotations

import math
from collections import Counter

from modelplan.plan.evaluator import Evaluator
from modelplan.plan.problems import Reason


def _axes(ep: int, cp: int) -> str:
    """', ep N, cp M' for messages when those axes are on."""
    return (f", ep {ep}" if ep > 1 else "") + (f", cp {cp}" if cp > 1 else "")


def total_state_bytes(ev: Evaluator) -> float:
    """Weights + gradients + optimizer states of the whole model (what no split can avoid);
    a LoRA / QLoRA fine-tune's frozen base and adapter states (`plan/finetune.py`)."""
    if ev.finetune is not None:
        return sum(ev.held.rank_states(1, 1, 1, 0, 0))
    _, first, _, _ = ev.held.params(1, 1)
    return first * (ev.dtype_bytes + ev.grad_bytes + ev.state_bytes)


def _choice(value) -> str:
    """`2`, `2/4/8` or `1..16` for a fixed, listed or ranged plan field."""
    if isinstance(value, list):
        return "/".join(str(v) for v in value)
    return f"{value.lo}..{value.hi}"


def constraint_summary(space, gpus_per_node: int) -> str:
    """The user's fixed or ranged degrees, e.g. 'tp 2, pp 1..4' (tp stays inside a node unless allowed)."""
    parts = [f"{axis} {_choice(getattr(space, axis))}" for axis in ("tp", "pp", "dp", "cp")
             if getattr(space, axis) is not None]
    if space.max_tp is not None:
        parts.append(f"max_tp {space.max_tp}")
    if not space.allow_tp_across_nodes:
        parts.append(f"tp <= {gpus_per_node} GPUs per node")
    return ", ".join(parts)


def nearest_blocker(ev: Evaluator, n: int, rejected: Counter, examples: dict, closest, headroom: float,
                    space=None) -> str:
    """One line naming the nearest blocker of an impossible request."""
    mem_gb = ev.cluster.accelerator.memory_gb
    if rejected.get(Reason.MEMORY.value):
        states = total_state_bytes(ev)
        usable = ev.memory_bytes * (1 - headroom) - ev.cost.runtime_reserved_bytes
        need = math.ceil(states / usable) if usable > 0 else math.inf
        if need > n and ev.finetune is not None:
            return (f"needs at least {need} GPUs of {mem_gb:g} GB: the frozen base and the adapters' weights, "
                    f"gradients and optimizer states alone are {states / 1e9:.1f} GB")
        if need > n:
            return (f"needs at least {need} GPUs of {mem_gb:g} GB: weights+gradients+optimizer states alone "
                    f"are {states / 1e12:.2f} TB ({ev.dtype_bytes + ev.grad_bytes + ev.state_bytes} bytes x "
                    f"{states / (ev.dtype_bytes + ev.grad_bytes + ev.state_bytes) / 1e9:.2f} B parameters)")
        if closest is not None:
            tp, pp, dp, vpp, mb, sched, sp, rc, zero, ep, cp, _ = closest[1][:12]
            return (f"no plan of {n} GPUs fits in {mem_gb:g} GB: the smallest needs {closest[0] / 1e9:.1f} GB per GPU "
                    f"(tp {tp}, pp {pp}, dp {dp}{_axes(ep, cp)}, micro_batch {mb}, recompute {rc}, zero {zero})")
        return f"no plan of {n} GPUs fits in {mem_gb:g} GB: {examples[Reason.MEMORY.value]}"
    if not rejected:
        allowed = f" ({constraint_summary(space, ev.cluster.domain_gpus)})" if space is not None else ""
        return (f"no candidate plan of {n} GPUs matches the given constraints{allowed}: "
                f"tp x pp x dp x cp must equal {n}")
    return f"no valid plan of {n} GPUs: " + "; ".join(examples[reason] for reason, _ in rejected.most_common())
