"""The communication list of a network (MLP, CNN, RNN) under a plan, as `CommItem`s.

The network counterpart of `plan/commlist.py` (same item type, same nccl-tests size
convention, same start-up items, each parallelism's calls from its module in `plan/parallel/`:
`tp.leaf_calls`, `pp.boundary_calls` / `pp.replica_calls`, `dp_zero.unit_calls`), derived from the stages and tensor-parallel roles of
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
from modelplan.plan.parallel import dp_zero, pp as pp_mod, tp as tp_mod
from modelplan.plan.parallel.calls import CommItem, RankCalls, merge_rank_calls
from modelplan.plan.net_layout import StagePlan
from modelplan.plan.net_shard import net_unit_shards
from modelplan.plan.pipeline import ActionKind, pipeline_schedule
from modelplan.plan.stages import unit_replicas
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

BAR = Collective.BARRIER


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
        moves = pp_mod.pipeline_calls(schedule, r)
        for c, v in enumerate(schedule.layout.rank_stages[r]):
            st, mc = stages[v], schedule.microbatches(r, c)
            tp_mod.leaf_calls(calls, st, tp, b, act, mc)
            sent = moves[c]  # a stage's output goes forward, its input's gradient back
            if v < last:
                pp_mod.boundary_calls(calls, pp, tp, b * math.prod(st.output_shape) * act, None,
                                      {k: sent[k] for k in (ActionKind.SEND_F, ActionKind.RECV_B)})
            if v > 0:
                pp_mod.boundary_calls(calls, pp, tp, b * math.prod(st.input_shape) * act, None,
                                      {k: sent[k] for k in (ActionKind.RECV_F, ActionKind.SEND_B)})
            for unit in st.units:
                if unit not in shards:
                    continue
                u = shards[unit]
                dp_zero.unit_calls(calls, u, plan.tp, plan.zero, mc, act, grad)  # partial_over_tp is 0 here
                if unit in replicas:
                    owned = u.padded if plan.zero == 0 else u.padded // u.group_size
                    pp_mod.replica_calls(calls, unit, len(replicas[unit]), owned * grad)
        calls.add(BAR, Axis.WORLD, plan.world_size, 0, 1, Region.WORLD_START, startup=True)
        per_rank.append(calls)
    return merge_rank_calls(per_rank)
