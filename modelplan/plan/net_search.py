"""Plan a network (MLP, CNN, RNN): price data / tensor / pipeline splits and rank them.

Per plan (tp x pp x dp, vpp, micro-batch, ZeRO, schedule), on each pipeline rank:
- pipeline: m * t_max + bubble * t_mean (`parallel/pp.py`, the bubble of the schedule's action
  list; (pp - 1)/vpp for Megatron's schedules, Narayanan et al. 2021), t = one micro-batch's
  forward + backward of the rank's stages (`net_cost.stage_time`) plus its exposed
  stage-boundary send/recv (the communication list's pp items);
- data parallel: the rank's calls of the communication list, one bucket per unit
  (`parallel/dp_zero.py`), hidden behind the last micro-batch's backward by the transformer
  planner's overlap rules (`dp_zero.dp_exposure`), plus the optimizer step streamed through HBM;
- memory: model states by ZeRO stage (`dp_zero.state_bytes`), the activations the rank's
  in-flight micro-batches keep (`net_shard.rank_activations`, the model verify checks against
  the executor), NCCL and boundary buffers, fragmentation and the runtime reserve.
The step is the slowest rank's. Full recompute and sequence/context/expert parallelism are not
offered for networks.
Each search also says, in the best plan's notes, why it won against the
best plan with tensor parallelism and the best with pipeline parallelism.

The search is the one every family's uses (`ranking.Ranking`: rejections by `Reason`, top-k,
result) over the network's space (`network_space`), with the grid, batch and schedule rules
of `validate.py`; only the rules about units and splits are the network's own.
"""

from __future__ import annotations

from typing import Iterator

from modelplan.errors import PlanInfeasible, SpecError
from modelplan.plan.net_evaluator import MAX_DEFAULT_MICROBATCHES, NetEvaluator
from modelplan.plan.pipeline import schedule_layout, schedule_problem
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.ranking import Ranking
from modelplan.plan.results import PlanEstimate, SearchResult
from modelplan.plan.space import SearchSpace, _choose, divisors
from modelplan.plan.validate import batch_problem, grid_problems, microbatch_problems, tp_node_problem
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec


def network_space(ev: NetEvaluator, space: SearchSpace, gpus: int) -> Iterator[Plan | Problem]:
    """Every plan of `gpus` GPUs the space holds, in the order tp -> pp -> dp -> micro_batch ->
    (schedule, vpp) -> zero; a point that breaks a rule comes as its Problem instead."""
    n, gb, gpn, units = gpus, ev.training.global_batch, ev.cluster.gpus_per_node, len(ev.units)
    zeros = space.zero if space.zero is not None else [0, 1, 2, 3]
    schedules = space.schedule or ["1f1b", "interleaved"]
    tps = [t for t in _choose(space.tp, [t for t in divisors(n) if t <= gpn], n)
           if space.max_tp is None or t <= space.max_tp]
    for tp in tps:
        node = None if tp == 1 or space.allow_tp_across_nodes else tp_node_problem(tp, gpn)
        if node:
            yield node
            continue
        if tp > 1 and ev.splits(tp) == 0:
            yield Problem(Reason.TP_SPLITS_NOTHING, f"tp ({tp}) divides no Linear/Conv output of "
                          f"{ev.spec.name}: it would only replicate")
            continue
        for pp in _choose(space.pp, divisors(n // tp) if n % tp == 0 else [], n):
            if pp > units:
                yield Problem(Reason.PP_UNITS, f"pp ({pp}) must not exceed the network's units ({units})")
                continue
            for dp in _choose(space.dp, [n // (tp * pp)] if n % (tp * pp) == 0 else [], n):
                grid = grid_problems(Plan(dp=dp, tp=tp, pp=pp), world_size=n)
                if grid:
                    yield grid[0]
                    continue
                if gb % dp:
                    yield Problem(Reason.BATCH, f"global_batch ({gb}) must be divisible by dp ({dp})")
                    continue
                default_mbs = [b for b in divisors(gb // dp) if gb // (dp * b) <= MAX_DEFAULT_MICROBATCHES]
                for mb in _choose(space.micro_batch, default_mbs, gb):
                    problem = batch_problem(gb, mb, dp)
                    if problem:
                        yield problem
                        continue
                    m = gb // (mb * dp)
                    svs = [(s, 1) for s in schedules if s != "interleaved" and schedule_problem(s, pp, m, 1) is None
                           and schedule_layout(s, pp, 1).num_stages <= units]
                    if "interleaved" in schedules and pp > 1 and m % pp == 0:
                        vpps = _choose(space.vpp, [v for v in (2, 3, 4) if pp * v <= units], units)
                        svs += [("interleaved", v) for v in vpps if v >= 2 and pp * v <= units]
                    for sched, vpp in svs:
                        for zero in zeros:
                            yield Plan(dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch=mb, schedule=sched, zero=zero)


def search_network_plans(spec: NetworkSpec, training: TrainingSpec, cluster: Cluster, gpus: int,
                         space: SearchSpace | None = None, cost: CostModel | None = None,
                         top_k: int = 5) -> SearchResult:
    """Every valid network plan of `gpus` GPUs ranked by predicted step time, with the reasons
    the best one beats tensor and pipeline parallelism in its notes."""
    rank = Ranking(top_k)
    space = space or SearchSpace()
    ev = NetEvaluator(spec, training, cluster, cost)
    budget = ev.memory_bytes * (1 - space.memory_headroom)
    best_of: dict[str, PlanEstimate] = {}
    for plan in network_space(ev, space, gpus):
        if isinstance(plan, Problem):
            rank.reject(plan)
            continue
        est = ev.estimate(plan, space.memory_headroom)
        if not est.fits:
            rank.reject(Problem(Reason.MEMORY, f"tp {plan.tp}, pp {plan.pp}, dp {plan.dp}, micro_batch "
                                f"{plan.micro_batch}, zero {plan.zero} needs {est.peak_memory_bytes / 1e9:.1f} GB "
                                f"per GPU > {budget / 1e9:.1f} GB"), need_bytes=est.peak_memory_bytes)
            continue
        rank.evaluated += 1
        for axis, member in (("tp", plan.tp > 1), ("pp", plan.pp > 1), ("dp", plan.tp == plan.pp == 1)):
            if member and (axis not in best_of or est.step.step_time_s < best_of[axis].step.step_time_s):
                best_of[axis] = est
        rank.offer((-est.step.step_time_s, -rank.evaluated, est))
    if not rank.heap:
        detail = next(iter(rank.examples.values()), "no plan to try")
        raise PlanInfeasible(f"no plan of {gpus} GPUs fits {spec.name}: {detail}")
    best = rank.ranked()
    best[0] = best[0].model_copy(update={"notes": best[0].notes + why_notes(ev, best[0], best_of)})
    return rank.result(gpus, best)


def why_notes(ev: NetEvaluator, best: PlanEstimate, best_of: dict[str, PlanEstimate]) -> list[str]:
    """Why the best plan beats the best plan with tensor and with pipeline parallelism."""
    from modelplan.plan.net_why import explain_choice

    return explain_choice(ev, best, best_of)


def network_plan_problems(spec: NetworkSpec, training: TrainingSpec, plan: Plan, units: int,
                          cluster: Cluster | None = None, world_size: int | None = None,
                          allow_tp_across_nodes: bool = False) -> list[Problem]:
    """Every rule a network plan breaks: the grid's, batch's and schedule's rules every family
    shares (`validate.py`) and the network's own (transformer-only axes, stages vs its `units`)."""
    out = grid_problems(plan, cluster, world_size)
    if cluster is not None and not allow_tp_across_nodes:
        out += [p for p in [tp_node_problem(plan.tp, cluster.gpus_per_node)] if p]
    for name in ("cp", "ep"):
        if getattr(plan, name) > 1:
            out.append(Problem(Reason.NOT_FOR_FAMILY, f"{name} ({getattr(plan, name)}) > 1 applies to "
                               f"transformers, not network '{spec.name}'"))
    if plan.sequence_parallel:
        out.append(Problem(Reason.NOT_FOR_FAMILY, f"sequence_parallel applies to transformers, not network "
                           f"'{spec.name}'"))
    stages = schedule_layout(plan.schedule, plan.pp, plan.vpp).num_stages
    if stages > units:
        what = f"pp * vpp ({plan.pp} * {plan.vpp})" if stages == plan.pp * plan.vpp else f"the schedule's {stages} stages"
        out.append(Problem(Reason.PP_UNITS, f"{what} must not exceed the network's units ({units})"))
    return out + microbatch_problems(plan, training.global_batch)


def estimate_network_plan(spec: NetworkSpec, training: TrainingSpec, plan: Plan, cluster: Cluster,
                          cost: CostModel | None = None, *, world_size: int | None = None,
                          memory_headroom: float = 0.0, allow_tp_across_nodes: bool = False) -> PlanEstimate:
    """Validate a network plan (one SpecError naming every broken rule) and predict it."""
    ev = NetEvaluator(spec, training, cluster, cost)
    problems = network_plan_problems(spec, training, plan, len(ev.units), cluster, world_size, allow_tp_across_nodes)
    if problems:
        raise SpecError("; ".join(p.message for p in problems))
    return ev.estimate(plan, memory_headroom)
