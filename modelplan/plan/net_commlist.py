"""The communication list of a network (MLP, CNN, RNN) under a plan, as `CommItem`s.

The network counterpart of `plan/commlist.py` (same item type, same nccl-tests size
convention, same start-up items), derived from the stages and tensor-parallel roles of
`plan/net_layout.py` and the per-sample shapes of `count/network_layers.py`. Per micro-batch
(b samples) and stage, on every rank of the stage:

- tensor parallel: a row-parallel leaf all-reduces its output (b * numel(out)); a gather point
  all-gathers its output (b * numel(out), the gathered size); a column-parallel leaf
  all-reduces its input gradient in backward (b * numel(in)), except the network's first leaf.
- pipeline: the stage's output to the next stage in forward, the gradient of its input to the
  previous one in backward (b * numel each), and the matching receives.
- data parallel / ZeRO, per unit with parameters: AllReduce of the padded gradient buffer (zero
  0); ReduceScatter once (zero 1) or per micro-batch (zero 2, 3); AllGather of the parameters
  after the update (zero 1, 2) or before every forward and backward (zero 3).
- start-up: a Broadcast of every unit from the first data-parallel rank, then a Barrier.
"""

from __future__ import annotations

import math

from modelplan.comm.regions import Region
from modelplan.comm.ops import Axis, Collective
from modelplan.count.network_tree import leaves_of
from modelplan.plan.commlist import pipeline_calls
from modelplan.plan.parallel import dp_zero, pp as pp_mod
from modelplan.plan.parallel.calls import CommItem, RankCalls, merge_rank_calls
from modelplan.plan.net_layout import StagePlan
from modelplan.plan.net_shard import net_unit_shards
from modelplan.plan.net_tp import TpRole
from modelplan.plan.pipeline import ActionKind, pipeline_schedule
from modelplan.plan.stages import unit_replicas
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

AG, AR, BAR, P2P = Collective.ALL_GATHER, Collective.ALL_REDUCE, Collective.BARRIER, Collective.SEND_RECV


def tp_calls(stage: StagePlan, micro_batch: int) -> list[tuple[Collective, str, int, str]]:
    """(op, direction 'F'/'B', elements, label) of one micro-batch's tensor-parallel calls."""
    out = []
    for leaf in leaves_of(stage.nodes):
        r = stage.roles[leaf.path]
        if r.role is TpRole.ROW:
            out.append((AR, "F", micro_batch * math.prod(leaf.info.output_shape), f"tp/{leaf.path}/row"))
        if r.gather_after:
            out.append((AG, "F", micro_batch * math.prod(leaf.info.output_shape), f"tp/{leaf.path}/gather"))
        if r.role is TpRole.COLUMN and stage.needs_input_grad(leaf):
            out.append((AR, "B", micro_batch * math.prod(leaf.info.input_shape), f"tp/{leaf.path}/column-dx"))
    return out


def net_communication_list(stages: list[StagePlan], training: TrainingSpec, plan: Plan,
                           element_bytes: int | None = None) -> list[CommItem]:
    """Every communication call of one step (and of the start-up) under `plan`."""
    act = element_bytes or training.dtype_bytes
    grad = element_bytes or training.grad_bytes
    m = plan.num_microbatches(training.global_batch)
    b, tp, pp = plan.micro_batch, plan.tp, plan.pp
    schedule = pipeline_schedule(plan.schedule, pp, m, plan.vpp)
    last = schedule.num_stages - 1
    shards = net_unit_shards(stages, plan)
    replicas = unit_replicas([[u for v in chunks for u in stages[v].units] for chunks in schedule.layout.rank_stages])
    per_rank: list[RankCalls] = []
    for r in range(pp):
        calls = RankCalls()
        add = calls.add
        moves = pipeline_calls(schedule, r)
        for c, v in enumerate(schedule.layout.rank_stages[r]):
            st, mc = stages[v], schedule.microbatches(r, c)
            for op, _, elements, label in tp_calls(st, b):
                add(op, Axis.TP, tp, elements * act, mc, label)
            out_msg = b * math.prod(st.output_shape) * act
            in_msg = b * math.prod(st.input_shape) * act
            if v < last:
                add(P2P, Axis.PP, pp, out_msg, moves[c][ActionKind.SEND_F], Region.PP_FORWARD, role="send")
                add(P2P, Axis.PP, pp, out_msg, moves[c][ActionKind.RECV_B], Region.PP_BACKWARD, role="recv")
            if v > 0:
                add(P2P, Axis.PP, pp, in_msg, moves[c][ActionKind.RECV_F], Region.PP_FORWARD, role="recv")
                add(P2P, Axis.PP, pp, in_msg, moves[c][ActionKind.SEND_B], Region.PP_BACKWARD, role="send")
            for unit in st.units:
                if unit not in shards:
                    continue
                u = shards[unit]
                dp_zero.unit_calls(calls, u, plan.tp, plan.zero, mc, act, grad)  # partial_over_tp is 0 here
                if unit in replicas:
                    owned = u.padded if plan.zero == 0 else u.padded // u.group_size
                    pp_mod.replica_calls(calls, unit, len(replicas[unit]), owned * grad)
        add(BAR, Axis.WORLD, plan.world_size, 0, 1, Region.WORLD_START, startup=True)
        per_rank.append(calls)
    return merge_rank_calls(per_rank)
