"""Search every valid data / tensor / pipeline split of N GPUs and rank the ones that fit.

Enumeration order tp -> cp (see LONG_SEQUENCE) -> pp -> dp -> ep (MoE: divisors of dp that
divide num_experts) -> micro_batch -> (sequence_parallel, recompute) -> zero -> (schedule, vpp); each level applies the rules of `validate.py` and a memory lower bound (model
states before activations) so whole subtrees are dropped before any timing. Rejections are
counted in plans (leaves of the pruned subtree), by reason. Per-(tp, sp, micro_batch, recompute)
block terms and per-group-shape collective times are cached by the `Evaluator`.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from typing import Literal

from pydantic import Field

from modelplan.errors import PlanInfeasible
from modelplan.plan.estimate import to_estimate
from modelplan.plan.infeasible import _axes, nearest_blocker
from modelplan.plan.pipeline import schedule_problem
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.results import SearchResult
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.validate import (
    batch_problem,
    ep_problem,
    pp_problem,
    tp_node_problem,
    tp_problems,
)
from modelplan.specs.base import Spec
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan, Schedule
from modelplan.specs.training import Recompute, TrainingSpec
from modelplan.specs.transformer import TransformerSpec


class IntRange(Spec):
    """Inclusive range of integers, e.g. `--pp 1..16`."""

    lo: int = Field(ge=1)
    hi: int = Field(ge=1)


IntChoice = list[int] | IntRange

LONG_SEQUENCE = 32768
"""The search tries context parallelism by default from this sequence length on (below it a
sequence's activations fit with sequence parallelism and recompute, and CP's ring only adds
traffic; Megatron-core documents CP for long-context training); `--cp` asks for it at any length."""


class SearchSpace(Spec):
    """Which values each plan field may take; None means every value that can be valid."""

    tp: IntChoice | None = None
    pp: IntChoice | None = None
    dp: IntChoice | None = None
    vpp: IntChoice | None = None
    """Model chunks per pipeline rank; values >= 2 use the interleaved schedule."""
    micro_batch: IntChoice | None = None
    ep: IntChoice | None = None
    """Expert-parallel sizes (MoE); default: every divisor of dp that divides num_experts."""
    cp: IntChoice | None = None
    """Context-parallel sizes; default: 1, or from seq_len >= LONG_SEQUENCE on every divisor of
    gpus/tp that divides seq_len."""
    max_tp: int | None = Field(None, ge=1)
    schedule: list[Schedule] | None = None
    """Default: 1f1b and interleaved (GPipe has 1F1B's bubble and more memory; the others are
    asked for by name)."""
    sequence_parallel: list[bool] | None = None
    recompute: list[Recompute] | None = None
    zero: list[Literal[0, 1, 2, 3]] | None = None
    allow_tp_across_nodes: bool = False
    memory_headroom: float = Field(0.0, ge=0, lt=1)
    """Fraction of accelerator memory kept free."""


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _choose(choice: IntChoice | None, defaults: list[int], cap: int) -> list[int]:
    """User values (explicit list, or every integer of a range up to cap) or the defaults."""
    if choice is None:
        return defaults
    if isinstance(choice, IntRange):
        return list(range(choice.lo, min(choice.hi, cap) + 1))
    return sorted(set(choice))


def search_plans(
    spec: TransformerSpec,
    training: TrainingSpec,
    cluster: Cluster,
    gpus: int,
    space: SearchSpace | None = None,
    cost: CostModel | None = None,
    top_k: int = 5,
) -> SearchResult:
    """Every valid plan of `gpus` GPUs ranked by predicted step time (raises PlanInfeasible with
    the nearest blocker when none fits)."""
    if getattr(spec, "kind", None) == "network":  # MLP / CNN / RNN: modelplan.plan.net_search
        from modelplan.plan.net_search import search_network_plans

        return search_network_plans(spec, training, cluster, gpus, space, cost, top_k)
    start = time.perf_counter()
    space = space or SearchSpace()
    ev = Evaluator(spec, training, cluster, cost)
    spec, cost = ev.spec, ev.cost
    n, gb, layers, gpn = gpus, training.global_batch, spec.layers, cluster.gpus_per_node
    budget = ev.memory_bytes * (1 - space.memory_headroom)
    rejected: Counter[str] = Counter()
    examples: dict[str, str] = {}
    closest_need = [float("inf")]

    def reject(problem: Problem, count: int, need_bytes: float = 0.0) -> None:
        """Count `count` plans under the problem's reason; keep one example per reason (for
        memory: the plan that came closest to fitting)."""
        if count:
            reason = problem.reason.value
            rejected[reason] += count
            if reason not in examples or (need_bytes and need_bytes < closest_need[0]):
                examples[reason] = problem.message
                if need_bytes:
                    closest_need[0] = need_bytes

    schedules = space.schedule or [Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED]
    recomputes = space.recompute or ["none", "selective", "full"]
    zeros = space.zero if space.zero is not None else [0, 1, 2, 3]
    sp_user = space.sequence_parallel or [False, True]

    tp_default = [t for t in divisors(n) if space.allow_tp_across_nodes or t <= gpn]
    tps = [t for t in _choose(space.tp, tp_default, n) if space.max_tp is None or t <= space.max_tp]

    def cps_of(tp: int) -> list[int]:
        default = [1]
        if training.seq_len >= LONG_SEQUENCE and n % tp == 0:  # the rule stated at LONG_SEQUENCE
            default = [c for c in divisors(n // tp) if training.seq_len % c == 0]
        return _choose(space.cp, default, n)

    def pps_of(tp: int) -> list[int]:
        if isinstance(space.dp, list):
            default = sorted({n // (tp * d) for d in space.dp if n % (tp * d) == 0})
        else:
            default = divisors(n // tp) if n % tp == 0 else []
        return _choose(space.pp, default, n)

    def dps_of(tp: int, pp: int) -> list[int]:
        default = [n // (tp * pp)] if n % (tp * pp) == 0 else []
        return _choose(space.dp, default, n)

    def mbs_of(dp: int) -> list[int]:
        return _choose(space.micro_batch, divisors(gb // dp) if gb % dp == 0 else [], gb)

    def svs_of(pp: int) -> list[tuple[str, int]]:
        out = [(s, 1) for s in schedules if s != Schedule.INTERLEAVED]
        if Schedule.INTERLEAVED in schedules:
            # pp 1 has no interleaved schedule: only a vpp the user asked for is tried (and rejected)
            # (an uneven split, layers % pp != 0, tries every vpp that leaves each chunk a block)
            if pp == 1:
                vdefault = []
            elif layers % pp == 0:
                vdefault = [v for v in divisors(layers // pp) if v >= 2]
            else:
                vdefault = list(range(2, layers // pp + 1))
            out += [(Schedule.INTERLEAVED, v) for v in _choose(space.vpp, vdefault, layers) if v >= 2]
        if space.vpp is not None:
            allowed = set(_choose(space.vpp, [], layers))
            out = [(s, v) for s, v in out if v in allowed]
        return out

    def sps_of(tp: int) -> list[bool]:
        return [x for x in sp_user if tp > 1 or not x] or [False]

    def eps_of(dp: int) -> list[int]:
        # MoE: every ep that divides dp and num_experts (expert parallelism lives inside dp)
        default = [e for e in divisors(dp) if spec.moe.num_experts % e == 0] if spec.moe is not None else [1]
        return _choose(space.ep, default, dp)

    def leaves(tp: int, pp: int, dp: int, mbs: list[int] | None = None, eps: list[int] | None = None) -> int:
        per_mb = len(sps_of(tp)) * len(recomputes) * len(zeros) * max(1, len(svs_of(pp)))
        per_mb *= max(1, len(eps if eps is not None else eps_of(dp)))
        return per_mb * max(1, len(mbs if mbs is not None else mbs_of(dp)))

    heap: list[tuple[float, float, int, tuple]] = []
    evaluated = bounded = 0
    tie = 0
    closest: tuple[float, tuple] | None = None
    for tp, cp in ((t, c) for t in tps for c in cps_of(t)):
        tp_probs = tp_problems(spec, tp)
        node = None if space.allow_tp_across_nodes else tp_node_problem(tp, gpn)
        if node:
            tp_probs.append(node)
        if training.seq_len % cp:
            tp_probs.append(Problem(Reason.CP_SEQ, f"cp ({cp}) must divide seq_len ({training.seq_len})"))
        for pp in pps_of(tp * cp):
            for dp in dps_of(tp * cp, pp):
                if tp_probs:
                    reject(tp_probs[0], leaves(tp, pp, dp))
                    continue
                if tp * cp * pp * dp != n:
                    reject(Problem(Reason.WORLD_SIZE, f"dp * tp * pp * cp ({dp} * {tp} * {pp} * {cp} = "
                                   f"{dp * tp * pp * cp}) must equal the GPU count ({n})"), leaves(tp, pp, dp))
                    continue
                problem = pp_problem(layers, pp, 1)
                if problem:
                    reject(problem, leaves(tp, pp, dp))
                    continue
                mbs = mbs_of(dp)
                if not mbs:
                    reject(batch_problem(gb, 1, dp), leaves(tp, pp, dp))
                    continue
                for ep in eps_of(dp):
                    problem = ep_problem(spec, dp, ep)
                    if problem:
                        reject(problem, leaves(tp, pp, dp, mbs, [ep]))
                        continue
                    ok_zeros = []
                    for zero in zeros:  # memory lower bound: model states alone
                        states = max(sum(x) for x in ev.held.states(tp, pp, dp, zero, ep, cp))
                        need = states + cost.runtime_reserved_bytes  # fragmentation: activations only
                        if need > budget:
                            per = len(sps_of(tp)) * len(recomputes) * max(1, len(svs_of(pp))) * len(mbs)
                            reject(Problem(Reason.MEMORY, f"model states alone need {need / 1e9:.1f} GB per GPU "
                                           f"with allowances (tp {tp}, pp {pp}, dp {dp}{_axes(ep, cp)}, zero {zero}) > "
                                           f"{budget / 1e9:.1f} GB"), per, need)
                        else:
                            ok_zeros.append(zero)
                    if not ok_zeros:
                        continue
                    svs = svs_of(pp)
                    for mb in mbs:
                        problem = batch_problem(gb, mb, dp)
                        if problem:
                            reject(problem, leaves(tp, pp, dp, [mb], [ep]))
                            continue
                        m = gb // (mb * dp)
                        for sp in sps_of(tp):
                            for rc in recomputes:
                                for zero in ok_zeros:
                                    for sched, vpp in svs:
                                        problem = pp_problem(layers, pp, vpp) or schedule_problem(sched, pp, m, vpp)
                                        if problem:
                                            reject(problem, 1)
                                            continue
                                        point = PlanPoint(tp, pp, dp, vpp, mb, sched, sp, rc, zero, ep, cp)
                                        first, last = ev.memory(point)
                                        peak = max(first.total, last.total)
                                        if peak > budget:
                                            reject(Problem(Reason.MEMORY, f"tp {tp}, pp {pp}, dp {dp}{_axes(ep, cp)}, micro_batch {mb}, "
                                                           f"recompute {rc}, zero {zero} needs {peak / 1e9:.1f} GB per GPU > "
                                                           f"{budget / 1e9:.1f} GB"), 1, peak)
                                            if closest is None or peak < closest[0]:
                                                closest = (peak, point)
                                            continue
                                        if len(heap) == top_k and ev.step_lower_bound_s(point) >= -heap[0][0]:
                                            bounded += 1  # cannot enter the top-k: skip pricing DP
                                            continue
                                        e = ev.evaluate(point)
                                        evaluated += 1
                                        tie += 1
                                        item = (-e.step.step_time_s, -peak, tie, point)
                                        if len(heap) < top_k:
                                            heapq.heappush(heap, item)
                                        elif item > heap[0]:
                                            heapq.heapreplace(heap, item)
    if not heap:
        raise PlanInfeasible(nearest_blocker(ev, n, rejected, examples, closest, space.memory_headroom, space))
    best = []
    for *_, point in sorted(heap, reverse=True):
        tp, pp, dp, vpp, mb, sched, sp, rc, zero, ep, cp, _ = point[:12]
        plan = Plan(dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch=mb, schedule=sched,
                    sequence_parallel=sp, recompute=rc, zero=zero, ep=ep, cp=cp)
        e = ev.evaluate(point)
        best.append(to_estimate(ev, e, plan, space.memory_headroom))
    return SearchResult(
        gpus=n, best=best, evaluated=evaluated, bounded=bounded,
        candidates=evaluated + bounded + sum(rejected.values()),
        rejected=dict(rejected.most_common()), examples=examples, wall_s=time.perf_counter() - start,
    )
