"""Per-rank element counts of weights, gradients and optimizer state under a plan.

The cost side's model of what the executor holds (verify compares the two): parameters are
grouped into communication units, split over tp (column/row-parallel matrices, vocab rows) and
over ep (routed experts), and each unit's local elements are flattened and padded to a multiple
of its data-parallel group (dp, or dp/ep for routed experts; times cp with context parallelism,
whose ranks reduce gradients together: Megatron's data-parallel group with cp), as Megatron's
grad buffer is for the distributed optimizer. Units and their stages come from `plan/stages.py`. Per rank, for each unit of numel n and padded size P over a group of
D ranks (ZeRO stages as in Rajbhandari et al. SC'20, sec. 5):

| zero | weights | gradients | optimizer state |
|---|---|---|---|
| 0 | n | P | k * P |
| 1 | n | P (Megatron keeps the full grad buffer) | k * P / D |
| 2 | n | P / D | k * P / D |
| 3 | P / D | P / D | k * P / D |

with k optimizer states per element (Adam 2, momentum 1, SGD 0). Counts are elements, not
bytes, and exact Python ints. Vocabulary padding to a multiple of 128*tp (Megatron) is not
modelled: the vocabulary is split as ceil(vocab / tp) rows per rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from modelplan.count.attention_extras import gate_width
from modelplan.count.blocks import Block, block_of, block_params, indexer_params, mtp_block, norm_params
from modelplan.count.cca import cca_params, residual_affine_params, router_mlp_params
from modelplan.count.qsa import qsa_params
from modelplan.count.compressed_attention import compressed_attention_shard
from modelplan.count.mla_extras import mla_extra_shard, own_indexer
from modelplan.count.product_key import pk_params
from modelplan.count.side_paths import block_side_params, embedding_side_params, head_side_params, kv_shared_saving
from modelplan.count.vision import vision_params
from modelplan.count.seq2seq import (audio_params, embedding_norms, eoi_params, idle_cross_params, key_bias_saving,
                                     own_token_tables, position_params, separate_cross)
from modelplan.count.mixers import LINEAR_MIXERS, PARALLEL_MAMBA2
from modelplan.plan.extras import block_shard, embedding_extra, head_extra, word_width
from modelplan.plan.linear_mixers import linear_mixer_shard
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.stages import rank_units
from modelplan.plan.vision_tower import tower_block_spec
from modelplan.plan.vision_tower_tp import TOWER_BLOCK, tower_tp
from modelplan.specs.attention_shape import for_block
from modelplan.specs.layer_sharing import reuses_weights
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


class UnitShard(NamedTuple):
    """One communication unit as one rank holds it (a tuple, not a validated model: the planner's
    cache builders make thousands; every field is derived here from a validated spec)."""

    unit: str
    """`embedding/word`, `embedding/extra`, `layers/<i>`, `layers/<i>/experts`, `head`, `mtp/<k>`,
    `mtp/<k>/experts` or `vision`."""
    numel: int
    """Local parameter elements (after the tp/ep split)."""
    partial_over_tp: int
    """Of those, elements whose gradient is a partial sum over tp (all-reduced over tp)."""
    group_size: int
    """Ranks sharing the unit's data-parallel reduction: dp*cp, or tp*dp*cp/(ep*etp) for routed
    experts (dp*cp/ep when etp = tp)."""

    @property
    def padded(self) -> int:
        """numel rounded up to a multiple of group_size."""
        return -(-self.numel // self.group_size) * self.group_size


class RankElements(BaseModel):
    """Elements one rank of a pipeline stage keeps (every tp/dp rank of a stage holds the same)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pp_rank: int
    weights: int
    gradients: int
    optimizer: int


def _split(n: int, parts: int) -> int:
    return -(-n // parts)


def _norm(spec: TransformerSpec) -> int:
    return norm_params(spec, spec.hidden)


def _mlp(spec: TransformerSpec, ffn: int, tp: int, sp: bool, bias: bool | None = None) -> tuple[int, int]:
    """(local elements, partial-over-tp elements) of a column/row-parallel MLP of width ffn."""
    h, f, bias = spec.hidden, _split(ffn, tp), spec.mlp_bias if bias is None else bias
    inputs = 2 if spec.gated_mlp else 1
    numel = inputs * (h * f + (f if bias else 0)) + f * h + (h if bias else 0)
    return numel, (h if bias and sp else 0)


def _qk_norms(spec: TransformerSpec, tp: int) -> tuple[int, int]:
    """q/k norm weights: split with the heads (all-heads scope, one per head), or one head_dim
    vector the heads share (replicated; its gradient is partial over tp)."""
    if not spec.qk_norm or spec.qk_norm_weight == "none" or not spec.norm_affine:
        return 0, 0
    per = 2 if spec.norm_bias else 1
    if spec.qk_norm_scope == "head" and spec.qk_norm_weight == "shared":
        n = 2 * per * spec.dim_head
        return n, (n if tp > 1 else 0)
    return per * spec.dim_head * (_split(spec.heads, tp) + _split(spec.num_kv_heads, tp)), 0


def _attention(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local, partial) of a block's attention: q/k/v column-parallel, out row-parallel (its bias
    replicated), sinks per head; MLA: heads split, latents and their norms replicated."""
    h, heads = spec.hidden, _split(spec.heads, tp)
    out_bias = h if spec.attn_out_bias else 0
    if spec.mla is not None:
        mla = spec.mla
        kv_a = mla.kv_lora_rank + mla.qk_rope_head_dim
        replicated = 0 if mla.kv_reused else h * kv_a + (kv_a if spec.qkv_bias else 0) + mla.kv_lora_rank
        split = heads * mla.kv_lora_rank * (mla.qk_nope_head_dim + mla.v_head_dim) + heads * mla.v_head_dim * h
        if mla.q_lora_rank is None:
            split += h * heads * mla.qk_head_dim
        else:
            r = mla.q_lora_rank
            replicated += h * r + (r if spec.qkv_bias else 0) + r
            split += r * heads * mla.qk_head_dim
        if own_indexer(spec) is not None:  # DeepSeek-V3.2's indexer: replicated on every tp rank
            replicated += indexer_params(spec)
        extra_split, extra_replicated = mla_extra_shard(spec, heads)  # HY-V4 / dots.3 (count/mla_extras.py)
        split, replicated = split + extra_split, replicated + extra_replicated
        return replicated + split + out_bias, (replicated if tp > 1 else 0) + (out_bias if sp else 0)
    d, kv_local = spec.dim_head, _split(spec.num_kv_heads, tp)
    if spec.attention_experts is not None:  # JetMoE MoA: expert q/o split with the kv heads, router and bias replicated
        e, kv = spec.attention_experts, kv_local * d
        return h * 2 * kv + e * 2 * h * kv + h * e + h, (h * e + h if tp > 1 else 0)
    q, kv, v = heads * d, kv_local * d, kv_local * spec.dim_value  # value heads: v_head_dim (MiMo-V2-Flash)
    v = 0 if spec.value_is_key else v  # Gemma 4 attention_k_eq_v: no v_proj
    norms, norms_partial = _qk_norms(spec, tp)
    numel = h * (q + kv + v) + (q + kv + v if spec.qkv_bias else 0) + heads * spec.dim_value * h + out_bias + norms
    if spec.attention_output_gate:  # Qwen3-Next: the gate half of q_proj, split with the heads
        numel += h * q + (q if spec.qkv_bias else 0)
    numel += heads if spec.attention_sinks else 0
    numel += h * gate_width(spec, heads)  # LFM3 / Laguna g_proj: column-parallel with the heads
    numel += heads if spec.head_gate_bias else 0  # Beam gate_bias: colwise (BeamConfig.base_model_tp_plan)
    lambdas = 4 * d if spec.differential_attention else 0  # DiffLlama lambda vectors: replicated, partial grads
    lambdas += sum(cca_params(spec).values())  # ZAYA's q/k convs and temperature: replicated (no engine splits them)
    lambdas += sum(qsa_params(spec).values())  # Qwen4-Exp's QSA indexer: replicated (colwise_gather_output)
    if spec.dynamic_mask:  # Doge A and dt_proj (reads every kv head's values): replicated, partial grads
        kv_all = spec.num_kv_heads
        lambdas += kv_all + spec.v_width * kv_all + (kv_all if spec.qkv_bias else 0)
    return numel + lambdas, norms_partial + (lambdas if tp > 1 else 0) + (out_bias if sp else 0)


def _mamba(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local, partial) of a Mamba mixer with its d_inner channels split over tp (Megatron-core's
    Mamba mixer: in_proj, conv, dt_proj, A_log, D split by channel; x_proj and out_proj split by
    their input channels, out_proj's bias replicated; Jamba's dt/B/C norms replicated after the
    AllReduce of x_proj's output, so their gradients are whole on every rank)."""
    ssm, h = spec.ssm, spec.hidden
    d, n, r = _split(ssm.inner, tp), ssm.state_size, ssm.dt_rank
    numel = h * 2 * d + (2 * d if ssm.proj_bias else 0)  # in_proj: x and z
    numel += d * ssm.conv_kernel + (d if ssm.conv_bias else 0)  # depthwise conv
    numel += d * (r + 2 * n) + r * d + d + d * n + d  # x_proj, dt_proj (+ bias), A_log, D
    out_bias = h if ssm.proj_bias else 0
    norms = r + 2 * n if ssm.bc_dt_norm else 0
    numel += d * h + out_bias + norms
    return numel, out_bias if sp else 0


def tower_params_saved(spec: TransformerSpec, tp: int) -> int:
    """Vision-tower elements one rank does not hold when its blocks are split over `tp`
    (`vision_tower_tp.py`): per block, the whole block (`count.blocks`) less one rank's shard of it
    (no sequence parallelism)."""
    if tp == 1:
        return 0
    tower = tower_block_spec(spec)
    whole = sum(block_params(tower, TOWER_BLOCK).values())
    return spec.vision.layers * (whole - _block(tower, TOWER_BLOCK, tp, False)[0])


def _block(spec: TransformerSpec, block: Block, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements) of one block of kind `block` without its routed experts."""
    spec = for_block(spec, block)  # its layer type's attention sizes, its MLP width (specs/attention_shape.py)
    h = spec.hidden
    norms = _norm(spec) * spec.num_norms_per_layer
    if block.mixer == "mamba":
        numel, partial = _mamba(spec, tp, sp)
    elif block.mixer in LINEAR_MIXERS:
        numel, partial = linear_mixer_shard(spec, block.mixer, tp, sp)
    elif block.mixer == "mlp":  # a mixer-free MLP block (Nemotron-H)
        numel, partial = 0, 0
    elif block.mixer == PARALLEL_MAMBA2:  # Falcon-H1: attention and Mamba-2 side by side
        (n_attn, p_attn), (n_ssm, p_ssm) = _attention(spec, tp, sp), linear_mixer_shard(spec, "mamba2", tp, sp)
        numel, partial = n_attn + n_ssm, p_attn + p_ssm
    elif spec.compressed_attention is not None:  # DeepSeek-V4 (count/compressed_attention.py)
        numel, partial = compressed_attention_shard(spec, block.compressor, tp, sp)
    else:
        numel, partial = _attention(spec, tp, sp)
        numel -= key_bias_saving(spec) // tp  # Whisper's k_proj has no bias (count.seq2seq)
    if block.relative_bias:  # T5's relative_attention_bias (buckets x heads), replicated over tp
        numel += spec.relative_buckets * spec.heads
        partial += spec.relative_buckets * spec.heads if tp > 1 else 0
    if separate_cross(spec, block):  # a decoder block's cross-attention: split like self-attention, its own norm
        n, p = _attention(spec, tp, sp)
        numel, partial = numel + n - key_bias_saving(spec) // tp, partial + p
        norms += _norm(spec)
    elif idle := idle_cross_params(spec):  # a decoder built alone: unused encoder_attn, split like attention
        numel += idle["cross_attention/qkv"] // tp + spec.q_width * spec.hidden // tp  # column / row parallel
        numel += spec.hidden if spec.attn_out_bias else 0  # out_proj bias replicated
        norms += _norm(spec)
    norms += 2 * h if spec.residual_weights else 0  # Doge's residual weights: replicated like the norms
    norms += residual_affine_params(spec)  # ZAYA's residual scales and biases: replicated like the norms
    side = sum(block_side_params(spec).values())  # Gemma 3n / 4 side paths (count/side_paths.py): replicated
    if block.kv_shared:  # Gemma 3n / 4: no k_proj, v_proj, k_norm of its own
        saving, k_norm = kv_shared_saving(spec)
        numel -= _split(saving, tp) + k_norm
        partial -= k_norm if tp > 1 else 0
    numel, partial = numel + norms + side, partial + (norms if sp else 0) + (side if tp > 1 else 0)
    extra, extra_partial = block_shard(spec, block, sp)  # sub-norms, adapters, ... (plan/extras.py)
    numel, partial = numel + extra, partial + extra_partial
    if not block.mlp:
        return numel, partial
    if not block.moe:
        n, p = _mlp(spec, spec.ffn_hidden, tp, sp)
        pk = sum(pk_params(spec).values())  # Doge's product-key experts: replicated, partial grads
        return numel + n + pk, partial + p + (pk if tp > 1 else 0)
    moe = spec.moe
    router = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    if moe.router_mlp is not None:  # ZAYA's router MLP (count/cca.py), replicated like a router
        router = router_mlp_params(spec, block.router_state)
    router += moe.num_experts if moe.score_correction_param else 0  # AFMoE's expert_bias parameter
    router += h if moe.shared_expert_gate else 0  # Qwen2-MoE's gate: replicated like the router
    router += h if moe.output_bias else 0  # JetMoE's output bias: replicated
    router += h + moe.num_experts if moe.router_scales else 0  # Gemma 4's router scales: replicated
    branch_norms = moe.branch_norms * _norm(spec)  # Gemma 4's branch norms: replicated like the block's
    numel, partial = numel + branch_norms, partial + (branch_norms if sp else 0)
    numel += router
    partial += router if tp > 1 else 0  # the router's gradient is a partial sum over tp
    if moe.shared_experts:
        n, p = _mlp(spec, moe.shared_experts * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden), tp, sp)
        numel, partial = numel + n, partial + p
    return numel, partial


def _experts(spec: TransformerSpec, tp: int, ep: int) -> int:
    """Local elements of one layer's routed experts (the out bias is replicated over tp)."""
    h, f = spec.hidden, _split(spec.moe.expert_ffn_hidden, tp)
    bias = spec.mlp_bias if spec.moe.expert_bias is None else spec.moe.expert_bias
    inputs = 2 if spec.gated_mlp else 1
    one = inputs * (h * f + (f if bias else 0)) + f * h + (h if bias else 0)
    return _split(spec.moe.num_experts, ep) * one


def _mtp(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local, partial) of one MTP module without its routed experts: embedding and hidden norms,
    the replicated projection (2h, h), its block and head norm (DeepSeek-V3 sec. 2.2)."""
    n, p = _block(spec, mtp_block(spec), tp, sp)
    own = 3 * _norm(spec) + 2 * spec.hidden * spec.hidden
    return n + own, p + (own if sp else 0)


def unit_groups(tp: int, dp: int, cp: int, ep: int, etp: int | None) -> tuple[int, int]:
    """(dense, routed-expert) units' data-parallel group sizes: gradients are reduced over the
    dp x cp ranks; routed experts are split over ep and etp (Megatron-core's expert grid folds
    ep x etp over the stage's tp x dp x cp ranks; etp None: tp, ep inside dp) and reduced over the
    rest. The only dependence of `unit_shards` on dp and cp."""
    return dp * cp, tp * dp * cp // (ep * (etp or tp))


def regrouped(shard: UnitShard, groups: tuple[int, int]) -> UnitShard:
    """`shard` of another plan with the same tp, sequence parallelism, ep and etp, under that
    plan's `unit_groups` (numel and partial elements do not depend on dp or cp)."""
    group = groups[1] if shard.unit.endswith("/experts") else groups[0]
    return shard if group == shard.group_size else shard._replace(group_size=group)


def unit_shards(spec: TransformerSpec, plan: Plan, framework: str | None = None) -> dict[str, UnitShard]:
    """Every non-empty unit of the model as one rank holds it (`framework`: the engine, which decides
    whether a vision tower's blocks are split over tp; None: replicated)."""
    tp, sp, h = plan.tp, plan.sequence_parallel, spec.hidden
    dp, expert_group = unit_groups(tp, plan.dp, plan.cp, plan.ep, plan.etp)
    etp = plan.etp or tp
    tables = 1 + own_token_tables(spec)  # untied stacks' own token tables, vocab-split like the shared one
    word = tables * _split(spec.vocab, tp) * word_width(spec)
    sizes: dict[str, tuple[int, int, int]] = {"embedding/word": (word, 0, dp)}
    extra = position_params(spec) + spec.type_vocab * h + audio_params(spec) + eoi_params(spec)  # count.seq2seq: per-stack tables
    extra += embedding_norms(spec) * _norm(spec)
    extra += embedding_extra(spec)  # factored / offset / frozen / concatenated tables (plan/extras.py)
    side = sum(embedding_side_params(spec).values())  # Gemma 3n / 4 per-layer tables, AltUp: replicated
    sizes["embedding/extra"] = (extra + side, (extra if sp else 0) + (side if tp > 1 else 0), dp)
    blocks: dict = {}
    experts = _experts(spec, etp, plan.ep) if spec.moe is not None else 0
    for i in range(spec.num_blocks):
        block = block_of(spec, i)
        if block not in blocks:  # alike blocks are the same size
            blocks[block] = _block(spec, block, tp, sp)
        sizes[f"layers/{i}"] = (0, 0, dp) if reuses_weights(spec, i) else (*blocks[block], dp)  # ALBERT: held once
        if spec.is_moe_layer(i):
            sizes[f"layers/{i}/experts"] = (experts, 0, expert_group)
    for k in range(spec.mtp_layers):
        sizes[f"mtp/{k}"] = (*_mtp(spec, tp, sp), dp)
        if spec.moe is not None:
            sizes[f"mtp/{k}/experts"] = (experts, 0, expert_group)
    stacks = 2 if spec.arch == "encoder_decoder" else 1  # an encoder-decoder's two final norms (count.params)
    norm = stacks * _norm(spec) if spec.final_norm else 0
    head = norm + (0 if spec.tied_embeddings or not spec.lm_head else h * _split(spec.vocab, tp))  # bare ...Model: none
    head += _split(spec.vocab, tp) * (spec.lm_head_bias + spec.head_bias_copy)  # + BERT's untied bias copy
    transform, decoder = head_extra(spec, _split(spec.vocab, tp))  # BERT's MLM transform, RemBERT's decoder
    head += transform + decoder
    side = sum(head_side_params(spec).values())  # Gemma 3n's AltUp unembedding projections: replicated
    sizes["head"] = (head + side, (norm + transform if sp else 0) + (side if tp > 1 else 0), dp)
    if spec.vision is not None:  # replicated over tp, or its blocks split under Megatron (`vision_tower_tp.py`)
        saved = tower_params_saved(spec, tower_tp(spec, framework, tp)) if framework else 0
        sizes["vision"] = (sum(vision_params(spec.vision, h).values()) - saved, 0, dp)
    return {u: UnitShard(unit=u, numel=n, partial_over_tp=p, group_size=g) for u, (n, p, g) in sizes.items() if n}


def rank_elements(spec: TransformerSpec, plan: Plan, training: TrainingSpec) -> list[RankElements]:
    """Per pipeline rank: weight, gradient and optimizer-state elements held (table above)."""
    units = rank_units(spec, schedule_layout(plan.schedule, plan.pp, plan.vpp), plan.stage_split)
    return held_elements(units, unit_shards(spec, plan, training.framework), plan, training.optimizer_states)


def held_elements(units: Sequence[Sequence[str]], shards: dict[str, UnitShard], plan: Plan,
                  optimizer_states: int) -> list[RankElements]:
    """Per pipeline rank, the table above summed over the units it holds (`units[r]`: the units of
    pipeline rank r, each once; units missing from `shards` hold no parameters)."""
    out = []
    for r, names in enumerate(units):
        w = g = o = 0
        for unit in names:
            if unit not in shards:
                continue
            s = shards[unit]
            mine = s.padded // s.group_size
            w += mine if plan.zero == 3 else s.numel
            g += s.padded if plan.zero <= 1 else mine
            o += optimizer_states * (s.padded if plan.zero == 0 else mine)
        out.append(RankElements(pp_rank=r, weights=w, gradients=g, optimizer=o))
    return out
