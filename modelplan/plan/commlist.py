"""The communication list: every collective one training step under a plan performs, as data.

Derived from the plan, the model's shapes and the pipeline schedule's action list only (the
planner prices the same calls, `verify` compares the list with the ledger the executor keeps;
the executor never reads it). Each item is one kind of call made `count` times per step by each
rank of the pipeline stages in `pp_ranks`. What each parallelism adds is its own module's, here
only multiplied by the blocks, units and micro-batches of every pipeline rank and chunk:

- tensor parallel (`parallel/tp.py`, `sp.py`): per block sub-layer f and g in forward, recompute
  (every block, or the first N of each chunk under Megatron-core's block method) and backward (the last stage's MTP blocks included), the statistics of a q/k norm over all
  heads; the embedding's g (and each MTP module's lookup); the head's f and the vocab-parallel
  loss (once more per MTP module);
- expert parallel (`parallel/ep.py`): dispatch and combine per MoE block (DeepEP's deduplicated bytes,
  `plan/deepep.py`, under `moe_flex_dispatcher = "deepep"`);
- context parallel (`parallel/cp.py`; the executor runs each type, `execute/context_parallel.py`): per block the
  engine's exchange (`TrainingSpec.cp_comm_type`: ring steps, AllGather / ReduceScatter, or
  AllToAll); every activation above is b*(s/cp)*h, s the tokens per sequence of the block's
  stack (an encoder-decoder's decoder blocks and head: the target length, `plan/stack_lengths.py`);
- pipeline (`parallel/pp.py`): the sends and receives of the lowered action list, Megatron's
  scatter/gather AllGather, and the AllReduce of units held by several pipeline ranks;
- data parallel / ZeRO (`parallel/dp_zero.py`): per unit (`plan/shard.py`) the start-up
  Broadcast, the TP AllReduce of partial gradients, the gradient reduction and parameter gather;
- start-up: a Barrier over the world.

Activations use the compute dtype, gradients the grad dtype, the loss's per-token values fp32,
unless `element_bytes` fixes one size for all (the float64 executor: 8).
"""

from __future__ import annotations

from collections import defaultdict

from modelplan.comm.regions import Region
from modelplan.comm.ops import Axis, Collective
from modelplan.count.blocks import mtp_block
from modelplan.count.hyperconn import residual_width
from modelplan.count.recompute_layers import full_recompute
from modelplan.plan.block_passes import block_runs
from modelplan.plan.deepep import exchange_bytes
from modelplan.plan.engine import engine_settings
from modelplan.plan.experts import expert_capacity
from modelplan.plan.fp8 import param_gather_bytes
from modelplan.plan.parallel import cp as cp_mod, dp_zero, ep as ep_mod, pp as pp_mod, tp as tp_mod
from modelplan.plan.parallel.calls import EXECUTOR_ALGO, CommItem, RankCalls, merge_rank_calls
from modelplan.plan.parallel.pp import pipeline_calls
from modelplan.plan.pipeline import pipeline_schedule
from modelplan.plan.stack_lengths import stack_lengths
from modelplan.plan.shard import unit_shards
from modelplan.plan.stages import rank_units, stage_layers, stage_units, unit_replicas
from modelplan.specs.load import load_engine
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

__all__ = ["EXECUTOR_ALGO", "CommItem", "communication_list", "pipeline_calls"]


def _sizes(training: TrainingSpec, element_bytes: int | None) -> tuple[int, int, int]:
    """(activation, gradient, loss-value) bytes per element."""
    if element_bytes is not None:
        return element_bytes, element_bytes, element_bytes
    return training.dtype_bytes, training.grad_bytes, tp_mod.LOSS_VALUE_BYTES


def _stack_sizes(spec: TransformerSpec, plan: Plan, seq_len: int, act: int) -> tuple[int, int, int, int]:
    """(tokens, activation bytes, CP K/V bytes, CP query bytes) of this rank's share of a
    micro-batch of sequences of `seq_len` tokens (s/cp of each)."""
    tokens = plan.micro_batch * (seq_len // plan.cp)
    kv = cp_mod.kv_bytes(tokens, tp_mod.local_kv_heads(spec.num_kv_heads, plan.tp), spec.dim_head, act)
    return tokens, tokens * spec.hidden * act, kv, cp_mod.q_bytes(tokens, spec.heads // plan.tp, spec.dim_head, act)


def communication_list(spec: TransformerSpec, training: TrainingSpec, plan: Plan,
                       element_bytes: int | None = None, capacity_factor: float | None = None,
                       gpus_per_node: int | None = None) -> list[CommItem]:
    """Every communication call of one step (and of the start-up) under `plan`.

    `capacity_factor` sizes the MoE dispatch buffers (None: the executor's one slot per local
    token per expert; see `plan/experts.py`). `gpus_per_node` (the cluster's) is needed only under
    DeepEP, whose exchange counts destination ranks inside a node and nodes across them."""
    act, grad, loss_b = _sizes(training, element_bytes)
    m = plan.num_microbatches(training.global_batch)
    b, s, h, tp, pp, vpp = plan.micro_batch, training.seq_len // plan.cp, spec.hidden, plan.tp, plan.pp, plan.vpp
    recompute = (plan.recompute or training.recompute) == "full"
    sp = plan.sequence_parallel
    lengths = stack_lengths(spec, training)
    sizes = {n: _stack_sizes(spec, plan, n, act) for n in set(lengths)}  # per stack's tokens per sequence
    tokens, A = sizes[lengths.source][:2]  # this rank's tokens of the micro-batch, one (b, s/cp, h) activation
    head_tokens, head_A = sizes[lengths.target][:2]
    software = engine_settings(training, load_engine(training.framework))
    width = residual_width(spec)  # h, or n h with hyper-connections (count/hyperconn.py)
    numel = b * (s // tp if sp else s) * width  # one stage-boundary tensor
    message, gathered = pp_mod.boundary_message(b, s, width, tp, sp, plan.pipeline_scatter_gather(numel), act)
    schedule = pipeline_schedule(plan.schedule, pp, m, vpp)
    num_stages = schedule.num_stages
    last = num_stages - 1
    units = stage_units(spec, num_stages, plan.stage_split)
    replicas = unit_replicas(rank_units(spec, schedule.layout, plan.stage_split))
    shards = unit_shards(spec, plan, training.framework)
    sp_dispatch = spec.moe is not None and ep_mod.sequence_parallel_dispatch(tp, sp, plan.ep, plan.etp)
    # the routed experts' f / g: none under sequence-parallel dispatch (a shared expert keeps its own)
    moe_mlp_tp = (None if spec.moe.shared_experts else 1) if sp_dispatch else None
    per_rank: list[RankCalls] = []
    for r in range(pp):
        calls = RankCalls()
        moves = pipeline_calls(schedule, r)
        uses: dict[str, int] = defaultdict(int)  # backwards that touch each unit per step
        for c, v in enumerate(schedule.layout.rank_stages[r]):
            for unit in units[v]:
                uses[unit] += schedule.microbatches(r, c)
        placed: set[str] = set()
        for c, v in enumerate(schedule.layout.rank_stages[r]):
            mc = schedule.microbatches(r, c)  # micro-batches through this chunk (m, or m/2 for DualPipe)
            layers = stage_layers(spec.num_blocks, num_stages, v, plan.stage_split)
            # the blocks whose forward runs again before their backward: all under full recompute, the
            # chunk's first N under Megatron-core's block method (count.recompute_layers)
            again = layers[:full_recompute(training.recompute_method, training.recompute_num_layers,
                                           len(layers)).recomputed if recompute else 0]
            # MTP modules (last stage): a block (not recomputed), a lookup and the head each
            mtp = spec.mtp_layers if v == last else 0
            reruns = block_runs(spec, again)  # a looped block's calls once a pass (`block_passes.py`)
            for block, n in block_runs(spec, layers).items():
                block_tokens, block_A = sizes[lengths.of_block(block)][:2]
                tp_mod.block_kind_calls(calls, spec, block, tp, sp, block_A, block_tokens, act, mc * (n + reruns[block]),
                                        mc * n, moe_mlp_tp if block.moe else None)
                if tp_mod.regathers_inputs(plan.recompute or training.recompute, software.ac_mode,
                                           training.attention, sp, tp, block):  # per-op SAC's recompute
                    tp_mod.forward_gather_calls(calls, tp, sp, block_A, mc * n)
            if mtp:
                block = mtp_block(spec)
                tp_mod.block_kind_calls(calls, spec, block, tp, sp, A, tokens, act, mc * mtp, mc * mtp,
                                        moe_mlp_tp if block.moe else None)
            if v == 0:
                tp_mod.embedding_calls(calls, tp, sp, A, mc)
            if v == last:
                tp_mod.head_calls(calls, tp, sp, head_A, head_tokens, loss_b, mc * (1 + mtp))
                tp_mod.embedding_calls(calls, tp, sp, A, mc * mtp, Region.TP_MTP_EMBEDDING)
            if spec.moe is not None:  # each TP rank dispatches its own tokens under SP (`parallel/ep.py`)
                def a2a(n: int) -> int:  # one dispatch of this rank's tokens of sequences of n
                    sent = sizes[n][0] // tp if sp_dispatch else sizes[n][0]
                    alltoall = ep_mod.dispatch_bytes(spec.moe.num_experts,
                                                     expert_capacity(sent, spec.moe, capacity_factor), h, act)
                    # DeepEP: one copy per destination rank / node, as priced (`plan/deepep.py`)
                    return exchange_bytes(alltoall, spec.moe, training, plan.ep, gpus_per_node)
                group = tp if sp_dispatch else 1
                moe_runs = block_runs(spec, [i for i in layers if spec.is_moe_layer(i)], lengths.of_block)
                moe_again = block_runs(spec, [i for i in again if spec.is_moe_layer(i)], lengths.of_block)
                for n, moe_blocks in moe_runs.items():
                    ep_mod.moe_calls(calls, plan.ep, a2a(n), mc * (moe_blocks + moe_again[n]), mc * moe_blocks, 1, group)
                ep_mod.moe_calls(calls, plan.ep, a2a(lengths.source), mc, mc, mtp, group)
            runs = block_runs(spec, layers, lengths.of_block)
            again_runs = block_runs(spec, again, lengths.of_block)
            for n, blocks in runs.items():  # each stack's blocks exchange their own tokens' K, V
                _, _, stack_kv, stack_q = sizes[n]
                cp_mod.cp_calls(calls, plan.cp, software.cp_comm_type, software.cp_fp32_merge, stack_kv, stack_q, act,
                                mc * (blocks + again_runs[n]), mc * blocks, 1)
            pp_mod.boundary_calls(calls, pp, tp, message, gathered, moves[c])
            for unit in units[v]:  # a unit two chunks share is placed once
                if unit not in shards or unit in placed:
                    continue
                placed.add(unit)
                u = shards[unit]
                gather = act if element_bytes is not None else param_gather_bytes(  # the executor: one width
                    unit, act, training.fp8_param_gather, software.fp8_recipe, software.fp8_backend)
                dp_zero.unit_calls(calls, u, tp, plan.zero, uses[unit], act, grad, gather=gather)
                if unit in replicas and r in replicas[unit]:
                    owned = u.padded if plan.zero == 0 else u.padded // u.group_size
                    pp_mod.replica_calls(calls, unit, len(replicas[unit]), owned * grad)
        calls.add(Collective.BARRIER, Axis.WORLD, plan.world_size, 0, 1, Region.WORLD_START, startup=True)
        per_rank.append(calls)
    return merge_rank_calls(per_rank)
