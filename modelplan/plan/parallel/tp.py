"""Tensor parallelism (Shoeybi et al. 2019, Megatron-LM): what it adds and how it overlaps.

Communication, per micro-batch (`*_calls`, the communication list's TP items): each block
sub-layer (attention, MLP) enters its column-parallel GEMM through f and leaves its row-parallel
GEMM through g (identity / AllReduce of b*s*h, or the sequence-parallel pair of `sp.py`), in
forward and again in the recompute forward; backward mirrors them (f's AllReduce of the input
gradient). The vocab-parallel embedding leaves through g; the output head enters through f and
the vocab-parallel cross-entropy combines the per-token max (AllGather of tp x b*s fp32), the
target logit and the sum of exponentials (AllReduce of b*s fp32 each).

A network's Linear/Conv leaves follow the same f/g rule by their roles (`leaf_calls`, roles
from `plan/net_tp.py`): g after a row-parallel leaf, f's backward AllReduce before a
column-parallel one, an AllGather where a column-parallel output is gathered.

States it shards: column-parallel weights by output, row-parallel by input, vocab rows, KV
heads (`local_kv_heads`), counted in `plan/shard.py`; kernels per rank in `plan/kernels.py`.

Overlap (comm_hw.md section 5; `CostModel.tp_exposed_fraction`): a fraction f of every TP second
sits on the critical path (1.0: classic Megatron, no overlap); with TP comm overlap (TE
userbuffers, async TP) the collectives hide behind the block's GEMMs chunk by chunk
(`overlapped_fraction`); the hidden rest still costs `overlap_interference` of itself (SMs
shared with NCCL), charged to the backward.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from modelplan.comm.ops import Axis, Collective
from modelplan.comm.regions import SUBLAYER_REGIONS, Region
from modelplan.count.blocks import Block
from modelplan.count.mixers import LINEAR_MIXERS
from modelplan.count.seq2seq import cross_memory_len
from modelplan.plan.commcost import CommPricer
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.net_tp import TpRole
from modelplan.plan.parallel.sp import region_ops
from modelplan.specs.costmodel import CostModel
from modelplan.specs.transformer import TransformerSpec

AG, AR = Collective.ALL_GATHER, Collective.ALL_REDUCE
TP = Axis.TP
LOSS_VALUE_BYTES = 4
"""The vocab-parallel cross-entropy reduces fp32 per-token values (Megatron's fp32 logits)."""


def local_kv_heads(kv_heads: int, tp: int) -> int:
    """KV heads held by one TP rank: kv/tp, or 1 (replicated) when tp is a multiple of kv."""
    return kv_heads // tp if kv_heads >= tp else 1


def block_calls(calls: RankCalls, tp: int, sp: bool, nbytes: int, fwd_runs: int, bwd_runs: int,
                mlp_tp: int | None = None, gather_bytes: int | None = None) -> None:
    """f and g of the attention and MLP sub-layers: `fwd_runs` forwards (recompute included) and
    `bwd_runs` backwards of blocks whose (b, s, h) activation is `nbytes`. `mlp_tp`: the MLP's
    group when it is not tp (an MoE MLP under Megatron-core expert tensor parallelism gathers
    and scatters its tokens over the etp ranks only, none when etp = 1). `gather_bytes`: the
    AllGathers' (b, s, h) payload when it differs (fp8 all-gathers, `EngineSettings.fp8_tp_gather`)."""
    _sublayer_calls(calls, ["attention", "mlp"], tp, sp, nbytes, fwd_runs, bwd_runs, mlp_tp, gather_bytes)


def block_kind_calls(calls: RankCalls, spec: TransformerSpec, block: Block, tp: int, sp: bool, nbytes: int,
                     tokens: int, value_bytes: int, fwd_runs: int, bwd_runs: int, mlp_tp: int | None = None,
                     gather_bytes: int | None = None) -> None:
    """One block of kind `block`: f and g around each of its sublayers (the mixer, a decoder
    block's cross-attention, the MLP if it has one), a q/k norm's statistics, and the Mamba
    mixer's AllReduce of its x_proj output (dt, B, C of all channels, with d_inner split over tp)
    in forward and of its gradient in backward."""
    mixer = "mamba" if block.mixer in ("mamba", *LINEAR_MIXERS) else "attention"  # linear: one f/g pair
    subs = [mixer] if block.mixer != "mlp" else []  # Nemotron-H MLP blocks have no mixer
    cross = block.cross or cross_memory_len(spec) > 0  # a decoder built alone reading image tokens too
    subs += (["cross_attention"] if cross else []) + (["mlp"] if block.mlp else [])
    _sublayer_calls(calls, subs, tp, sp, nbytes, fwd_runs, bwd_runs, mlp_tp, gather_bytes)
    if block.mixer == "mamba":
        ssm = spec.ssm
        x_proj = tokens * (ssm.dt_rank + 2 * ssm.state_size) * value_bytes
        calls.add(AR, TP, tp, x_proj, fwd_runs, Region.TP_MAMBA_X_PROJ)
        calls.add(AR, TP, tp, x_proj, bwd_runs, Region.TP_MAMBA_X_PROJ)
    elif mixer == "attention" and block.mixer != "mlp":
        qk_norm_calls(calls, spec, tp, tokens, value_bytes, fwd_runs, bwd_runs)


def _sublayer_calls(calls: RankCalls, subs: list[str], tp: int, sp: bool, nbytes: int, fwd_runs: int,
                    bwd_runs: int, mlp_tp: int | None = None, gather_bytes: int | None = None) -> None:
    g_fwd, g_bwd, f_fwd, f_bwd = region_ops(sp)
    gathered = nbytes if gather_bytes is None else gather_bytes
    for sub in subs:
        f_region, g_region = SUBLAYER_REGIONS[sub]
        group = mlp_tp if sub == "mlp" and mlp_tp is not None else tp
        if group == 1 < tp:
            continue

        def size(op, group=group) -> int:  # the group's share of the (b, s, h) activation
            return (gathered if op is AG else nbytes) * group // tp

        for op, region in ((f_fwd, f_region), (g_fwd, g_region)):
            if op is not None:
                calls.add(op, TP, group, size(op), fwd_runs, region)
        calls.add(f_bwd, TP, group, size(f_bwd), bwd_runs, f_region)
        if g_bwd is not None:
            calls.add(g_bwd, TP, group, size(g_bwd), bwd_runs, g_region)


def qk_norm_calls(calls: RankCalls, spec: TransformerSpec, tp: int, tokens: int, value_bytes: int, fwd_runs: int,
                  bwd_runs: int) -> None:
    """A q/k norm over all heads (OLMo-2, OLMoE) whose heads are split over tp: per norm, the
    AllReduce of its per-token statistics in forward (sum x^2; LayerNorm also sum x) and of
    its gradient statistics in backward."""
    if not spec.qk_norm or spec.qk_norm_scope != "all_heads" or spec.mla is not None:
        return
    stats = tokens * (2 if spec.norm == "layernorm" else 1) * value_bytes
    for fwd, bwd in ((Region.TP_Q_NORM_STATS, Region.TP_Q_NORM_GRAD_STATS),
                     (Region.TP_K_NORM_STATS, Region.TP_K_NORM_GRAD_STATS)):
        calls.add(AR, TP, tp, stats, fwd_runs, fwd)
        calls.add(AR, TP, tp, stats, bwd_runs, bwd)


def embedding_calls(calls: RankCalls, tp: int, sp: bool, nbytes: int, runs: int,
                    label: Region = Region.TP_EMBEDDING) -> None:
    """g after the vocab-parallel embedding (forward and backward of `runs` micro-batches); the
    MTP modules' lookups on the last stage are `Region.TP_MTP_EMBEDDING`."""
    g_fwd, g_bwd, _, _ = region_ops(sp)
    calls.add(g_fwd, TP, tp, nbytes, runs, label)
    if g_bwd is not None:
        calls.add(g_bwd, TP, tp, nbytes, runs, label)


def head_calls(calls: RankCalls, tp: int, sp: bool, nbytes: int, tokens: int, loss_bytes: int, runs: int) -> None:
    """f before the output head and the vocab-parallel cross-entropy's three reductions."""
    _, _, f_fwd, f_bwd = region_ops(sp)
    if f_fwd is not None:
        calls.add(f_fwd, TP, tp, nbytes, runs, Region.TP_LM_HEAD_IN)
    calls.add(f_bwd, TP, tp, nbytes, runs, Region.TP_LM_HEAD_IN)
    calls.add(AG, TP, tp, tp * tokens * loss_bytes, runs, Region.TP_CROSS_ENTROPY_MAX)
    calls.add(AR, TP, tp, tokens * loss_bytes, runs, Region.TP_CROSS_ENTROPY_TARGET)
    calls.add(AR, TP, tp, tokens * loss_bytes, runs, Region.TP_CROSS_ENTROPY_SUM)


class TpSeconds(NamedTuple):
    """TP seconds of one micro-batch on one rank (all calls, before overlap)."""

    block_s: float
    """One block: forward and backward."""
    block_recompute_s: float
    """One block with full recompute (its forward calls twice)."""
    embedding_s: float
    head_s: float
    """Output head and vocab-parallel cross-entropy."""
    gathers_fwd_s: float = 0.0
    """One block's forward AllGathers (f of attention and MLP under sequence parallelism): what a
    per-op SAC recompute runs again (`regathered`)."""


def forward_gather_calls(calls: RankCalls, tp: int, sp: bool, nbytes: int, runs: int,
                         gather_bytes: int | None = None) -> None:
    """The forward f AllGathers of one attention + MLP block under sequence parallelism (none
    without it: f is the identity in forward; Korthikanti et al. 2022 fig. 5)."""
    _, _, f_fwd, _ = region_ops(sp)
    if f_fwd is None:
        return
    for sub in ("attention", "mlp"):
        calls.add(f_fwd, TP, tp, nbytes if gather_bytes is None else gather_bytes, runs, SUBLAYER_REGIONS[sub][0])


def plain_block(block: Block | None) -> bool:
    """One attention + MLP block (or the model's default block): the two sub-layers whose forward
    AllGathers `forward_gather_calls` lists."""
    return block is None or (block.mixer.endswith("attention") and block.mlp and not block.cross and not block.moe)


def regathers_inputs(recompute: str, ac_mode: str, attention: str, sp: bool, tp: int, block: Block | None) -> bool:
    """Whether the recompute runs the block's forward AllGathers again: torchtitan per-op SAC saves
    the outputs of `_c10d_functional.reduce_scatter_tensor` but not of `all_gather_into_tensor`
    (parallelize_llama.py `_save_list`; activation_checkpoint.py `comm_ops`: "Communication ops
    whose outputs should be saved to avoid re-communication"), so the recompute of wk / w3 and the
    weight gradients of wq, wk, wv, w1, w3 gather the sequence-parallel input again. Eager attention
    and MoE blocks fall back to the attention-core mode (`evaluator_blocks`)."""
    return (recompute == "selective" and ac_mode == "op_sac" and attention != "eager" and sp and tp > 1
            and plain_block(block))


def tp_seconds(pricer: CommPricer, shape, tp: int, sp: bool, nbytes: int, tokens: int, loss_bytes: int,
               mlp_tp: int | None = None, mlp_shape=None, gather_bytes: int | None = None,
               spec: TransformerSpec | None = None, block: Block | None = None, value_bytes: int = 2) -> TpSeconds:
    """Price the calls above for one micro-batch on the TP group's `shape` (an MLP group of
    `mlp_tp` ranks on `mlp_shape`); `gather_bytes`: the blocks' AllGather payload (`block_calls`);
    with a `block` kind (and its spec), that block's calls (`block_kind_calls`)."""
    def priced(add) -> float:
        calls = RankCalls()
        add(calls)
        return calls.price(pricer, lambda axis, size: shape if size == tp else mlp_shape)

    def block_of_runs(c: RankCalls, fwd: int) -> None:
        if block is None:
            block_calls(c, tp, sp, nbytes, fwd, 1, mlp_tp, gather_bytes)
        else:
            block_kind_calls(c, spec, block, tp, sp, nbytes, tokens, value_bytes, fwd, 1, mlp_tp, gather_bytes)

    return TpSeconds(
        priced(lambda c: block_of_runs(c, 1)),
        priced(lambda c: block_of_runs(c, 2)),
        priced(lambda c: embedding_calls(c, tp, sp, nbytes, 1)),
        priced(lambda c: head_calls(c, tp, sp, nbytes, tokens, loss_bytes, 1)),
        priced(lambda c: forward_gather_calls(c, tp, sp, nbytes, 1, gather_bytes))
        if plain_block(block) and mlp_tp is None else 0.0,
    )


class TpExposure(NamedTuple):
    """Exposed TP seconds per micro-batch on one rank (module docstring's overlap rule)."""

    fwd_s: float
    """One block's forward (half of its calls)."""
    bwd_s: float
    """One block's backward, plus the interference of the hidden traffic."""
    recompute_s: float
    """One block's recompute forward (full recompute only)."""
    hidden_s: float
    """One block's traffic overlapped with compute."""
    embedding_s: float
    head_s: float


def overlapped_fraction(tp_s: float, gemm_s: float, tp: int) -> float:
    """Exposed fraction of a block's TP collectives when they overlap its GEMMs (Transformer
    Engine userbuffers ring-exchange / torchtitan async TP: each AllGather / ReduceScatter is cut
    into tp chunks that move while the GEMM works on the previous one, so the first chunk waits and
    traffic beyond the GEMMs' time is exposed): max(tp_s - gemm_s, tp_s / tp) / tp_s."""
    if tp_s <= 0.0:
        return 1.0
    return max(tp_s - gemm_s, tp_s / tp) / tp_s


def tp_exposure(t: TpSeconds, full_recompute: bool | float, cost: CostModel, overlap_gemm_s: float | None = None,
                tp: int = 1, regathered: bool = False) -> TpExposure:
    """The overlap rule: forward and backward move the same volume (Shoeybi et al. 2019 f/g).
    `full_recompute`: True, or the share of blocks whose forward is recomputed (layer-level
    selective checkpointing). `overlap_gemm_s`: the block's GEMM seconds the collectives overlap
    (TP comm overlap on, `overlapped_fraction`); None: `cost.tp_exposed_fraction`. `regathered`:
    the recompute re-runs the block's forward AllGathers (`t.gathers_fwd_s`; torchtitan per-op
    SAC saves reduce-scatter outputs but not all-gather outputs)."""
    share = float(full_recompute)
    with_recompute = (t.block_s + share * (t.block_recompute_s - t.block_s)
                      + (t.gathers_fwd_s if regathered else 0.0))
    exposed = (cost.tp_exposed_fraction if overlap_gemm_s is None
               else overlapped_fraction(with_recompute, overlap_gemm_s, tp))
    hidden = (1 - exposed) * with_recompute
    return TpExposure(
        fwd_s=exposed * t.block_s / 2,
        bwd_s=exposed * t.block_s / 2 + cost.overlap_interference * hidden,
        recompute_s=exposed * (with_recompute - t.block_s),
        hidden_s=hidden,
        embedding_s=exposed * t.embedding_s,
        head_s=exposed * t.head_s,
    )


SP_CALLS_PER_BLOCK = 8
"""AllGathers and ReduceScatters of one sequence-parallel block per micro-batch, each of one
(b, s, h) activation (`block_calls`: in and out of attention and MLP, forward and backward)."""


def overlap_exposure(t: TpSeconds, full_recompute: bool | float, cost: CostModel, mode: str,
                     shares: dict[str, float], linear_fwd_s: float, tp: int, sm_count: int,
                     regathered: dict[str, float] | None = None, partials_sum_s: float = 0.0) -> TpExposure:
    """`tp_exposure` when the block's sequence-parallel collectives overlap the GEMMs beside them
    (`modelplan.comm.tp_overlap`, TE's pair names): forward AllGathers before QKV and FC1, the
    ReduceScatters after the projection and FC2; backward the output-gradient AllGathers before
    the projection's and FC2's dgrad, the input-gradient ReduceScatters beside QKV's and FC1's
    wgrad. Each linear's forward GEMM is its FLOP share of `linear_fwd_s`; dgrad and wgrad take as
    long. The recompute forward overlaps like the forward. The SM cost of pipelined and bulk
    overlap is in the exposed seconds; the embedding's and head's calls are not overlapped.
    `regathered`: per-op SAC's recompute re-runs the two forward AllGathers (`tp_exposure`), each
    beside only the recomputed GEMMs that consume it (their shares of the linear forward time,
    `count.checkpointing.op_sac_recomputed_shares`: "qkv", "fc1"). `partials_sum_s`: one sum of a
    ring ReduceScatter's tp partials, added once per ring-exchanged ReduceScatter pair
    (`comm.tp_overlap.ring_reductions`)."""
    from modelplan.comm.tp_overlap import TpPair, block_exposed_s, ring_reductions

    c = t.block_s / SP_CALLS_PER_BLOCK
    g = {k: v * linear_fwd_s for k, v in shares.items()}
    fwd = block_exposed_s(mode, {"qkv_fprop": TpPair(g["qkv"], c), "proj_fprop": TpPair(g["proj"], c),
                                 "fc1_fprop": TpPair(g["fc1"], c), "fc2_fprop": TpPair(g["fc2"], c)}, tp, sm_count)
    bwd = block_exposed_s(mode, {"proj_dgrad": TpPair(g["proj"], c), "fc2_dgrad": TpPair(g["fc2"], c),
                                 "qkv_wgrad": TpPair(g["qkv"], c), "fc1_wgrad": TpPair(g["fc1"], c)}, tp, sm_count)
    # ring ReduceScatters end in a sum of the tp partials on the compute stream (not traffic: kept
    # out of the hidden seconds below)
    sum_f = partials_sum_s * ring_reductions(mode, ("proj_fprop", "fc2_fprop"))
    sum_b = partials_sum_s * ring_reductions(mode, ("qkv_wgrad", "fc1_wgrad"))
    fwd, bwd = fwd + sum_f, bwd + sum_b
    share = float(full_recompute)
    total = t.block_s + share * (t.block_recompute_s - t.block_s)
    rec = share * fwd
    if regathered is not None and t.gathers_fwd_s > 0.0:
        a = t.gathers_fwd_s / 2  # one AllGather before attention, one before the MLP
        rec += block_exposed_s(mode, {"qkv_fprop": TpPair(regathered["qkv"] * linear_fwd_s, a),
                                      "fc1_fprop": TpPair(regathered["fc1"] * linear_fwd_s, a)}, tp, sm_count)
        total += t.gathers_fwd_s
    f = cost.tp_exposed_fraction
    sums = sum_f + sum_b + share * sum_f
    return TpExposure(fwd_s=fwd, bwd_s=bwd, recompute_s=rec, hidden_s=max(0.0, total - fwd - bwd - rec + sums),
                      embedding_s=f * t.embedding_s, head_s=f * t.head_s)


def leaf_calls(calls: RankCalls, stage, tp: int, micro_batch: int, act_bytes: int, runs: int) -> None:
    """A network stage's calls (`plan/net_tp.py` roles) over `runs` micro-batches of `micro_batch`
    samples: a row-parallel leaf leaves through g (AllReduce of its output, b * numel(out)); a
    gather point all-gathers its output (b * numel(out), the gathered size); a column-parallel leaf
    enters through f (AllReduce of its input gradient in backward, b * numel(in)), except the
    network's first leaf, which has no input gradient (Shoeybi et al. 2019, f and g)."""
    for leaf in stage.leaves:
        r = stage.roles[leaf.path]
        out_bytes = micro_batch * math.prod(leaf.info.output_shape) * act_bytes
        if r.role is TpRole.ROW:
            calls.add(AR, TP, tp, out_bytes, runs, f"tp/{leaf.path}/row")
        if r.gather_after:
            calls.add(AG, TP, tp, out_bytes, runs, f"tp/{leaf.path}/gather")
        if r.role is TpRole.COLUMN and stage.needs_input_grad(leaf):
            calls.add(AR, TP, tp, micro_batch * math.prod(leaf.info.input_shape) * act_bytes, runs,
                      f"tp/{leaf.path}/column-dx")
