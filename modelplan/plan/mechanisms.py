"""The evaluator's side of the wider search: TP overlap GEMM shares, ZeRO++ traffic, offload time and
memory, and the one-line explanation of each choice a plan makes.

The formulas live in `modelplan.comm` (tp_overlap, dp_overlap, offload, hierarchy, fabric) and
`plan/placement.py`; this module feeds them the evaluator's cached stage terms and parameter
counts, as plain floats.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, NamedTuple

from modelplan.comm.dp_overlap import megatron_bucket_params
from modelplan.comm.hierarchy import zeropp_calls, zeropp_secondary_bytes
from modelplan.comm.offload import RESIDENT_LAYERS, Offload, activation_offload, host_problem, optimizer_offload
from modelplan.comm.ops import Axis, Collective
from modelplan.plan.dims import shape
from modelplan.plan.placement import strides

if TYPE_CHECKING:  # the evaluator imports this module
    from modelplan.plan.evaluator import Evaluator, StageEntry

_OPS = {"all_gather": Collective.ALL_GATHER, "reduce_scatter": Collective.REDUCE_SCATTER,
        "all_to_all": Collective.ALL_TO_ALL, "all_reduce": Collective.ALL_REDUCE}


class HostNeed(NamedTuple):
    """Host memory and NVMe one GPU's offload needs."""

    host_bytes: float
    nvme_bytes: float


class Mechanisms:
    """Offload, ZeRO++ and TP-overlap terms for one evaluator (caches nothing it cannot key)."""

    def __init__(self, ev: "Evaluator") -> None:
        self.ev = weakref.proxy(ev)  # no reference cycle: the evaluator's caches go with it
        self.sm_count = ev.cluster.accelerator.sm_count or 0
        self._shares: dict[bool, dict[str, float]] = {}
        self._act: dict[int, float] = {}
        self._opt: dict[tuple, float] = {}

    # -- TP overlap -----------------------------------------------------------------------------

    def gemm_shares(self, moe: bool) -> dict[str, float]:
        """Share of a block's linear forward GEMM time each linear takes (by FLOPs: QKV h(q + 2kv),
        projection q h, FC1 h f (2 h f gated), FC2 f h; MoE: f of the routed top_k experts)."""
        hit = self._shares.get(moe)
        if hit is None:
            spec = self.ev.spec
            h, q, kv = spec.hidden, spec.q_width, spec.kv_width
            f = spec.ffn_hidden
            if moe and spec.moe is not None:
                f = spec.moe.expert_ffn_hidden * spec.moe.top_k
            fc1 = h * f * (2 if spec.gated_mlp else 1)
            parts = {"qkv": h * (q + 2 * kv), "proj": q * h, "fc1": fc1, "fc2": f * h}
            total = sum(parts.values())
            hit = self._shares[moe] = {k: v / total for k, v in parts.items()}
        return hit

    # -- data parallel: placement stride, ZeRO++ ----------------------------------------------

    @staticmethod
    def dp_stride(tp: int, dp: int, pp: int, cp: int, order: str) -> int:
        """Rank distance between neighbouring data-parallel ranks under `order`."""
        return strides(order, tp, cp, dp, pp)["dp"]

    def zeropp_entry(self, entry, tp: int, pp: int, dp: int, cp: int, params: tuple[int, int], order: str):
        """`entry` (a DpEntry) with ZeRO-3's gathers and ReduceScatter replaced by ZeRO++'s
        (`comm/hierarchy.py`): qwZ forward gather over the dp group, hpZ backward gather and qgZ's
        first all-to-all inside the node's ranks of the group, the second across nodes."""
        ev = self.ev
        dp_shape = ev.shapes(tp, dp, pp, 1, cp, order)[Axis.DP]
        g = dp_shape.ranks_per_node
        groups = {"dp": dp_shape, "shard": shape(g, g), "replica": shape(max(1, dp_shape.size // g), 1)}
        calls = zeropp_calls(float(sum(params)), ev.dtype_bytes, 1)

        def one(call) -> float:
            return ev.pricer.time_s(_OPS[call.op], int(call.nbytes), groups[call.group])

        fwd, bwd, grads = one(calls[0]), one(calls[1]), sum(one(c) for c in calls[2:])
        t = entry.times
        scale_ag = fwd / t.all_gather if t.all_gather > 0 else 1.0
        scale_rs = grads / t.reduce_scatter if t.reduce_scatter > 0 else 1.0
        times = t._replace(all_gather=fwd, all_gather_bucket=t.all_gather_bucket * scale_ag,
                           all_gather_block=t.all_gather_block * scale_ag, reduce_scatter=grads,
                           reduce_scatter_bucket=t.reduce_scatter_bucket * scale_rs, all_gather_bwd=bwd)
        return entry._replace(times=times)

    def zeropp_bytes(self, tp: int, dp: int, pp: int, cp: int, order: str, params: float) -> float:
        """hpZ's secondary weight shard on one GPU (over the node's ranks of the dp group)."""
        g = self.ev.shapes(tp, dp, pp, 1, cp, order)[Axis.DP].ranks_per_node
        return zeropp_secondary_bytes(params, self.ev.dtype_bytes, g)

    # -- offload --------------------------------------------------------------------------------

    def sharded_params(self, tp: int, pp: int, dp: int, zero: int, ep: int, cp: int, schedule: str, vpp: int,
                       rank: int) -> float:
        """Parameters whose optimizer state pipeline rank `rank`'s GPU holds (its ZeRO shard)."""
        dense, experts = self.ev.held.rank_params(tp, pp, ep, schedule, vpp)[0][rank]
        if zero == 0:
            return float(dense + experts)
        return dense / (dp * cp) + experts * ep / (dp * cp)

    def optimizer_offload(self, stage: "StageEntry", tp: int, pp: int, dp: int, zero: int, ep: int, cp: int,
                          schedule: str, vpp: int, device: str, m: int = 1) -> Offload:
        """ZeRO-Offload / ZeRO-Infinity of the critical rank's optimizer (`comm/offload.py`).
        ZeRO >= 2 drains each micro-batch's gradient shard to the host beside its backward
        (DeepSpeed accumulates on the host); ZeRO 0/1 keep the gradients on the GPU and copy the
        (sharded) result once, beside the last backward."""
        ev, rank = self.ev, stage.terms.critical_rank
        params = self.sharded_params(tp, pp, dp, zero, ep, cp, schedule, vpp, rank)
        copies = m if zero >= 2 else 1
        return optimizer_offload(params, ev.dtype_bytes, ev.grad_bytes, ev.state_bytes, ev.host, stage.terms.bwd_s,
                                 device, copies)

    def optimizer_offload_s(self, stage: "StageEntry", point, m: int, device: str) -> float:
        """Exposed seconds per step of offloading a point's optimizer to `device` (cached)."""
        tp, pp, dp, vpp, mb, schedule, sp, rc, zero, ep, cp = point[:11]
        key = (id(stage), dp, zero, device, m)
        hit = self._opt.get(key)
        if hit is None:
            hit = self._opt[key] = self.optimizer_offload(stage, tp, pp, dp, zero, ep, cp, schedule, vpp,
                                                          device, m).exposed_s
        return hit

    def activation_offload_s(self, stage: "StageEntry") -> float:
        """Exposed seconds per micro-batch of offloading the critical rank's block activations
        (cached per stage entry, which lives as long as the evaluator)."""
        hit = self._act.get(id(stage))
        if hit is None:
            rb = stage.blocks[stage.terms.critical_rank]
            t = stage.dense
            hit = self._act[id(stage)] = activation_offload(t.activation_bytes, rb.dense + rb.moe, self.ev.host,
                                                            t.layer_fwd_s, t.layer_bwd_s, 1, 1).exposed_s
        return hit

    def offloaded_states(self, states: tuple[float, float, float], dp: int, zero: int) -> tuple[float, float, float]:
        """Model states left on the GPU when the optimizer lives on the host: the weights, and the
        gradients (ZeRO 0/1, which accumulate them on the GPU) or one gradient bucket (ZeRO >= 2,
        drained to the host per micro-batch; Megatron-core's bucket size)."""
        weights, gradients, _ = states
        if zero < 2:
            return weights, gradients, 0.0
        bucket = megatron_bucket_params(dp) * self.ev.grad_bytes
        return weights, min(gradients, float(bucket)), 0.0

    def host_need(self, stage: "StageEntry", tp: int, pp: int, dp: int, zero: int, ep: int, cp: int, schedule: str,
                  vpp: int, opt: str, act: bool, inflight: float) -> HostNeed:
        """Host memory and NVMe per GPU of a plan's offload (the largest pipeline rank's)."""
        host = nvme = 0.0
        if opt != "none" and self.ev.host is not None:
            o = self.optimizer_offload(stage, tp, pp, dp, zero, ep, cp, schedule, vpp, opt)
            host, nvme = o.host_bytes, o.nvme_bytes
        if act:
            rb = stage.blocks[0]
            host += max(0, rb.dense + rb.moe - RESIDENT_LAYERS) * stage.dense.activation_bytes * inflight
        return HostNeed(host, nvme)

    def host_problem(self, need: HostNeed) -> str | None:
        """Why the host cannot hold a plan's offload, or None."""
        if need.host_bytes == 0.0 and need.nvme_bytes == 0.0:
            return None
        return host_problem(need.host_bytes, need.nvme_bytes, self.ev.host)


def mechanism_notes(ev: "Evaluator", plan, step, memory) -> list[str]:
    """One line per overlap / offload / sharding / placement choice of a plan: what it does and
    what it costs or saves (`modelplan plan --explain`, the best plan's notes)."""
    notes = []
    mode = ev.resolved_tp_overlap(plan.tp_overlap, plan.sequence_parallel, plan.tp)
    if plan.tp > 1:
        if mode == "none":
            notes.append(f"tp overlap none: TP collectives exposed ({step.tp_comm_s:.3f} s per step)")
        else:
            how = ("ring exchange of every AllGather / ReduceScatter in tp chunks by copy engines (async TP, TE "
                   "ring_exchange)" if mode == "ring" else
                   f"TE userbuffers defaults: ring exchange for AllGathers, ReduceScatters pipelined in 4 chunks and "
                   f"backward bulk overlap on 16 of {ev.mech.sm_count} SMs (the GEMMs slowed meanwhile)")
            notes.append(f"tp overlap {mode}: {how}; {step.tp_hidden_s:.3f} s hidden, {step.tp_comm_s:.3f} s exposed")
    if plan.dp * plan.cp > 1:
        on = ev.cost.dp_overlap if plan.dp_overlap is None else plan.dp_overlap
        notes.append(f"dp overlap {'on' if on else 'off'}: {step.dp_comm_s:.3f} of {step.dp_comm_total_s:.3f} s DP "
                     "traffic exposed" + (" (the last gradient bucket and the first parameter bucket always are)"
                                          if on else ""))
    if plan.fsdp_shard_size:
        notes.append(f"HSDP: states sharded over {plan.fsdp_shard_size} data-parallel ranks, replicated over "
                     f"{plan.dp * plan.cp // plan.fsdp_shard_size}; gathers and ReduceScatters stay in the shard group, "
                     "each gradient shard is all-reduced across the replicas")
    if plan.zeropp:
        notes.append("ZeRO++: int8 weight gathers (qwZ), backward gathers from a secondary weight shard inside the "
                     "node (hpZ, held in HBM), int4 gradient all-to-all (qgZ)")
    if plan.offload_optimizer != "none" or plan.offload_activations:
        stage = ev.stage_entry(plan.tp, plan.sequence_parallel, plan.micro_batch, plan.recompute or ev.training.recompute, plan.pp, plan.ep,
                               plan.cp, plan.schedule, plan.vpp, None, plan.stage_split)
        m = plan.num_microbatches(ev.training.global_batch)
        need = ev.mech.host_need(stage, plan.tp, plan.pp, plan.dp, plan.zero, plan.ep, plan.cp, plan.schedule,
                                 plan.vpp, plan.offload_optimizer, plan.offload_activations,
                                 ev.inflight(plan.schedule, plan.pp, m, plan.vpp)[0])
        host = ev.host
        where = (f"{need.host_bytes / 1e9:.1f} of {host.memory_bytes / 1e9:.1f} GB host memory per GPU"
                 if host is not None else "no host stated")
        what = [f"optimizer on the host ({plan.offload_optimizer}: master weights and states, CPU Adam)"
                if plan.offload_optimizer != "none" else "",
                "saved activations of all but 2 blocks to host memory" if plan.offload_activations else ""]
        pcie = f", PCIe {host.pcie_Bps / 1e9:.1f} GB/s per GPU" if host is not None else ""
        notes.append(f"offload: {'; '.join(w for w in what if w)}; {where}{pcie}; {step.offload_s:.3f} s exposed")
    if step.host_s > 0:  # plan/host_issue.py
        notes.append(f"EP overlap host-bound: the merged forward / backward block pairs wait for the host once per "
                     f"MoE block; {step.host_s:.3f} s of host issue beyond the GPU's at "
                     f"{ev.cost.ep_overlap_host_op_us:g} us per host op (CALIBRATED on Megatron-Bridge PR #1760)")
    if plan.rank_order != "tp-cp-dp-pp" or plan.pp > 1:
        shapes = ev.shapes(plan.tp, plan.dp, plan.pp, plan.ep, plan.cp, plan.rank_order, plan.etp)
        parts = [f"{a.value} {s.ranks_per_node}/node over {s.nodes} node{'s' if s.nodes > 1 else ''}"
                 for a, s in shapes.items() if isinstance(a, Axis) and s.size > 1]
        notes.append(f"rank order {plan.rank_order}: " + ", ".join(parts))
    return notes
