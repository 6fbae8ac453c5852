"""Lower bounds of a plan's step time the search prunes with (block, FLOP and pipeline floors).

Split out of `plan/evaluator.py`: each floor is at most the exact time `Evaluator.evaluate` prices,
so a plan whose floor cannot enter the top-k is skipped before its DP traffic and memory are priced."""

from __future__ import annotations

from modelplan.plan.experts import expert_capacity
from modelplan.plan.flop_floor import flop_floor_s
from modelplan.plan.fp8 import gemm_rate_factor
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.parallel import pp as pp_mod


class StepFloors:
    """The `Evaluator`'s floor methods (its caches `_block_floors`, `_flop_floors`, `_tp_most`)."""

    def block_floor_s(self, tp: int, sp: bool, micro_batch: int, recompute: str, ep: int = 1, cp: int = 1,
                      tp_overlaps: list[str] | None = None, etp: int | None = None) -> float:
        """The least seconds one block of a micro-batch takes under any of the model's block
        kinds: compute, recompute and exposed EP / CP seconds, and its TP seconds when no mode in
        `tp_overlaps` overlaps them (None: some may); the MoE blocks' experts over `etp` ranks
        (None: tp). Cached."""
        exposed_tp = tp_overlaps is not None and all(self.resolved_tp_overlap(t, sp, tp) == "none"
                                                     for t in tp_overlaps)
        if recompute == "full" and self.software.recompute_method == "block":
            recompute = "none"  # some layers are not recomputed: the plain block is the floor
        key = (tp, sp, micro_batch, recompute, ep, cp, exposed_tp, etp)
        hit = self._block_floors.get(key)
        if hit is None:
            dense = self.block_terms(tp, sp, micro_batch, recompute, cp)
            hit = dense.compute_s + dense.recompute_s + dense.ep_s + dense.cp_s + (dense.tp_s if exposed_tp else 0.0)
            if self.spec.moe is not None:
                moe = self.block_terms(tp, sp, micro_batch, recompute, cp, ep, etp)
                hit = min(hit, moe.compute_s + moe.recompute_s + moe.ep_s + moe.cp_s + (moe.tp_s if exposed_tp else 0.0))
            self._block_floors[key] = hit
        return hit

    def block_flop_floor_s(self, tp: int, micro_batch: int, recompute: str, ep: int = 1, cp: int = 1,
                           etp: int | None = None) -> float | None:
        """A lower bound of `block_floor_s` under either sequence-parallel choice and any TP
        overlap, from the FLOPs of the block kinds' kernels alone (`plan/flop_floor.py`): the
        least kind's forward and backward, plus its forward again under full recompute (what
        full recomputes, `KernelTimes.recompute_s`); communication and the other recompute modes
        count as 0. SP changes only element-wise kernels, which the floor leaves out. None under
        a fine-tune, whose frozen weights skip weight gradients (no such floor). `etp`: the MoE
        blocks' expert tensor-parallel size (None: tp). Cached."""
        full = recompute == "full"
        key = (tp, micro_batch, full, ep, cp, etp)
        hit = self._flop_floors.get(key, False)
        if hit is False:
            if self.finetune is not None:
                hit = None
            else:  # the kinds' (forward, backward) floors, shared by every recompute
                kinds = self._memo(("flop_floors", tp, micro_batch, ep, cp, etp), lambda: self._flop_floors_of(
                    tp, micro_batch, ep, cp, etp))
                hit = min((2 * fwd if full else fwd) + bwd for fwd, bwd in kinds)
            self._flop_floors[key] = hit
        return hit

    def _flop_floors_of(self, tp: int, b: int, ep: int, cp: int, etp: int | None = None) -> list[tuple[float, float]]:
        """(forward, backward) FLOP floors of each block kind `_mixed_terms` prices: each class's
        kinds, else its default block (None)."""
        spec, training, sw = self.spec, self.training, self.software
        recipe = sw.fp8_recipe
        factor = gemm_rate_factor(recipe, self.cost.fp8_scaled_gemm_factor) if recipe else 0.0
        lengths = self.lengths  # each kind on its stack's tokens, as `_block_terms` prices it
        out = []
        for moe in ([False, True] if spec.moe is not None else [False]):
            for block in [k for k, _ in self.kinds_of(moe)] or [None]:
                s = lengths.of_block(block)
                tokens = b * s // cp
                routed = tokens * etp // tp if etp and moe else tokens  # as `_block_terms` routes them
                capacity = expert_capacity(routed, spec.moe, self.capacity_factor) if moe else None
                k = layer_kernels(spec, tp, b, s, self.dtype_bytes, False, moe_layer=moe,
                                  ep=ep if moe else 1, capacity=capacity, cp=cp, attention=training.attention,
                                  elementwise=sw.elementwise, block=block, memory_len=lengths.source,
                                  norm_elementwise=sw.norm_elementwise, cp_fp32_merge=sw.cp_fp32_merge,
                                  etp=etp if moe else None)
                out.append(flop_floor_s(k, self.roofline, factor))
        return out

    def compute_floor_s(self, cls: tuple, tp_overlaps: list[str] | None = None, block_s: float | None = None) -> float:
        """A lower bound of `pipeline_floor_s` from block terms alone (pipeline = m t_max +
        bubble t_mean, `parallel/pp.py`): every one of the m micro-batches waits for a stage that
        runs at least ceil(layers / pp) blocks, and the mean stage runs layers / pp of them, each
        taking at least `block_floor_s` (`block_s` when the caller has it; messages and edges are
        >= 0). Shaved by 1e-12 so that rounding never lifts it above the exact sum."""
        tp, pp, dp, vpp, mb, schedule, sp, recompute, ep, cp = cls
        if block_s is None:
            block_s = self.block_floor_s(tp, sp, mb, recompute, ep, cp, tp_overlaps)
        m = self._global_batch // (mb * dp)
        pipe = self._pipes.get((schedule, pp, m, vpp)) or self.pipe(schedule, pp, m, vpp)
        layers = self._layers
        return (m * -(-layers // pp) + max(0.0, pipe[0]) * layers / pp) * block_s * (1 - 1e-12)

    def pipeline_floor_s(self, cls: tuple, tp_overlaps: list[str], orders: list[str], splits: tuple = (None,),
                         etp: int | None = None) -> float:
        """A lower bound of `step_lower_bound_s` over every TP overlap mode, rank order,
        activation offload and stage split in `splits` of a classic point (tp, pp, dp, vpp,
        micro_batch, schedule, sp, recompute, ep, cp), from its stages without overlap: an overlap
        mode changes only a stage's exposed TP seconds (>= 0), so each stage takes at least its
        time less its TP seconds; messages at the cheapest order's, no offload (pipeline_time_s
        grows with both stage times); `etp` the MoE blocks' expert tensor-parallel size (None: tp)."""
        return min(self._pipeline_floor_s(cls, tp_overlaps, orders, split, etp) for split in splits)

    def _pipeline_floor_s(self, cls: tuple, tp_overlaps: list[str], orders: list[str], split,
                          etp: int | None = None) -> float:
        tp, pp, dp, vpp, mb, schedule, sp, recompute, ep, cp = cls
        stage = self.stage_entry(tp, sp, mb, recompute, pp, ep, cp, schedule, vpp, etp, split)
        slowest, mean = stage.slowest_s, stage.mean_s
        if any(self.resolved_tp_overlap(t, sp, tp) != "none" for t in tp_overlaps):
            most = self._tp_most.get(id(stage))
            if most is None:  # the most TP seconds any one stage spends
                d, e = stage.dense.tp, stage.moe.tp if stage.moe is not None else None
                most = self._tp_most[id(stage)] = max(
                    rb.dense_run * (d.fwd_s + d.bwd_s + d.recompute_s) + rb.embedding * d.embedding_s
                    + rb.head * d.head_s + (rb.moe_run * (e.fwd_s + e.bwd_s + e.recompute_s) if e is not None else 0.0)
                    for rb in set(stage.blocks))
            slowest, mean = slowest - most, mean - most
        m = self.training.global_batch // (mb * dp)
        bubble, hops = self.pipe(schedule, pp, m, vpp)
        p2p = min(self.p2p_s(tp, sp, mb, dp, pp, cp, True, o) for o in orders) if pp > 1 else 0.0
        p2p *= hops * self.cost.pp_p2p_exposed_fraction
        return pp_mod.pipeline_time_s(m, bubble, slowest + p2p, mean + p2p)
