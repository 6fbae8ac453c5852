"""The transformer family's search program (`protocol.SearchProgram`), run by the one search
(`search.search_family_plans`): its points are those of `candidates.walk` over its axes
(`transformer_axes.py`), each under the wider dimensions of `search_ext.py`.

What it adds to the protocol's plain program: rejections are counted in plans (the leaves of the
pruned subtree, by reason); a grid whose model states alone overflow under every ZeRO variant is
dropped (`prepare`), then a point whose first pipeline rank cannot fit (`MemoryFloor`, the
`floors`), before any timing; the rest are priced best first by their compute, then pipeline,
floor. Per-(tp, sp, micro_batch, recompute) block terms and per-group-shape collective times are
cached by the `Evaluator`. When nothing fits, the search runs again without the memory floor
(`retry`), whose rejections carry no exact need, so that the nearest blocker is the plan that
comes closest to fitting.
"""

from __future__ import annotations

import math

from modelplan.plan.candidates import Candidates, Group, Subtree
from modelplan.plan.estimate import block_vpps, to_estimate
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.infeasible import _axes, nearest_blocker
from modelplan.plan.memory_floor import MemoryFloor
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.protocol import SearchProgram
from modelplan.plan.ranking import Ranking
from modelplan.plan.results import PlanEstimate
from modelplan.plan.search_ext import Extensions
from modelplan.plan.space import SearchSpace
from modelplan.plan.transformer_axes import TransformerAxes
from modelplan.plan.validate import engine_pipeline_problem, split_problem
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

__all__ = ["RELIEF_REACH", "transformer_search"]

NO_SPLIT = (None,)
MEMORY = Reason.MEMORY.value
"""The memory reason's key in `Ranking.rejected` (read once: an enum's .value is slow in the hot loop)."""
FLOPS, COMPUTE, PIPELINE = 0, 1, 2
"""A frontier entry's floor, tighter at each step (`Evaluator.block_flop_floor_s`, `compute_floor_s`,
`pipeline_floor_s`): the block terms are priced only for entries popped at their FLOP floor."""
RELIEF_REACH = 1.05
"""The stage-split search tries its memory-relief splits (blocks moved to the last stage) only for
plans within this factor of the memory budget: moving one or two blocks frees a few per cent."""


def _over_budget(limit: float, budget: float) -> str:
    """'> budget', or, where the floor allowed RELIEF_REACH for uneven-stage relief splits, by how
    much it is over the budget itself (that limit is no GPU's memory)."""
    if limit <= budget:
        return f" > {limit / 1e9:.1f} GB"
    return (f", over the {budget / 1e9:.1f} GB budget by more than the {limit / budget - 1:.0%} a relief "
            "split of the uneven stages could take off")


def transformer_search(spec: TransformerSpec, training: TrainingSpec, cluster: Cluster, gpus: int,
                       space: SearchSpace, cost: CostModel | None, rank: Ranking, use_bound: bool,
                       floors: bool) -> SearchProgram:
    """The transformer family's `SearchProgram` (module docstring): `use_bound` False prices every
    plan that fits; `floors` False drops no point by its memory floor (whose rejections carry no
    exact need)."""
    top_k = rank.top_k
    if training.framework == "deepspeed" and space.schedule is None:  # its 1F1B TrainSchedule only
        space = space.model_copy(update={"schedule": ["1f1b"]})  # (`validate.engine_pipeline_problem`)
    ev = Evaluator(spec, training, cluster, cost)
    spec, cost = ev.spec, ev.cost
    ext = Extensions(ev, space, training)
    memory_floors = MemoryFloor(ev, space.search_split, RELIEF_REACH)
    n, gb, layers, gpn = gpus, training.global_batch, spec.num_blocks, cluster.domain_gpus
    budget = ev.memory_bytes * (1 - space.memory_headroom)
    search_split = space.search_split
    pinned = space.stage_split
    """The user's (first, last) stage blocks: the only split tried; the memory floors (model states
    and the first rank's), which assume rank 0 keeps at least its default blocks, are off then."""
    floors = floors and pinned is None
    reshard = space.reshard_after_forward
    reject, rejected = rank.reject, rank.rejected
    heap = rank.heap

    cands = Candidates(space, n, gpn, gb, layers, pp_flush_microbatches=training.pp_flush_microbatches)
    """The per-axis values of every family's search (`candidates.py`)."""
    axes = TransformerAxes(spec, training, cluster, space, n)
    """Its axes beyond tp, pp, dp and their rules, for the one walk (`candidates.walk`)."""
    zeros = cands.zeros
    etp_at = axes.etp_at
    """A point's expert tensor-parallel size at its tp (`PlanPoint.etp`; None: tp)."""

    def wide(tp: int, cp: int, dp: int, pp: int, ep: int, zs: list[int]) -> int:
        """Plans of one (micro_batch, schedule, vpp) under every sp, recompute, ZeRO stage in `zs`
        and wider dimension (`search_ext.py`)."""
        return sum(ext.leaves_per_point(tp, cp, dp, pp, ep, sp, rc, zs) for sp in axes.sps(tp) for rc in axes.recomputes)

    def leaves(tp: int, pp: int, dp: int, mbs: list[int] | None = None, eps: list[int] | None = None,
               cp: int = 1) -> int:
        per_mb = max(1, len(cands.schedules(pp, block_vpps(layers, pp)))) * sum(
            wide(tp, cp, dp, pp, e, zeros) for e in (eps if eps is not None else axes.eps(dp, tp, cp)) or [1])
        return per_mb * max(1, len(mbs if mbs is not None else cands.microbatches(dp)))

    counted: list = [None, 0]
    """The last subtree of a schedule rule `pruned` counted, and its plans (a group's rules share it)."""

    def pruned(problem: Problem, at: Subtree) -> None:
        """A rule of the walk dropped `at`: every plan under it counted under its reason."""
        if at.sp is not None:  # a schedule's rule: one point of the walk, under every wider dimension
            if counted[0] is not at:
                orders, _, _, per_bound, _ = at.ctx
                counted[0], counted[1] = at, (len(orders) * len(ext.tp_overlaps(at.tp, at.sp))
                                              * len(ext.activation_offloads(at.recompute)) * per_bound)
            reject(problem, counted[1])
        elif at.pp is None:  # a tp (and cp) rule: every grid of it
            reject(problem, sum(leaves(at.tp, pp, dp, cp=at.cp) for pp in cands.pps(at.tp * at.cp)
                                for dp in cands.dps(at.tp * at.cp, pp)))
        else:
            reject(problem, leaves(at.tp, at.pp, at.dp, at.mbs, None if at.ep is None else [at.ep], at.cp))

    offload_can_shed = any(o != "none" for o in ext.opts)

    def fits(point: PlanPoint, m: int, splits: tuple = NO_SPLIT) -> tuple[Problem | None, float, tuple | None]:
        """(None, peak bytes, split) when the plan fits the GPU and its offload the host under its
        split or, within RELIEF_REACH of the budget, under the first relief split of `splits` that
        does; else (problem, bytes needed, its split)."""
        problem, peak = fits_as_is(point, m)
        if problem is None or problem.reason is not Reason.MEMORY or peak > RELIEF_REACH * budget:
            return problem, peak, point.split
        for split in splits[1:]:  # relief moves a block or two: it cannot close a wide gap
            relief, relief_peak = fits_as_is(point._replace(split=split), m)
            if relief is None:
                return None, relief_peak, split
        return problem, peak, point.split

    def fits_as_is(point: PlanPoint, m: int) -> tuple[Problem | None, float]:
        """(None, peak bytes) when the plan fits the GPU and its offload the host, else
        (problem, bytes needed)."""
        first, last = ev.memory(point)
        peak = max(first.total, last.total)
        tp, pp, dp, vpp, mb, sched, sp, rc, zero, ep, cp = point[:11]
        if peak > budget:
            return (Problem(Reason.MEMORY, f"tp {tp}, pp {pp}, dp {dp}{_axes(ep, cp)}, micro_batch {mb}, "
                            f"recompute {rc}, zero {zero} needs {peak / 1e9:.1f} GB per GPU > {budget / 1e9:.1f} GB"), peak)
        if point.offload_optimizer != "none" or point.offload_activations:
            stage = ev.stage_entry(tp, sp, mb, rc, pp, ep, cp, sched, vpp, point.etp, point.split)
            need = ev.mech.host_need(stage, tp, pp, dp, zero, ep, cp, sched, vpp, point.offload_optimizer,
                                     point.offload_activations, ev.inflight(sched, pp, m, vpp)[0])
            problem = ev.mech.host_problem(need)
            if problem:
                return Problem(Reason.HOST_MEMORY, f"tp {tp}, pp {pp}, dp {dp}: {problem}"), 0.0
        return None, peak

    def prepare(tp: int, cp: int, pp: int, dp: int, ep: int, mbs: list[int], svs: list[tuple[str, int]]):
        """A grid's context for its points, or None when the model states alone fit under no ZeRO
        variant (memory lower bound, less what offload can shed; those plans rejected here)."""
        etp = etp_at(tp)
        runnable = []
        for zero in zeros:  # the engine's pipeline runtime (DeepSpeed: ZeRO < 2 under pp)
            problem = engine_pipeline_problem(training.framework, pp, zero)
            if problem:
                reject(problem, max(1, len(svs)) * len(mbs) * wide(tp, cp, dp, pp, ep, [zero]))
            else:
                runnable.append(zero)
        ok_zeros = [] if pinned is None else runnable  # a pinned split: no states floor (`pinned`)
        for zero in runnable if pinned is None else ():  # memory lower bound: model states alone, less offload
            held = ev.held.states(tp, pp, dp, zero, ep, cp, reshard=reshard, etp=etp)
            if offload_can_shed:
                held = [ev.mech.offloaded_states(x, dp, zero) for x in held]
            need = max(sum(x) for x in held) + cost.runtime_reserved_bytes  # fragmentation: activations only
            if need > budget:
                reject(Problem(Reason.MEMORY, f"model states alone need {need / 1e9:.1f} GB per GPU "
                               f"with allowances (tp {tp}, pp {pp}, dp {dp}{_axes(ep, cp)}, zero {zero}) > "
                               f"{budget / 1e9:.1f} GB"), max(1, len(svs)) * len(mbs) * wide(tp, cp, dp, pp, ep, [zero]), need)
            else:
                ok_zeros.append(zero)
        if not ok_zeros:
            return None
        orders = ext.orders(tp, cp, dp, pp)
        dpos = ext.dp_overlap_choices(dp, cp)
        variants = []
        per_variant = max(1, len(svs)) * len(mbs) * len(ext.opts) * len(dpos) * sum(
            len(orders) * len(ext.tp_overlaps(tp, sp)) * len(ext.activation_offloads(rc))
            for sp in axes.sps(tp) for rc in axes.recomputes)
        for z in ok_zeros:
            for v in ext.dp_variants(z, tp, dp, ep, cp):
                if pinned is None and (v.fsdp_shard_size or v.zeropp):  # their own floor: fewer shards, hpZ's copy
                    held = ev.held.states(tp, pp, dp, z, ep, cp, reshard=reshard, shard=v.fsdp_shard_size, etp=etp)
                    if offload_can_shed:
                        held = [ev.mech.offloaded_states(x, dp, z) for x in held]
                    extra = ev.mech.zeropp_bytes(tp, dp, pp, cp, orders[0], float(sum(
                        ev.held.rank_params(tp, pp, ep, etp=etp)[0][0]))) if v.zeropp else 0.0
                    need = max(sum(x) for x in held) + extra + cost.runtime_reserved_bytes
                    if need > budget:
                        reject(Problem(Reason.MEMORY, f"model states alone need {need / 1e9:.1f} GB per GPU "
                                       f"(tp {tp}, pp {pp}, dp {dp}{_axes(ep, cp)}, zero {z}, "
                                       f"{'zero++' if v.zeropp else f'hsdp {v.fsdp_shard_size}'}) > "
                                       f"{budget / 1e9:.1f} GB"), per_variant, need)
                        continue
                variants.append((z, v))
        if not variants:
            return None
        per_bound = len(variants) * len(ext.opts) * len(dpos)
        """Plans under one pipeline bound: every ZeRO variant, optimizer offload, DP overlap."""
        floor_states: dict[tuple, float] = {}
        """Rank 0's least model states per (schedule, vpp) (`MemoryFloor.states_bytes`)."""
        return orders, dpos, variants, per_bound, floor_states

    def enqueue(group: Group, frontier: list[tuple]) -> int:
        """The group's points that pass the memory floor onto the frontier, keyed by their
        compute floor; the plans under them."""
        tp, cp, pp, dp, ep, mb, m, sp, rc, svs, ctx = group
        etp = etp_at(tp)
        waiting = 0
        orders, dpos, variants, per_bound, floor_states = ctx
        tpos = ext.tp_overlaps(tp, sp)
        acts = ext.activation_offloads(rc)
        if not tpos or not acts:
            return 0  # the asked TP overlap cannot run here (no SP): no plan
        under = len(orders) * len(tpos) * len(acts) * per_bound
        block_s = None  # the compute floor's block, shared by the schedules
        if floors:
            group_bytes = memory_floors.group_bytes(tp, pp, dp, ep, cp, sp, mb, rc, etp)
            sequences, shed_acts = mb * dp, True in acts
        for sched, vpp in svs:
            cls = (tp, pp, dp, vpp, mb, sched, sp, rc, ep, cp)
            if pinned is not None:  # the user's split must leave every other stage a block
                problem = split_problem(layers, schedule_layout(sched, pp, vpp).num_stages, 1, pinned)
                if problem is not None:
                    reject(problem, under)
                    continue
            if floors:  # no plan of the point fits: dropped before any timing
                states = floor_states.get((sched, vpp))
                if states is None:
                    states = floor_states[sched, vpp] = memory_floors.states_bytes(
                        tp, pp, dp, ep, cp, sched, vpp, variants, offload_can_shed, etp, reshard)
                over = memory_floors.over(group_bytes, sched, pp, vpp, sequences, shed_acts, states, budget)
                if over is not None:
                    if MEMORY in rank.examples:  # counted; no new example
                        rejected[MEMORY] += under
                    else:
                        reject(Problem(Reason.MEMORY, f"tp {tp}, pp {pp}, dp {dp}{_axes(ep, cp)}, micro_batch {mb}, "
                                       f"recompute {rc}, {sched} vpp {vpp}: the first pipeline rank needs at least "
                                       f"{over[0] / 1e9:.1f} GB per GPU{_over_budget(over[1], budget)}"), under)
                    continue
            stage = COMPUTE
            if use_bound and block_s is None:  # FLOPs alone, else the block terms
                block_s = ev.block_flop_floor_s(tp, mb, rc, ep, cp, etp)
                stage = FLOPS if block_s is not None else COMPUTE
                if block_s is None:
                    block_s = ev.block_floor_s(tp, sp, mb, rc, ep, cp, tpos, etp)
            floor = ev.compute_floor_s(cls, tpos, block_s) if use_bound else 0.0  # block_s: under etp
            waiting += under
            frontier.append((floor, len(frontier), under, stage if use_bound else COMPUTE, cls, orders, tpos, acts,
                             variants, dpos, m, NO_SPLIT))
        return waiting

    # best first over the classic points (`Ranking.best_first`): keyed first by a compute floor,
    # refined to the pipeline floor when popped; once the smallest key left cannot enter the
    # top-k, nothing left can
    closest: tuple[float, tuple] | None = None
    tie = 0

    def visit(entry: tuple) -> tuple | None:
        nonlocal closest, tie
        floor, seq, under, refined, cls, orders, tpos, acts, variants, dpos, m, splits = entry
        evaluated = bounded = 0
        if refined == FLOPS:  # the compute floor from the block terms, priced only now
            tp, pp, dp, vpp, mb, sched, sp, rc, ep, cp = cls
            block_s = ev.block_floor_s(tp, sp, mb, rc, ep, cp, tpos, etp_at(tp))
            return (ev.compute_floor_s(cls, tpos, block_s), seq, under, COMPUTE, *entry[4:])
        if refined == COMPUTE:
            # the stage split: the fastest, else the first relief that fits (`fits`); the compute
            # floor holds for every split (some rank runs >= layers / pp blocks), so splits are
            # found only for points the search reaches
            tp, pp, dp, vpp, mb, sched, sp, rc, ep, cp = cls
            etp = etp_at(tp)
            splits = ((pinned,) if pinned is not None else ev.split_candidates(
                tp, sp, mb, rc, pp, ep, cp, sched, vpp, etp) if pp > 1 and search_split else NO_SPLIT)
            return (ev.pipeline_floor_s(cls, tpos, orders, splits, etp) if use_bound else 0.0, seq, under, PIPELINE,
                    *entry[4:11], splits)
        tp, pp, dp, vpp, mb, sched, sp, rc, ep, cp = cls
        etp = etp_at(tp)
        per_bound = under // (len(orders) * len(tpos) * len(acts))
        fitted: dict[tuple, tuple] = {}
        offloads = len(acts) * len(ext.opts)
        offload_pairs = [(act, opt) for act in acts for opt in ext.opts]
        for order in orders:
            for tpo in tpos:
                # the pipeline without offload: no ZeRO, offload or DP choice makes a step shorter
                base = PlanPoint(tp, pp, dp, vpp, mb, sched, sp, rc, 0, ep, cp, tp_overlap=tpo, rank_order=order,
                                 etp=etp, split=splits[0])
                # a relief split is priced only when the fastest misfits: the bound covers every split
                lb = min(ev.step_lower_bound_s(base._replace(split=x)) for x in splits) if use_bound else -1.0
                if len(heap) == top_k and lb >= -heap[0][0]:
                    bounded += per_bound * len(acts)
                    continue
                ctx = ev.context(base)
                for zero, (shard, zpp) in variants:
                    keys = [(zero, shard, zpp, opt, act, order if zpp else None) for act in acts for opt in ext.opts]
                    fast_on = None
                    for dpo in dpos:
                        worst = -heap[0][0] if len(heap) == top_k else math.inf
                        if lb >= worst or (fast_on is not None and fast_on >= worst):
                            bounded += offloads  # the pipeline alone, or the same plans with DP overlap on
                            continue
                        # memory is shared by the TP-overlap, DP-overlap and order variants: known misfits
                        # are rejected at once (their example was kept when first found), the rest are
                        # timed first and their memory priced only when they are fast enough for the top-k
                        known = [fitted.get(k) for k in keys]
                        if all(f is not None and f[0] is not None for f in known):
                            for f in known:
                                rejected[f[0].reason.value] += 1
                            continue
                        leaf = PlanPoint(tp, pp, dp, vpp, mb, sched, sp, rc, zero, ep, cp, True,
                                         reshard, shard, tpo, dpo, "none", False, order, zpp, etp=etp,
                                         split=splits[0])
                        times = ev.variant_times_s(ctx, leaf, acts, ext.opts)
                        fastest = min(times)
                        if dpo and use_bound:
                            fast_on = fastest
                        if fastest >= worst:
                            evaluated += offloads  # timed; too slow for the top-k, memory never priced
                            continue
                        for (act, opt), t, fkey, fit in zip(offload_pairs, times, keys, known):
                            if len(heap) == top_k and t >= -heap[0][0]:
                                evaluated += 1
                                continue
                            if fit is not None and fit[0] is not None:
                                rejected[fit[0].reason.value] += 1
                                continue
                            point = leaf._replace(offload_optimizer=opt, offload_activations=act)
                            if fit is None:
                                fit = fitted[fkey] = fits(point, m, splits)
                                if fit[0] is not None:
                                    reject(fit[0], 1, fit[1])
                                    if fit[1] and (closest is None or fit[1] < closest[0]):
                                        closest = (fit[1], point)
                                    continue
                            if fit[2] != point.split:  # the fastest split misfits, a relief split fits: its time
                                point = point._replace(split=fit[2])
                                t = ev.step_time_s(point)
                                if len(heap) == top_k and t >= -heap[0][0]:
                                    evaluated += 1
                                    continue
                            evaluated += 1
                            tie += 1
                            rank.offer((-t, -fit[1], tie, point))
        rank.evaluated += evaluated
        rank.bounded += bounded
        return None

    def beyond(floor: float) -> bool:
        return len(heap) == top_k and floor >= -heap[0][0]

    def infeasible() -> str:
        return nearest_blocker(ev, n, rejected, rank.examples, closest, space.memory_headroom, space)

    def ranked() -> list[PlanEstimate]:
        best = []
        for point in rank.ranked():
            tp, pp, dp, vpp, mb, sched, sp, rc, zero, ep, cp, _ = point[:12]
            first_layers, last_layers = point.split if point.split is not None else (None, None)
            plan = Plan(dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch=mb, schedule=sched,
                        sequence_parallel=sp, recompute=rc, zero=zero, ep=ep, cp=cp,
                        reshard_after_forward=point.reshard_after_forward,
                        fsdp_shard_size=point.fsdp_shard_size, tp_overlap=point.tp_overlap,
                        dp_overlap=point.dp_overlap, offload_optimizer=point.offload_optimizer,
                        offload_activations=point.offload_activations, rank_order=point.rank_order,
                        zeropp=point.zeropp, first_stage_layers=first_layers, last_stage_layers=last_layers,
                        etp=axes.etp)
            best.append(to_estimate(ev, ev.evaluate(point), plan, space.memory_headroom))
        return best

    return SearchProgram(axes, cands, pruned, prepare, enqueue, visit, beyond, ranked, infeasible, retry=True)
