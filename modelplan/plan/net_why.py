"""Why the planner prefers its best network plan: numbers against the best tensor-parallel and
the best pipeline-parallel plan it priced (lines for the best plan's notes)."""

from __future__ import annotations

from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.parallel.tp import leaf_calls
from modelplan.plan.results import PlanEstimate


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _mb(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes:.0f} B"


def _vs(other: PlanEstimate, best: PlanEstimate) -> str:
    p = other.plan
    slower = 100 * (other.step.step_time_s / best.step.step_time_s - 1)
    return (f"tp {p.tp} x pp {p.pp} x dp {p.dp} (micro-batch {p.micro_batch}) takes "
            f"{other.step.step_time_s:.4f} s per step, {slower:+.0f}%")


def explain_choice(ev, best: PlanEstimate, best_of: dict[str, PlanEstimate]) -> list[str]:
    """One line per argument: memory, data-parallel overlap, tensor and pipeline parallelism."""
    lines = []
    per_param = ev.dtype_bytes + ev.grad_bytes + ev.state_bytes
    states = ev.params * per_param
    gpu = ev.memory_bytes
    fits = "fit on one GPU: nothing has to be split for memory" if states < gpu else "do not fit on one GPU"
    lines.append(f"why: model states {ev.params:,} params x {per_param} B ({ev.dtype_bytes} weight + "
                 f"{ev.grad_bytes} gradient + {ev.state_bytes} optimizer/master) = {_mb(states)}, "
                 f"{100 * states / gpu:.2f}% of {gpu / 1e9:g} GB: they {fits}")
    plan = best.plan
    if plan.dp > 1:
        rank = ev.rank_cost(plan, 0, best.num_microbatches)
        local = sum(s.numel for s in ev.rank_shards(plan, 0).values())
        grads = local * ev.grad_bytes
        where = "" if plan.pp == 1 and plan.tp == 1 else " on the first pipeline rank"
        exposed = best.step.dp_comm_s
        how = "AllReduce" if plan.zero == 0 else f"ZeRO-{plan.zero} ReduceScatter + AllGather"
        lines.append(f"why: data parallel over {plan.dp}: the gradients of {local:,} parameters{where} ({_mb(grads)}) are "
                     f"reduced by {how} in {_ms(best.step.dp_comm_total_s)} per step, overlapped with the "
                     f"backward ({_ms(rank.bwd_mb_s)} per micro-batch): {_ms(exposed)} exposed = "
                     f"{100 * exposed / best.step.step_time_s:.1f}% of the step")
    tp_plan = best_of.get("tp")
    if tp_plan is not None and tp_plan.plan != plan:
        stages = ev.stages(tp_plan.plan.tp, tp_plan.plan.pp * tp_plan.plan.vpp)
        first = RankCalls()
        leaf_calls(first, stages[0], tp_plan.plan.tp, tp_plan.plan.micro_batch, 1, 1)
        calls = sum(first.counts.values())
        lines.append(f"why not tensor parallel: the best such plan, {_vs(tp_plan, best)}: {calls} collectives per "
                     f"micro-batch on activations ({_ms(tp_plan.step.tp_comm_s)} exposed per step) and GEMMs "
                     f"1/{tp_plan.plan.tp} as wide, while the layers it cannot split run whole on every rank "
                     f"(compute {tp_plan.step.compute_s:.4f} s vs {best.step.compute_s:.4f} s)")
    elif tp_plan is None:
        lines.append("why not tensor parallel: no plan with tp > 1 fits or divides a layer")
    pp_plan = best_of.get("pp")
    if pp_plan is not None and pp_plan.plan != plan:
        lines.append(f"why not pipeline parallel: the best such plan, {_vs(pp_plan, best)}: a bubble of "
                     f"{100 * pp_plan.bubble_fraction:.0f}% ({pp_plan.step.bubble_s:.4f} s) and "
                     f"{_ms(pp_plan.step.pp_comm_s)} of stage-boundary send/recv, to save memory that is not short")
    dp_plan = best_of.get("dp")
    if dp_plan is not None and dp_plan.plan != plan:
        lines.append(f"pure data parallel would be: {_vs(dp_plan, best)}")
    return lines
