"""The communication terms of the `Evaluator` (a mixin sharing its caches): each is a priced
item of `modelplan.plan.commlist.communication_list` for a canonical plan (`listprice.py` prices
the items; see there which canonical lists stand for which plans).
"""

from __future__ import annotations

from modelplan.comm.ops import Axis
from modelplan.comm.topology import GroupShape
from modelplan.plan.commlist import communication_list
from modelplan.plan.dims import ParallelDims
from modelplan.plan.listprice import DpPrices, TpPrices, dp_prices, ep_prices, tp_prices
from modelplan.plan.stages import split_layers
from modelplan.specs.plan import Plan


class ListTerms:
    """Group shapes and priced communication lists; expects the Evaluator's spec, training,
    cluster, pricer, capacity factor, `_memo` and its `_p2ps` cache."""

    def shapes(self, tp: int, dp: int, pp: int, ep: int = 1, cp: int = 1) -> dict[Axis, GroupShape]:
        """Process-group shapes of a tp x cp x dp x pp grid (ep inside dp) on this cluster."""
        return self._memo(("shapes", tp, dp, pp, ep, cp),
                          lambda: ParallelDims(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep).group_shapes(self.cluster.gpus_per_node))

    def tp_list_prices(self, tp: int, sp: bool, micro_batch: int, recompute: str, cp: int = 1,
                       scatter_gather: bool = True) -> TpPrices:
        """Price the communication list of a 2-block copy of the model on pp 2 (one sequence,
        scaled to the micro-batch)."""
        def items():
            two_blocks = self.spec.model_copy(update={"layers": 2})
            one_seq = self.training.model_copy(update={"global_batch": 1})
            plan = Plan(tp=tp, pp=2, cp=cp, micro_batch=1, sequence_parallel=sp, recompute=recompute,
                        scatter_gather=scatter_gather)
            return communication_list(two_blocks, one_seq, plan)

        return self._memo(("tp_list", tp, sp, micro_batch, recompute, cp, scatter_gather), lambda: tp_prices(
            self._memo(("tp_items", tp, sp, recompute, cp, scatter_gather), items), self.pricer,
            self.shapes(tp, 1, 2, cp=cp), micro_batch))

    def cp_kv_send_s(self, tp: int, sp: bool, micro_batch: int, cp: int) -> float:
        """One K, V block of the communication list sent to the next rank of the cp ring."""
        return self._memo(("cp_kv", tp, sp, micro_batch, cp), lambda: self.pricer.p2p_time_s(
            self.tp_list_prices(tp, sp, micro_batch, "none", cp).cp_kv_bytes,
            self.shapes(tp, 1, 1, cp=cp)[Axis.CP].crosses_nodes))

    def ep_list_prices(self, tp: int, sp: bool, micro_batch: int, recompute: str, ep: int, cp: int = 1) -> float:
        """AllToAll seconds of one MoE block per micro-batch: the list of a 2-block all-MoE copy
        of the model on pp 2 with dp = ep, its buffers sized with the planned capacity factor."""
        def price():
            moe = self.spec.moe.model_copy(update={"first_dense_layers": 0, "layer_freq": 1})
            two_blocks = self.spec.model_copy(update={"layers": 2, "moe": moe})
            training = self.training.model_copy(update={"global_batch": micro_batch * ep})
            plan = Plan(tp=tp, pp=2, dp=ep, ep=ep, cp=cp, micro_batch=micro_batch, sequence_parallel=sp,
                        recompute=recompute)
            items = communication_list(two_blocks, training, plan, capacity_factor=self.capacity_factor)
            return ep_prices(items, self.pricer, self.shapes(tp, ep, 2, ep, cp))

        return self._memo(("ep_list", tp, sp, micro_batch, recompute, ep, cp), price)

    def p2p_s(self, tp: int, sp: bool, micro_batch: int, dp: int, pp: int, cp: int = 1,
              scatter_gather: bool = True) -> float:
        """One stage-boundary message of the communication list on the link between neighbouring
        stages: b*s*h (/tp with SP, /cp), or with scatter/gather a b*s*h/tp send plus the
        receiver's TP AllGather (Narayanan et al. 2021 sec. 4.1)."""
        key = (tp, sp, micro_batch, dp, pp, cp, scatter_gather)
        hit = self._p2ps.get(key)
        if hit is None:
            listed = self.tp_list_prices(tp, sp, micro_batch, "none", cp, scatter_gather)
            send = self.pricer.p2p_time_s(listed.boundary_bytes, self.shapes(tp, dp, pp, cp=cp)[Axis.PP].crosses_nodes)
            hit = self._p2ps[key] = send + listed.boundary_gather_s
        return hit

    def dp_list_prices(self, tp: int, pp: int, dp: int, zero: int, sp: bool, first_stage: bool, ep: int = 1,
                       cp: int = 1) -> DpPrices:
        """The DP items of the first (or the last) stage, see `dp_rank_prices`."""
        return self.dp_rank_prices(tp, pp, dp, zero, sp, 0 if first_stage else pp - 1, ep, cp)

    def dp_rank_prices(self, tp: int, pp: int, dp: int, zero: int, sp: bool, pp_rank: int, ep: int = 1,
                       cp: int = 1) -> DpPrices:
        """Price the DP items of one stage in the communication list of one micro-batch per step.

        With one micro-batch per step the lists of ZeRO 1, 2 and 3 hold the same collectives per
        unit (one ReduceScatter, one AllGather per pass), and for dense models the DP items do not
        depend on sequence parallelism (only the TP AllReduce of partial gradients does, which is
        absent without it): one list per (tp, pp, dp, zero 0 or >= 1) serves all of them. MoE
        routers' gradients are partial over tp with or without it, so MoE models get one list
        per sequence-parallel setting.
        """
        list_zero, moe = min(zero, 1), self.spec.moe is not None
        list_sp = sp if moe else tp > 1
        # A dense model's blocks are all alike, so its first and last stage are those of a copy
        # with 2 * layers/pp blocks on pp 2 (same units, shards and counts): a list of 2 ranks
        # instead of pp (the list's cost grows with its ranks and blocks).
        # (uneven splits: when the first and last stage hold the same blocks, `plan/stages.py`)
        counts = split_layers(self.spec.layers, pp)
        edge = not moe and pp > 2 and pp_rank in (0, pp - 1) and counts[0] == counts[-1]
        list_pp, list_rank = (2, min(pp_rank, 1)) if edge else (pp, pp_rank)

        def items():
            spec = self.spec.model_copy(update={"layers": 2 * counts[0]}) if edge else self.spec
            plan = Plan(tp=tp, pp=list_pp, dp=dp, ep=ep, cp=cp, micro_batch=self.training.global_batch // dp,
                        sequence_parallel=list_sp, zero=list_zero, recompute="none")
            return communication_list(spec, self.dp_training, plan)

        def price():
            listed = self._memo(("dp_items", tp, pp, dp, list_zero, list_sp, ep, cp, edge), items)
            return dp_prices(listed, self.pricer, self.shapes(tp, dp, pp, ep, cp), list_rank, list_zero)

        hit = self._memo(("dp_list", tp, pp, dp, list_zero, list_sp, ep, cp, pp_rank), price)
        return hit if sp or moe else hit._replace(partial_grads_s=0.0)
