"""The communication list: every collective one training step under a plan performs, as data.

Derived from the plan and the model's shapes only (the planner prices it, `verify` compares it
with the ledger the executor keeps; the executor never reads it). Each item is one kind of call
made `count` times per step by each rank of the pipeline stages in `pp_ranks`:

- tensor parallel, per micro-batch and model chunk (Shoeybi et al. 2019; Korthikanti et al.
  2022): per block sub-layer (attention, MLP) an AllReduce of b*s*h in forward (g) and one in
  backward (f); with sequence parallelism an AllGather + ReduceScatter of the same size in each
  direction instead. The embedding leaves through g, the output head enters through f, and the
  vocabulary-parallel loss combines per-token max (AllGather), target logit and sum of
  exponentials (AllReduce, b*s each). Full recompute repeats every block's forward calls.
- expert parallel: per MoE layer and micro-batch, AllToAll dispatch and combine in forward and
  in backward (and again in the recompute forward), each of num_experts * capacity * h elements
  (`plan/experts.py`: capacity = b*s token slots per expert for the executor's dense dispatch,
  ceil(cf * b*s * top_k / num_experts) when `capacity_factor` is given, as the planner does).
- pipeline: per micro-batch and chunk, a send of b*s*h (b*s/tp*h under sequence parallelism)
  to the next stage in forward and to the previous one in backward, and the matching receives;
  with Megatron's scatter/gather (`Plan.pipeline_scatter_gather`: tp > 1, no sequence
  parallelism; Narayanan et al. 2021 sec. 4.1) the send is b*s*h/tp and the receiving stage
  all-gathers the b*s*h tensor over TP.
- context parallel (planner only: the executor refuses cp > 1): every rank holds s/cp tokens of
  each sequence, so every activation message above is b*(s/cp)*h; per block and micro-batch the
  K and V blocks (2*b*(s/cp)*kv_width/tp) travel the cp ring in cp - 1 send/recv steps in forward
  (again in the recompute forward) and in backward, where the dK, dV accumulators travel with
  them (ring attention, Liu et al. 2023; Megatron-core/TE cp_comm_type 'p2p'). The forward's
  (cp-1)/cp * 2*b*s*kv_width/tp per rank is the volume of an AllGather of K and V.
- data parallel / ZeRO, per unit (see `plan/shard.py` for units and padding; the group is the
  dp*cp ranks, or dp*cp/ep for routed experts, Megatron's data-parallel group with cp): AllReduce of the
  gradients (zero 0); ReduceScatter once (zero 1) or per micro-batch (zero 2, 3); AllGather of
  the parameters after the update (zero 1, 2) or before every forward and backward (zero 3).
  Gradients that are partial sums over tp are all-reduced over tp first; the tied word
  embedding's gradient is all-reduced between the first and last stage.
- start-up: a Broadcast of every unit from the first data-parallel rank, then a Barrier.

`nbytes` follows the nccl-tests size convention (AllReduce/Broadcast/send: the buffer;
AllGather: the gathered output; ReduceScatter: the input; AllToAll: the whole send buffer).
Activations use the compute dtype, gradients the grad dtype, the loss's per-token values fp32,
unless `element_bytes` fixes one size for all (the float64 executor: 8).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from pydantic import BaseModel, ConfigDict

from modelplan.comm.ops import Algo, Axis, Collective
from modelplan.plan.experts import expert_capacity
from modelplan.plan.kernels import local_kv_heads
from modelplan.plan.pipeline import ActionKind, PipelineSchedule, pipeline_schedule
from modelplan.plan.pipeline.actions import COMPUTE
from modelplan.plan.shard import UnitShard, unit_shards
from modelplan.plan.stages import rank_units, replica_label, stage_layers, stage_units, unit_replicas
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

A2A, AG, AR, BC, BAR, RS, P2P = (Collective.ALL_TO_ALL, Collective.ALL_GATHER, Collective.ALL_REDUCE,
                                 Collective.BROADCAST, Collective.BARRIER, Collective.REDUCE_SCATTER,
                                 Collective.SEND_RECV)

EXECUTOR_ALGO: dict[Collective, Algo] = {
    AR: Algo.RING, AG: Algo.RING, RS: Algo.RING, BC: Algo.BINOMIAL, Collective.REDUCE: Algo.BINOMIAL,
    A2A: Algo.PAIRWISE, P2P: Algo.DIRECT, BAR: Algo.DISSEMINATION,
}
"""The algorithm the executor's communicator runs for each operation (modelplan.execute.collectives);
the bytes each rank moves in one call of an item are `modelplan.comm.exact.bytes_per_rank` of it."""


class CommItem(BaseModel):
    """One kind of communication call in a training step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Collective
    axis: Axis
    group_size: int
    nbytes: int
    """Message size in the nccl-tests convention."""
    count: int
    """Calls per step by each rank of `pp_ranks` (start-up items: once per run)."""
    label: str
    overlappable: bool
    """Can hide behind compute (DP gradient reduction, ZeRO parameter prefetch/gather)."""
    pp_ranks: tuple[int, ...]
    """Pipeline ranks whose ranks make this call."""
    startup: bool = False
    """Done once before training (weight Broadcast, Barrier), not every step."""
    root: int | None = None
    """Group rank of the root (Broadcast)."""
    role: Literal["send", "recv"] | None = None
    """Side of a point-to-point transfer (price the sends; receives mirror them)."""


class RankCalls:
    """One pipeline rank's calls, counted by kind (a CommItem's fields but `count` and `pp_ranks`)."""

    def __init__(self) -> None:
        self.counts: dict[tuple, int] = defaultdict(int)

    def add(self, op: Collective, axis: Axis, size: int, nbytes: int, count: int, label: str,
            overlap: bool = False, startup: bool = False, root: int | None = None,
            role: Literal["send", "recv"] | None = None) -> None:
        """Count `count` calls of one kind; calls in a group of one rank and zero counts are dropped."""
        if size > 1 and count:
            self.counts[(op, axis, size, nbytes, label, overlap, startup, root, role)] += count


def add_unit_calls(calls: RankCalls, u: UnitShard, plan: Plan, m: int, param: int, grad: int) -> None:
    """A unit's data-parallel calls (module docstring): start-up Broadcast, the tp AllReduce of its
    partial-sum gradients, then the ZeRO gradient reduction and parameter gather; `param` and
    `grad` are bytes per element, `m` the micro-batches per step."""
    D, P = u.group_size, u.padded
    calls.add(BC, Axis.DP, D, u.numel * param, 1, "dp/broadcast", startup=True, root=0)
    per_mb = plan.zero >= 2
    if u.partial_over_tp:
        calls.add(AR, Axis.TP, plan.tp, u.partial_over_tp * grad, m if per_mb else 1, "tp/partial-grads")
    if plan.zero == 0:
        calls.add(AR, Axis.DP, D, P * grad, 1, "dp/grads", overlap=True)
    else:
        calls.add(RS, Axis.DP, D, P * grad, m if per_mb else 1, "dp/grads", overlap=True)
        calls.add(AG, Axis.DP, D, P * param, 2 * m if plan.zero == 3 else 1, "dp/params", overlap=True)


def merge_rank_calls(per_rank: list[RankCalls]) -> list[CommItem]:
    """One CommItem per kind of call and count, listing the pipeline ranks that make it."""
    merged: dict[tuple, list[int]] = defaultdict(list)
    for r, calls in enumerate(per_rank):
        for key, count in calls.counts.items():
            merged[(*key, count)].append(r)
    fields = ("op", "axis", "group_size", "nbytes", "label", "overlappable", "startup", "root", "role", "count")
    return [CommItem(**dict(zip(fields, key)), pp_ranks=tuple(ranks)) for key, ranks in merged.items()]


def _sizes(spec: TransformerSpec, training: TrainingSpec, element_bytes: int | None) -> tuple[int, int, int]:
    """(activation, gradient, loss-value) bytes per element."""
    if element_bytes is not None:
        return element_bytes, element_bytes, element_bytes
    return training.dtype_bytes, training.grad_bytes, 4


def pipeline_calls(schedule: PipelineSchedule, pp_rank: int) -> dict[tuple[int, ActionKind], int]:
    """(chunk, SEND_F / RECV_F / SEND_B / RECV_B) -> calls per step, from the lowered action list."""
    out: dict[tuple[int, ActionKind], int] = defaultdict(int)
    for a in schedule.lowered[pp_rank]:
        if a.kind not in COMPUTE:
            out[(a.chunk, a.kind)] += 1
    return out


def communication_list(spec: TransformerSpec, training: TrainingSpec, plan: Plan,
                       element_bytes: int | None = None, capacity_factor: float | None = None) -> list[CommItem]:
    """Every communication call of one step (and of the start-up) under `plan`.

    `capacity_factor` sizes the MoE dispatch buffers (None: the executor's one slot per local
    token per expert; see `plan/experts.py`)."""
    act, grad, loss_b = _sizes(spec, training, element_bytes)
    param = act
    m = plan.num_microbatches(training.global_batch)
    b, s, h, tp, pp, vpp = plan.micro_batch, training.seq_len // plan.cp, spec.hidden, plan.tp, plan.pp, plan.vpp
    recompute = (plan.recompute or training.recompute) == "full"
    sp = plan.sequence_parallel
    tokens = b * s  # this rank's tokens of the micro-batch (s is the local sequence s/cp)
    kv = 2 * tokens * local_kv_heads(spec.num_kv_heads, tp) * spec.dim_head * act  # K and V blocks
    schedule = pipeline_schedule(plan.schedule, pp, m, vpp)
    num_stages = schedule.num_stages
    last = num_stages - 1
    units = stage_units(spec, num_stages)
    held = rank_units(spec, schedule.layout)
    replicas = unit_replicas(held)
    shards = unit_shards(spec, plan)
    per_rank: list[RankCalls] = []
    for r in range(pp):
        calls = RankCalls()
        add = calls.add
        p2p = pipeline_calls(schedule, r)
        uses: dict[str, int] = defaultdict(int)  # micro-batches whose backward touches each unit
        for c, v in enumerate(schedule.layout.rank_stages[r]):
            for unit in units[v]:
                uses[unit] += schedule.microbatches(r, c)
        placed: set[str] = set()
        for c, v in enumerate(schedule.layout.rank_stages[r]):
            mc = schedule.microbatches(r, c)  # micro-batches through this chunk (m, or m/2 for DualPipe)
            layers = stage_layers(spec.layers, num_stages, v)
            moe_layers = sum(spec.is_moe_layer(i) for i in layers)
            A = tokens * h * act  # one (b, s, h) activation
            # tensor parallel: (op, label) per direction, Megatron f/g or the sequence-parallel pair
            g_fwd, g_bwd, f_fwd, f_bwd = (RS, AG, AG, RS) if sp else (AR, None, None, AR)
            per_sublayer = [(f_fwd, "in"), (g_fwd, "out")]
            fwd_runs = mc * (2 if recompute else 1)
            for sub in ("attention", "mlp"):
                for op, where in per_sublayer:
                    if op is not None:
                        add(op, Axis.TP, tp, A, fwd_runs * len(layers), f"tp/{sub}/{where}")
                add(f_bwd, Axis.TP, tp, A, mc * len(layers), f"tp/{sub}/in")
                if g_bwd is not None:
                    add(g_bwd, Axis.TP, tp, A, mc * len(layers), f"tp/{sub}/out")
            if v == 0:
                add(g_fwd, Axis.TP, tp, A, mc, "tp/embedding")
                if g_bwd is not None:
                    add(g_bwd, Axis.TP, tp, A, mc, "tp/embedding")
            if v == last:
                if f_fwd is not None:
                    add(f_fwd, Axis.TP, tp, A, mc, "tp/lm-head/in")
                add(f_bwd, Axis.TP, tp, A, mc, "tp/lm-head/in")
                add(AG, Axis.TP, tp, tp * tokens * loss_b, mc, "tp/cross-entropy/max")
                add(AR, Axis.TP, tp, tokens * loss_b, mc, "tp/cross-entropy/target")
                add(AR, Axis.TP, tp, tokens * loss_b, mc, "tp/cross-entropy/sum")
            # expert parallel: dispatch + combine, forward (again under recompute) and backward
            if spec.moe is not None:
                capacity = expert_capacity(tokens, spec.moe, capacity_factor)
                a2a = spec.moe.num_experts * capacity * h * act  # (E, capacity, h) buffer
                for label in ("ep/dispatch", "ep/combine"):
                    add(A2A, Axis.EP, plan.ep, a2a, (fwd_runs + mc) * moe_layers, label)
            # context parallel: K, V around the ring (forward, recompute, backward) and dK, dV (backward)
            ring = (plan.cp - 1) * len(layers)
            for role in ("send", "recv"):
                add(P2P, Axis.CP, plan.cp, kv, (fwd_runs + mc) * ring, "cp/attention/kv", role=role)
                add(P2P, Axis.CP, plan.cp, kv, mc * ring, "cp/attention/dkv", role=role)
            # pipeline: activations forward, gradients backward, as the lowered schedule moves them;
            # with scatter/gather each TP rank sends its 1/tp chunk and the receiver all-gathers them
            numel = b * (s // tp if sp else s) * h
            split = plan.pipeline_scatter_gather(numel)
            msg = (numel // tp if split else numel) * act
            add(P2P, Axis.PP, pp, msg, p2p[(c, ActionKind.SEND_F)], "pp/forward", role="send")
            add(P2P, Axis.PP, pp, msg, p2p[(c, ActionKind.RECV_B)], "pp/backward", role="recv")
            if split:
                add(AG, Axis.TP, tp, numel * act, p2p[(c, ActionKind.RECV_B)], "pp/backward/gather")
            add(P2P, Axis.PP, pp, msg, p2p[(c, ActionKind.RECV_F)], "pp/forward", role="recv")
            add(P2P, Axis.PP, pp, msg, p2p[(c, ActionKind.SEND_B)], "pp/backward", role="send")
            if split:
                add(AG, Axis.TP, tp, numel * act, p2p[(c, ActionKind.RECV_F)], "pp/forward/gather")
            # data parallel / ZeRO, unit by unit (a unit two chunks share is placed once)
            for unit in units[v]:
                if unit not in shards or unit in placed:
                    continue
                placed.add(unit)
                u = shards[unit]
                add_unit_calls(calls, u, plan, uses[unit], param, grad)
                if unit in replicas and r in replicas[unit]:
                    owned = u.padded if plan.zero == 0 else u.padded // u.group_size
                    add(AR, Axis.PP, len(replicas[unit]), owned * grad, 1, replica_label(unit))
        add(BAR, Axis.WORLD, plan.world_size, 0, 1, "world/start", startup=True)
        per_rank.append(calls)
    return merge_rank_calls(per_rank)
