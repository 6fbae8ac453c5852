"""Pipeline parallelism: stage-boundary messages, the bubble, and the copies of shared units.

What it adds (per stage boundary, as the schedule's lowered action list moves them, Megatron's
send_forward / send_backward): a send of the b*s*h activation (b*s/tp*h under sequence
parallelism) to the next stage and of its gradient to the previous one, and the matching
receives. With Megatron's scatter/gather (`Plan.pipeline_scatter_gather`; Narayanan et al.
2021, sec. 4.1) each TP rank sends b*s*h/tp and the receiving stage all-gathers the b*s*h tensor
over TP. A unit held by several pipeline ranks (the tied word embedding on the first and last
stage; every unit of a schedule that runs each stage on two ranks) has its gradient all-reduced
over those ranks after the data-parallel reduction (`plan.stages.unit_replicas`).

States it shards: the blocks, split over the schedule's stages (`plan/stages.py`).

Time (Narayanan et al. 2021, sec. 2.2): pipeline = m * t_max + bubble * t_mean, t one
micro-batch on a stage, the bubble read off the schedule's action list (`pipeline/profile.py`);
every boundary message on the critical path is exposed (`CostModel.pp_p2p_exposed_fraction`),
once per direction per chunk a micro-batch passes on the rank.
"""

from __future__ import annotations

from collections import defaultdict

from modelplan.comm.regions import Region
from modelplan.comm.ops import Axis, Collective
from modelplan.comm.topology import GroupShape
from modelplan.plan.commcost import CommPricer
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.pipeline import ActionKind, PipelineSchedule
from modelplan.plan.pipeline.actions import COMPUTE
from modelplan.plan.stages import replica_label

AG, AR, P2P = Collective.ALL_GATHER, Collective.ALL_REDUCE, Collective.SEND_RECV


def pipeline_calls(schedule: PipelineSchedule, pp_rank: int) -> dict[int, dict[ActionKind, int]]:
    """chunk -> SEND_F / RECV_F / SEND_B / RECV_B -> calls per step, from the lowered action list."""
    out: dict[int, dict[ActionKind, int]] = defaultdict(lambda: defaultdict(int))
    for a in schedule.lowered[pp_rank]:
        if a.kind not in COMPUTE:
            out[a.chunk][a.kind] += 1
    return out


def boundary_calls(calls: RankCalls, pp: int, tp: int, message_bytes: int, gathered_bytes: int | None,
                   moves: dict[ActionKind, int]) -> None:
    """One chunk's stage-boundary sends and receives (`moves`: count of each SEND/RECV action);
    `gathered_bytes` is the receiver's TP AllGather under scatter/gather (None: whole tensors)."""
    add = calls.add
    add(P2P, Axis.PP, pp, message_bytes, moves.get(ActionKind.SEND_F, 0), Region.PP_FORWARD, role="send")
    add(P2P, Axis.PP, pp, message_bytes, moves.get(ActionKind.RECV_B, 0), Region.PP_BACKWARD, role="recv")
    if gathered_bytes is not None:
        add(AG, Axis.TP, tp, gathered_bytes, moves.get(ActionKind.RECV_B, 0), Region.PP_BACKWARD_GATHER)
    add(P2P, Axis.PP, pp, message_bytes, moves.get(ActionKind.RECV_F, 0), Region.PP_FORWARD, role="recv")
    add(P2P, Axis.PP, pp, message_bytes, moves.get(ActionKind.SEND_B, 0), Region.PP_BACKWARD, role="send")
    if gathered_bytes is not None:
        add(AG, Axis.TP, tp, gathered_bytes, moves.get(ActionKind.RECV_F, 0), Region.PP_FORWARD_GATHER)


def replica_calls(calls: RankCalls, unit: str, copies: int, owned_bytes: int) -> None:
    """The AllReduce of a replicated unit's gradient (the part this rank owns after ZeRO)."""
    calls.add(AR, Axis.PP, copies, owned_bytes, 1, replica_label(unit))


def boundary_message(micro_batch: int, seq_len: int, hidden: int, tp: int, sp: bool, split: bool, act_bytes: int
                     ) -> tuple[int, int | None]:
    """(bytes one rank sends, bytes the receiver all-gathers or None) of one boundary tensor of a
    micro-batch of `seq_len` tokens per sequence on this rank (s/cp): b*s*h, b*(s/tp)*h under
    sequence parallelism, /tp again with scatter/gather (`split`)."""
    numel = micro_batch * (seq_len // tp if sp else seq_len) * hidden
    return ((numel // tp if split else numel) * act_bytes, numel * act_bytes if split else None)


def p2p_seconds(pricer: CommPricer, message_bytes: int, crosses_nodes: bool, gathered_bytes: int | None,
                tp_shape: GroupShape) -> float:
    """One boundary message: the send on the link between neighbouring stages, plus the
    receiver's TP AllGather under scatter/gather."""
    send = pricer.p2p_time_s(message_bytes, crosses_nodes)
    gather = pricer.time_s(AG, gathered_bytes, tp_shape) if gathered_bytes is not None else 0.0
    return send + gather


def pipeline_time_s(num_microbatches: int, bubble: float, t_max: float, t_mean: float) -> float:
    """m * t_max + bubble * t_mean: steady state on the slowest stage plus fill/drain, `bubble`
    being the schedule's idle time in micro-batch times (`pipeline.profile.bubble_microbatches`:
    (p-1)/v for Megatron's schedules, i.e. bubble fraction (p-1)/(v m); Narayanan et al. 2021)."""
    return num_microbatches * t_max + bubble * t_mean
