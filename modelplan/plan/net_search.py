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
"""

from __future__ import annotations

import heapq
import time
from collections import Counter

from modelplan.errors import PlanInfeasible, SpecError
from modelplan.plan.net_evaluator import MAX_DEFAULT_MICROBATCHES, NetEvaluator
from modelplan.plan.pipeline import schedule_layout, schedule_problem
from modelplan.plan.problems import Reason
from modelplan.plan.results import PlanEstimate, SearchResult
from modelplan.plan.space import SearchSpace, _choose, divisors
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec


def search_network_plans(spec: NetworkSpec, training: TrainingSpec, cluster: Cluster, gpus: int,
                         space: SearchSpace | None = None, cost: CostModel | None = None,
                         top_k: int = 5) -> SearchResult:
    """Every valid network plan of `gpus` GPUs ranked by predicted step time, with the reasons
    the best one beats tensor and pipeline parallelism in its notes."""
    start = time.perf_counter()
    space = space or SearchSpace()
    ev = NetEvaluator(spec, training, cluster, cost)
    n, gb, gpn = gpus, training.global_batch, cluster.gpus_per_node
    units = len(ev.units)
    budget = ev.memory_bytes * (1 - space.memory_headroom)
    rejected: Counter[str] = Counter()
    examples: dict[str, str] = {}
    heap: list[tuple[float, int, PlanEstimate]] = []
    best_of: dict[str, PlanEstimate] = {}
    evaluated = 0

    def reject(reason: Reason, message: str) -> None:
        reason = reason.value
        rejected[reason] += 1
        examples.setdefault(reason, message)

    zeros = space.zero if space.zero is not None else [0, 1, 2, 3]
    schedules = space.schedule or ["1f1b", "interleaved"]
    tps = [t for t in _choose(space.tp, [t for t in divisors(n) if t <= gpn], n)
           if space.max_tp is None or t <= space.max_tp]
    for tp in tps:
        if tp > 1 and (gpn % tp and not space.allow_tp_across_nodes):
            reject(Reason.TP_NODE, f"tp ({tp}) must divide gpus_per_node ({gpn})")
            continue
        if tp > 1 and ev.splits(tp) == 0:
            reject(Reason.TP_SPLITS_NOTHING, f"tp ({tp}) divides no Linear/Conv output of {spec.name}: it would only replicate")
            continue
        for pp in _choose(space.pp, divisors(n // tp) if n % tp == 0 else [], n):
            if pp > units:
                reject(Reason.PP_UNITS, f"pp ({pp}) must not exceed the network's units ({units})")
                continue
            for dp in _choose(space.dp, [n // (tp * pp)] if n % (tp * pp) == 0 else [], n):
                if dp * tp * pp != n:
                    reject(Reason.WORLD_SIZE, f"dp * tp * pp ({dp} * {tp} * {pp}) must equal the GPU count ({n})")
                    continue
                if gb % dp:
                    reject(Reason.BATCH, f"global_batch ({gb}) must be divisible by dp ({dp})")
                    continue
                default_mbs = [b for b in divisors(gb // dp) if gb // (dp * b) <= MAX_DEFAULT_MICROBATCHES]
                for mb in _choose(space.micro_batch, default_mbs, gb):
                    if gb % (mb * dp):
                        reject(Reason.BATCH, f"global_batch ({gb}) must be divisible by micro_batch * dp ({mb} * {dp})")
                        continue
                    m = gb // (mb * dp)
                    svs = [(s, 1) for s in schedules if s != "interleaved" and schedule_problem(s, pp, m, 1) is None
                           and schedule_layout(s, pp, 1).num_stages <= units]
                    if "interleaved" in schedules and pp > 1 and m % pp == 0:
                        vpps = _choose(space.vpp, [v for v in (2, 3, 4) if pp * v <= units], units)
                        svs += [("interleaved", v) for v in vpps if v >= 2 and pp * v <= units]
                    for sched, vpp in svs:
                        for zero in zeros:
                            plan = Plan(dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch=mb, schedule=sched, zero=zero)
                            est = ev.estimate(plan, space.memory_headroom)
                            evaluated += 1
                            if not est.fits:
                                reject(Reason.MEMORY, f"tp {tp}, pp {pp}, dp {dp}, micro_batch {mb}, zero {zero} "
                                       f"needs {est.peak_memory_bytes / 1e9:.1f} GB per GPU > {budget / 1e9:.1f} GB")
                                continue
                            for family, member in (("tp", tp > 1), ("pp", pp > 1), ("dp", tp == pp == 1)):
                                if member and (family not in best_of or est.step.step_time_s < best_of[family].step.step_time_s):
                                    best_of[family] = est
                            item = (-est.step.step_time_s, -evaluated, est)
                            if len(heap) < top_k:
                                heapq.heappush(heap, item)
                            elif item > heap[0]:
                                heapq.heapreplace(heap, item)
    if not heap:
        detail = next(iter(examples.values()), "no plan to try")
        raise PlanInfeasible(f"no plan of {n} GPUs fits {spec.name}: {detail}")
    best = [e for *_, e in sorted(heap, key=lambda it: (-it[0], -it[1]))]
    best[0] = best[0].model_copy(update={"notes": best[0].notes + why_notes(ev, best[0], best_of)})
    return SearchResult(gpus=n, best=best, evaluated=evaluated, bounded=0, candidates=evaluated + sum(
        v for k, v in rejected.items() if k != Reason.MEMORY.value), rejected=dict(rejected.most_common()),
        examples=examples, wall_s=time.perf_counter() - start)


def why_notes(ev: NetEvaluator, best: PlanEstimate, best_of: dict[str, PlanEstimate]) -> list[str]:
    """Why the best plan beats the best plan with tensor and with pipeline parallelism."""
    from modelplan.plan.net_why import explain_choice

    return explain_choice(ev, best, best_of)



def network_plan_problems(ev: NetEvaluator, plan: Plan, cluster: Cluster | None = None,
                          world_size: int | None = None, allow_tp_across_nodes: bool = False) -> list[str]:
    """Every rule a network plan breaks (the network counterpart of `validate.plan_problems`)."""
    out = []
    if world_size is not None and plan.world_size != world_size:
        out.append(f"dp * tp * pp ({plan.dp} * {plan.tp} * {plan.pp} = {plan.world_size}) must equal the "
                   f"GPU count ({world_size})")
    if cluster is not None and cluster.max_gpus is not None and plan.world_size > cluster.max_gpus:
        out.append(f"plan needs {plan.world_size} GPUs but cluster {cluster.name} has {cluster.max_gpus}")
    if cluster is not None and not allow_tp_across_nodes and cluster.gpus_per_node % plan.tp:
        out.append(f"tp ({plan.tp}) must divide gpus_per_node ({cluster.gpus_per_node})")
    for name in ("cp", "ep"):
        if getattr(plan, name) > 1:
            out.append(f"{name} ({getattr(plan, name)}) > 1 applies to transformers, not network '{ev.spec.name}'")
    if plan.sequence_parallel:
        out.append(f"sequence_parallel applies to transformers, not network '{ev.spec.name}'")
    stages = schedule_layout(plan.schedule, plan.pp, plan.vpp).num_stages
    if stages > len(ev.units):
        what = f"pp * vpp ({plan.pp} * {plan.vpp})" if stages == plan.pp * plan.vpp else f"the schedule's {stages} stages"
        out.append(f"{what} must not exceed the network's units ({len(ev.units)})")
    gb = ev.training.global_batch
    if gb % (plan.micro_batch * plan.dp):
        out.append(f"micro_batch * dp ({plan.micro_batch} * {plan.dp} = {plan.micro_batch * plan.dp}) must "
                   f"divide global_batch ({gb})")
    elif schedule_problem(plan.schedule, plan.pp, plan.num_microbatches(gb), plan.vpp) is not None:
        out.append(schedule_problem(plan.schedule, plan.pp, plan.num_microbatches(gb), plan.vpp).message)
    return out


def estimate_network_plan(spec: NetworkSpec, training: TrainingSpec, plan: Plan, cluster: Cluster,
                          cost: CostModel | None = None, *, world_size: int | None = None,
                          memory_headroom: float = 0.0, allow_tp_across_nodes: bool = False) -> PlanEstimate:
    """Validate a network plan (one SpecError naming every broken rule) and predict it."""
    ev = NetEvaluator(spec, training, cluster, cost)
    problems = network_plan_problems(ev, plan, cluster, world_size, allow_tp_across_nodes)
    if problems:
        raise SpecError("; ".join(problems))
    return ev.estimate(plan, memory_headroom)
