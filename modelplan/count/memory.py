"""Memory of training a transformer: model states per precision/optimizer, activations, KV cache.

Model states per parameter (mixed precision keeps fp32 master weights and fp32 Adam states):
    fp32:            4 weight + 4 grad + 4 x states
    bf16/fp16/fp8:   2 weight + grad_bytes (4 fp32 default, or 2) + 4 master + 4 x states
which gives Megatron-LM's 18 bytes/parameter for Adam with fp32 gradients (training_formulas.md
1.2, "Model-state memory"). Activations follow Korthikanti et al. 2022 (arXiv 2205.05198),
section 4, per layer; see `activation_bytes_per_layer` for the generalisation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from modelplan.count.attention import is_fused, lse_bytes_per_token
from modelplan.count.attention_extras import extra_attention_kept_bytes
from modelplan.count.block_flops import keys_per_query
from modelplan.count.blocks import Block, block_of, mtp_block, real_experts_per_token
from modelplan.count.checkpointing import op_sac_kept_per_token
from modelplan.count.eager import FP32, rmsnorm_kept_bytes, swiglu_kept_bytes
from modelplan.count.flops import check_seq_len, decoder_seq_len
from modelplan.count.seq2seq import cross_memory_len, separate_cross
from modelplan.count.mixers import LINEAR_MIXERS, PARALLEL_MAMBA2, kept_bytes_per_token, out_proj_width, state_elements
from modelplan.count.params import count_params
from modelplan.count.product_key import pk_kept_bytes
from modelplan.count.recompute_modules import discarded
from modelplan.count.result import MemoryCount
from modelplan.count.shared_block import use_cache_elements, use_kept_bytes
from modelplan.count.conv_relative import block_passes, conv_cache_elements
from modelplan.count.extras import block_extra_kept_bytes
from modelplan.count.side_paths import block_side_kept_bytes
from modelplan.count.hyperconn import residual_width
from modelplan.count.compressed_attention import compressed_attention_kept, compressed_cache_elements
from modelplan.count.mla_extras import mla_extra_kept_bytes, own_indexer
from modelplan.specs.attention_shape import for_block, for_mixer
from modelplan.specs.family import family_of

if TYPE_CHECKING:
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec

FP32_BYTES = 4  # master weights and optimizer states are fp32 (Micikevicius et al. 2018)
TOKEN_ID_BYTES = 8  # int64 token ids kept by the embedding (Megatron's estimator)


def _ceil_div(x: int, t: int) -> int:
    """Bytes per rank of `x` bytes split over `t` ranks (exact when t divides x)."""
    return -(-x // t)


def _mixer_terms(spec: "TransformerSpec", block: Block, d: int) -> tuple[int, int, bool]:
    """(replicated, tp-sharded) bytes per token the mixer keeps, and whether it has a score term."""
    if block.mixer == "mamba":
        # Mamba kernel (Gu & Dao 2023 sec. 3.3.2) keeps its inputs and recomputes the states:
        # in_proj output x, z (2 d_in), conv output, delta, y (out_proj input) and B, C, dt_low
        ssm = spec.ssm
        return 0, d * (5 * ssm.inner + ssm.dt_rank + 2 * ssm.state_size), False
    if block.mixer in LINEAR_MIXERS:  # Mamba-2 / gated DeltaNet: what their fused kernels save
        return 0, kept_bytes_per_token(spec, block.mixer, d), False
    if block.mixer == "mlp":  # no mixer (Nemotron-H MLP blocks)
        return 0, 0, False
    if spec.compressed_attention is not None:  # DeepSeek-V4 (count/compressed_attention.py)
        return (*compressed_attention_kept(spec, block.compressor, d), True)
    mla = spec.mla
    if mla is not None:
        # latents (not split by tp): q latent (norm and up inputs), kv latent + rope key, kv up input
        r = mla.q_lora_rank or 0
        replicated = d * (2 * r + 2 * mla.kv_lora_rank + mla.qk_rope_head_dim)
        if (ix := own_indexer(spec)) is not None:  # DeepSeek-V3.2: index queries, key and head weights (its KL loss's backward)
            replicated += d * (ix.heads * ix.head_dim + ix.head_dim + ix.heads)
        # per-head Q and K (nope + rope dims), V and the output-projection input (v dims); HY-V4's gate
        return replicated, d * spec.heads * (2 * mla.qk_head_dim + 2 * mla.v_head_dim) + mla_extra_kept_bytes(spec, d), True
    # Q, K, V (K, V at kv width: GQA keeps kv heads, no repeat) and the output-projection input
    sharded = d * (spec.q_width + spec.kv_width + spec.v_width + spec.o_width)
    if spec.qk_norm_in(block.mixer):
        sharded += d * (spec.q_width + spec.kv_width)  # pre-norm Q and K kept for the norm backward
    if spec.attention_output_gate:  # the gate logits and the ungated core output, for attn * sigmoid(gate)
        sharded += d * 2 * spec.q_width
    sharded += extra_attention_kept_bytes(spec, d)  # g_proj's gate, DiffLlama's second call (count/attention_extras.py)
    if block.mixer == PARALLEL_MAMBA2:  # Falcon-H1: the Mamba-2 mixer's kept tensors beside attention's
        sharded += kept_bytes_per_token(spec, "mamba2", d)
    return 0, sharded, True


def _out_proj_width(spec: "TransformerSpec", block: Block) -> int:
    """Width of the mixer's output-projection input (attention values, MLA's v dims, Mamba's y)."""
    if block.mixer == "mamba":
        return spec.ssm.inner
    if block.mixer in LINEAR_MIXERS:
        return out_proj_width(spec, block.mixer)
    if block.mixer == PARALLEL_MAMBA2:
        return spec.q_width + spec.mamba2.inner
    if spec.mla is not None:
        return spec.heads * spec.mla.v_head_dim
    return spec.o_width


def _fp8_kept(spec: "TransformerSpec", block: Block, saved: int, replicated: int, sharded: int) -> tuple[int, int]:
    """(replicated, sharded) bytes per token once Transformer Engine keeps each fp8 GEMM's input
    as its 1-byte cast (`saved` = dtype bytes - 1 less per element): TE LayerNormLinear / Linear
    save the fp8 copy, not the 16-bit tensor. Dense block: both norm outputs (or the one shared
    input), the output-projection input, the second MLP GEMM's input. MoE block (TE GroupedLinear
    experts): the attention norm output and output-projection input, each routed copy of a token
    (top_k h: the permuted input is cast, the 16-bit copy freed) and the expert fc2 inputs; the
    MLP norm output stays 16-bit (the router reads it)."""
    moe = spec.moe
    if block.mlp and block.moe and moe is not None:
        shared_ffn = moe.shared_experts * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden)
        replicated -= saved * spec.hidden  # (the routed copies' casts: _dispatch_bytes)
        sharded -= saved * (_out_proj_width(spec, block) + moe.top_k * moe.expert_ffn_hidden + shared_ffn)
        return replicated, sharded
    shared_input = (spec.parallel_block and spec.num_norms_per_layer == 1) or not block.mlp or block.mixer == "mlp"
    replicated -= saved * spec.hidden * (1 if shared_input else 2)
    sharded -= saved * (_out_proj_width(spec, block) + (spec.ffn_hidden if block.mlp else 0))
    return replicated, sharded


def _layer_terms(spec: "TransformerSpec", block: Block, d: int, attention: str = "eager",
                 elementwise: str = "fused", norm_elementwise: str | None = None) -> tuple[int, int, int]:
    """(replicated bytes per token, tp-sharded bytes per token, score bytes per query and key) of
    a block.

    `replicated` is what tensor parallelism leaves whole (sharded only by sequence parallelism),
    `sharded` is split by tp, `score` is the a*s*keys part dropped by selective recompute. A fused
    (flash / sdpa) kernel keeps no s x s tensor (score 0) but one fp32 log-sum-exp per token and
    head (Dao 2023, FlashAttention-2, Algorithm 1); its output is the output-projection input,
    already counted.
    """
    spec = for_block(spec, block)  # its layer type's attention sizes, its MLP width (specs/attention_shape.py)
    h, mask = spec.hidden, (1 if spec.dropout else 0)
    # Norm inputs: each sequential norm keeps its own input; a parallel block's norms share one.
    norm_inputs = 1 if spec.parallel_block else spec.num_norms_per_layer
    # Mixer input and MLP input (norm outputs); one shared tensor in a 1-norm parallel block.
    shared_input = (spec.parallel_block and spec.num_norms_per_layer == 1) or not block.mlp or block.mixer == "mlp"
    block_inputs = 1 if shared_input else 2
    replicated = d * h * (norm_inputs + block_inputs) + (2 if block.mlp else 1) * mask * h  # dropout masks (1 B)
    eager = elementwise == "eager"
    if (norm_elementwise or elementwise) == "eager" and spec.norm == "rmsnorm":  # eager RMSNorm keeps fp32 input + output
        replicated += (rmsnorm_kept_bytes(d) - d) * h * norm_inputs
    rep_mixer, sharded, scores = _mixer_terms(spec, block, d)
    replicated += rep_mixer
    shared_score = 0
    replicated += block_side_kept_bytes(spec, d)  # Gemma 3n's AltUp, LAuReL, per-layer input
    replicated += block_extra_kept_bytes(spec, block, d)  # sub-norms, adapters (count/extras.py)
    if block.shared:  # Zamba's shared attention + MLP block at this use (count/shared_block.py)
        rep_use, sharded_use, shared_score = use_kept_bytes(spec, d, is_fused(attention))
        replicated, sharded = replicated + rep_use, sharded + sharded_use
    if separate_cross(spec, block) or cross_memory_len(spec):  # T5 (or a decoder's image) cross-attention: its
        # norm input and block input, Q and the out-proj input
        replicated += 2 * d * h + mask * h
        sharded += 2 * d * spec.q_width
    inner = 3 if spec.gated_mlp else 2  # plain: act in + act out; gated: fc1 out (2f) + fc2 in (f)
    if eager and spec.gated_mlp:  # eager SwiGLU also keeps silu(a) for the product's backward
        inner += swiglu_kept_bytes(d) // d
    moe = spec.moe
    if block.mlp and block.moe and moe is not None:  # (the top_k routed copies: _dispatch_bytes)
        shared_hidden = moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden
        num, den = real_experts_per_token(moe)  # zero experts keep nothing (LongCat-Flash)
        sharded += inner * d * (num * moe.expert_ffn_hidden // den + moe.shared_experts * shared_hidden)
    elif block.mlp:
        sharded += inner * d * spec.ffn_hidden
        replicated += pk_kept_bytes(spec, d)  # Doge's product-key experts (count/product_key.py)
    if not scores:
        return replicated, sharded, shared_score
    if is_fused(attention):
        return replicated, sharded + lse_bytes_per_token(spec.heads), 0
    # Softmax output (d), its dropout mask (1) and the dropout output (d); without dropout the
    # softmax output is the AV input itself.
    return replicated, sharded, spec.heads * (2 * d + 1 if spec.dropout else d) + shared_score


def _block_bytes(spec: "TransformerSpec", block: Block, micro_batch: int, seq_len: int, dtype_bytes: int,
                 tp: int, sequence_parallel: bool, recompute: str, attention: str, memory_len: int = 0,
                 ac_mode: str = "attention_core", elementwise: str = "fused", ac_every: int = 2,
                 fp8_inputs: bool = False, norm_elementwise: str | None = None,
                 gathered_inputs: bool = False, dispatch_tp: int | None = None,
                 probs_at_combine: bool = False, recompute_modules: tuple[str, ...] = (),
                 sac_saves_attention: bool = True) -> int:
    """Activation bytes of one block of kind `block` (see activation_bytes_per_layer)."""
    if recompute == "selective" and ac_mode in ("layer_sac", "every_nth_block"):
        args = (spec, block, micro_batch, seq_len, dtype_bytes, tp, sequence_parallel)
        extra = dict(memory_len=memory_len, elementwise=elementwise, fp8_inputs=fp8_inputs,
                     norm_elementwise=norm_elementwise, gathered_inputs=gathered_inputs, dispatch_tp=dispatch_tp,
                     probs_at_combine=probs_at_combine)
        full = _block_bytes(*args, "full", attention, **extra)
        none = _block_bytes(*args, "none", attention, **extra)
        return _ceil_div(full + (ac_every - 1) * none, ac_every)  # one block in ac_every recomputed whole
    sb = seq_len * micro_batch
    if recompute == "full":
        kept = dtype_bytes * sb * residual_width(spec)  # only the block input (Korthikanti section 5; n h: count/hyperconn.py)
        kept *= block_passes(spec, block)  # Inkling 2 Loop: each pass's checkpoint keeps its own input
        return _ceil_div(kept, tp) if sequence_parallel else kept
    replicated, sharded, score = _layer_terms(spec, block, dtype_bytes, attention, elementwise, norm_elementwise)
    if fp8_inputs:  # TE keeps the linear inputs as fp8 (1 byte) copies instead of 16-bit ones
        replicated, sharded = _fp8_kept(spec, block, dtype_bytes - 1, replicated, sharded)
    standard = block.mixer not in ("mamba", "mlp", PARALLEL_MAMBA2, *LINEAR_MIXERS) and spec.mla is None and not block.cross and block.mlp
    # DTensor SP: the linears' inputs (the norm outputs) are kept all-gathered, whole over tp
    shared_input = (spec.parallel_block and spec.num_norms_per_layer == 1) or not block.mlp or block.mixer == "mlp"
    gathered = (1 if fp8_inputs else dtype_bytes) * spec.hidden * (1 if shared_input else 2) if (
        gathered_inputs and sequence_parallel and tp > 1) else 0
    if recompute == "selective" and ac_mode == "op_sac" and not block.moe and standard and is_fused(attention):
        replicated, sharded = op_sac_kept_per_token(spec, dtype_bytes, tp, sac_saves_attention)
        score, gathered = 0, 0  # op-SAC recomputes the norms and the gathers (its own save list)
    gone = None
    if recompute == "selective" and ac_mode == "modules":  # Megatron-core --recompute-modules
        gone = discarded(spec, block, dtype_bytes, recompute_modules, fp8_inputs)
        replicated, sharded = replicated - gone.replicated, sharded - gone.sharded
        recompute = "selective" if gone.scores else "none"  # the score term stays unless core_attn
    sharded_bytes = sb * sharded
    memory_len = memory_len if block.cross else cross_memory_len(spec)  # BLIP / VisionEncoderDecoder: the image's
    if memory_len:  # K and V over the encoder tokens, per decoder layer
        sharded_bytes += dtype_bytes * micro_batch * memory_len * 2 * spec.kv_width
    if recompute != "selective":  # selective recompute drops the a s^2 part (section 5)
        # the score term is eager attention's (a fused kernel keeps none): it materialises every
        # query's s scores and masks them also in sliding / chunked blocks (HF eager attention,
        # Megatron's unfused softmax), so its keys are the whole sequence
        sharded_bytes += score * sb * seq_len
        if memory_len and not is_fused(attention):
            sharded_bytes += spec.heads * dtype_bytes * sb * memory_len
    replicated_bytes = sb * (replicated - gathered)
    rep = _ceil_div(replicated_bytes, tp) if sequence_parallel else replicated_bytes
    rep += sb * gathered
    # the routed tokens: the tp group's (the dispatcher gathers the sequence-parallel shards) or,
    # under expert tensor parallelism etp < tp, each etp group's share (Megatron-core MoE)
    routed = sb * (dispatch_tp or tp) // tp if sequence_parallel else sb
    copies = 0 if gone is not None and gone.routed_copies else _dispatch_bytes(
        spec, block, routed, dtype_bytes, fp8_inputs, probs_at_combine)
    # Inkling 2 Loop: each pass of a looped block keeps its own activations (count/conv_relative.py)
    return (rep + _ceil_div(sharded_bytes, tp) + copies) * (block_passes(spec, block) if block.looped else 1)


def _dispatch_bytes(spec: "TransformerSpec", block: Block, tokens: int, d: int, fp8_inputs: bool = False,
                    probs_at_combine: bool = False) -> int:
    """The top_k copies of each token the MoE layer keeps: the permuted expert inputs (the
    grouped fc1's saved input) and, with `probs_at_combine`, the expert outputs a combine that
    multiplies them by the routing weights keeps for the weights' gradient (modelplan's numpy
    executor; Megatron-core applies the weights inside the expert activation,
    weighted_bias_swiglu, and unpermutes without probs, so it keeps no such copy). They live on the
    tensor-parallel group's tokens: the all-to-all dispatcher gathers a sequence-parallel
    group's shards before it permutes (MoEAlltoAllTokenDispatcher with expert tensor parallelism
    = tp), so sequence parallelism does not split them. With TE fp8 the permuted inputs are kept
    as their 1-byte casts (GroupedLinear saves the fp8 copy, the 16-bit one is freed)."""
    moe = spec.moe
    if not (block.mlp and block.moe and moe is not None):
        return 0
    return tokens * moe.top_k * spec.hidden * ((1 if fp8_inputs else d) + (d if probs_at_combine else 0))


def activation_bytes_per_layer(
    spec: "TransformerSpec",
    micro_batch: int,
    seq_len: int,
    dtype_bytes: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: Literal["none", "selective", "full"] = "none",
    layer_index: int | None = None,
    attention: str = "eager",
    ac_mode: str = "attention_core",
    elementwise: str = "fused",
    ac_every: int = 2,
    fp8_inputs: bool = False,
    norm_elementwise: str | None = None,
    gathered_inputs: bool = False,
    block: Block | None = None,
    dispatch_tp: int | None = None,
    probs_at_combine: bool = False,
    recompute_modules: tuple[str, ...] = (),
    memory_len: int | None = None,
    sac_saves_attention: bool = True,
) -> int:
    """Activation bytes one block keeps for backward, per GPU, for one micro-batch.

    Korthikanti et al. 2022 (section 4, eq. 1-2 and Table 2), for the GPT layer they derive it
    for (dtype_bytes 2, dropout, LayerNorm, MHA, plain 4h MLP) this is exactly
        none:                 s b h (34 + 5 a s / h)            tp: s b h (10 + 24/t + 5as/(ht))
        tp + sp:              s b h (34 + 5 a s / h) / t
        selective (+ tp):     s b h (10 + 24/t)                 selective + sp: 34 s b h / t
        full:                 2 s b h  (/t with sp: only the block input is kept)
    Generalisation (what changes against the paper, all in bytes per token unless noted):
    - dtype: every 2 of the paper becomes dtype_bytes (d); dropout masks stay 1 byte.
    - no dropout (`spec.dropout` False): the 2 masks (2h) and the softmax-dropout mask and output
      (a s^2 (d + 1) per sequence) disappear: the score term is d a s^2 b instead of 5 a s^2 b.
    - GQA/MQA and head_dim: Q and the output-projection input are q_width = a*head_dim wide, K and
      V kv_width = kv_heads*head_dim wide (kept before any repeat, as fused kernels do):
      d (2 q_width + 2 kv_width) instead of 8h; qk_norm adds the pre-norm Q and K.
    - gated MLP (SwiGLU/GeGLU): 3 d f (fc1 output of width 2f, fc2 input f, Megatron's fused
      bias-swiglu) instead of 2 d f (GeLU input and output, 16h for f = 4h).
    - RMSNorm: keeps its input like LayerNorm (d h per norm); no change (norm statistics, 4 s b
      bytes per norm, are ignored as in the paper). Sandwich norms keep four inputs.
    - parallel blocks (GPT-J/NeoX/Falcon): the norms share one input (d h), and with one norm the
      attention and MLP read the same tensor (d h once, not twice).
    - MoE layers: each token's input is copied to top_k experts (top_k d h; `probs_at_combine`:
      a combine that weights the expert outputs also keeps them, 2 top_k d h), on the tp group's tokens:
      not split by tp, also under sequence parallelism; `dispatch_tp` = etp < tp: each etp group
      routes its share, b s etp / tp tokens, under sequence parallelism); each expert keeps its MLP inner
      activations; routing probabilities are ignored.
    - sliding / chunked layers: an eager kernel still keeps all s scores of a query (masked).
    - MLA: per-head Q, K (nope + rope dims), V and the out-proj input; the latents replicated.
    - Mamba blocks: the selective-scan kernel keeps its inputs (x, z, conv output, delta, B, C,
      y: 5 d_inner + dt_rank + 2N per token) and recomputes the states; no score term.
    - attention 'flash' / 'sdpa' (fused kernels): no score term (no s x s scores, probabilities
      or dropout mask are stored), plus 4 bytes of fp32 log-sum-exp per token and head (/t);
      'eager' (the default here) is the paper's unfused attention.
    - `ac_mode` says what 'selective' keeps (`modelplan.count.checkpointing`): attention_core is
      the paper's; op_sac keeps the block input, every other matmul output, attention's output
      and log-sum-exp (q/k/v attention blocks with a dense MLP; others keep attention_core's);
      op_sac with `sac_saves_attention` False keeps neither (the run's SDPA op is not in the
      engine's save list, `TrainingSpec.sac_saves_attention`);
      layer_sac / every_nth_block keep a whole block in `ac_every` blocks fully recomputed (the
      mean over blocks, rounded up); 'modules' (Megatron-core `--recompute-modules`, listed in
      `recompute_modules`) keeps what the none case keeps less what those modules discard
      (`modelplan.count.recompute_modules`).
    - `elementwise` 'eager' (PyTorch composites, `modelplan.count.eager`): an RMSNorm keeps its
      fp32 input and its output, SwiGLU also keeps silu's output; `norm_elementwise` (None: the
      same) says how the norms alone run (a fused RMSNorm keeps its input only).
    - `fp8_inputs` (Transformer Engine fp8): the linear layers of dense blocks keep their inputs
      as 1-byte fp8 copies (the norm outputs, the output-projection input, the second MLP GEMM's).
    - `gathered_inputs` (PyTorch DTensor sequence parallelism, torchtitan): the mixer's and the
      MLP's inputs (the norm outputs) are kept as the all-gathered full-sequence tensors the
      column-parallel linears saved, d h each not split by t; Megatron keeps the shard and gathers
      again in backward (Korthikanti et al. 2022 sec. 4.2.2), which the formulas above assume.
    `layer_index` picks a block (block kinds differ), or `block` names its kind (an MTP module's);
    None gives the largest block. `memory_len`: the encoder tokens per sequence an encoder-decoder's
    cross-attention keeps K and V of (None: seq_len). Division by t
    rounds up (exact when t divides the sizes). These are estimates of what a Megatron-style
    implementation keeps, not measured.
    """
    indices = range(spec.num_blocks) if layer_index is None else (layer_index,)
    kinds = {block} if block is not None else {block_of(spec, i) for i in indices}
    return max(
        _block_bytes(spec, kind, micro_batch, seq_len, dtype_bytes, tp, sequence_parallel, recompute, attention,
                     memory_len=seq_len if memory_len is None else memory_len, ac_mode=ac_mode,
                     elementwise=elementwise, ac_every=ac_every,
                     fp8_inputs=fp8_inputs, norm_elementwise=norm_elementwise, gathered_inputs=gathered_inputs,
                     dispatch_tp=dispatch_tp, probs_at_combine=probs_at_combine,
                     recompute_modules=recompute_modules, sac_saves_attention=sac_saves_attention)
        for kind in kinds
    )


def embedding_activation_bytes(
    spec: "TransformerSpec", micro_batch: int, seq_len: int, tp: int = 1,
    sequence_parallel: bool = False,
) -> int:
    """Input-side activations of one micro-batch: int64 token ids and the embedding-dropout mask.

    Per micro-batch; under 1F1B the first pipeline stage holds p of them (Megatron's 8 s b p +
    s b h p), which the planner multiplies in.
    """
    sb = seq_len * micro_batch
    mask = sb * spec.hidden if spec.dropout else 0  # 1-byte mask, /t with sp (Megatron estimator)
    return TOKEN_ID_BYTES * sb + (_ceil_div(mask, tp) if sequence_parallel else mask)


def output_activation_bytes(
    spec: "TransformerSpec", micro_batch: int, seq_len: int, dtype_bytes: int, tp: int = 1,
    loss_bytes_per_logit: int = FP32,
) -> int:
    """Output layer + cross-entropy activations of one micro-batch (last pipeline stage).

    Megatron's estimator: 4 s b h (1 + V/h) / t for 16-bit activations, read as the final-norm
    output and head input (2 d s b h) plus fp32 logits for the loss (4 s b V, the default
    `loss_bytes_per_logit`); 0 without lm_head. What each loss kernel really holds per logit is
    `modelplan.count.loss_kernels.loss_kernel_peak_bytes` (Megatron's unfused loss 4 + d,
    eager `F.cross_entropy(logits.float())` 12, Transformer Engine's d, ...).
    """
    if not spec.lm_head:
        return 0
    sb = seq_len * micro_batch
    return _ceil_div(2 * dtype_bytes * sb * spec.hidden + loss_bytes_per_logit * sb * spec.vocab, tp)


def kv_cache_tokens(spec: "TransformerSpec", block: Block, seq_len: int, memory_len: int = 0) -> int:
    """Tokens a block caches for one sequence of `seq_len` (its window or chunk at most)."""
    if block.mixer in ("mamba", "mlp", *LINEAR_MIXERS) or (spec.arch == "encoder_decoder" and not block.cross) or not spec.causal \
            or block.kv_shared:  # Gemma 3n: the K/V-sharing blocks read an earlier block's cache
        return 0
    return keys_per_query(spec, block.mixer, seq_len) + (memory_len if block.cross else 0)


def kv_bytes_per_cached_token(spec: "TransformerSpec") -> int:
    """Elements one cached token of one attention block holds: K and V at kv_width (MHA/GQA/MQA),
    or MLA's compressed latent plus the shared rope key, d_c + d_h^R (DeepSeek-V2 sec. 2.1.2,
    what vLLM/SGLang cache; transformers' own cache keeps the expanded K and V)."""
    if spec.mla is not None:  # DeepSeek-V3.2 also caches each token's index key (DynamicIndexedLayer)
        ix = spec.mla.indexer.head_dim if spec.mla.indexer is not None else 0
        return spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim + ix
    return spec.kv_width + spec.v_width


def kv_cache_bytes(spec: "TransformerSpec", batch: int, seq_len: int, dtype_bytes: int,
                   decoder_seq_len: int | None = None) -> int:
    """Inference cache for `batch` sequences of `seq_len`: K/V (or MLA latents) of every attention
    block over the keys it keeps (a sliding window or chunk caps them), Mamba's conv and SSM states
    (HF MambaCache: d_inner x conv_kernel and d_inner x N per block, whatever the length), and for
    an encoder-decoder the decoder's self-attention over decoder_seq_len plus cross-attention K/V
    over the seq_len encoder tokens (a decoder reading seq2seq.cross_memory image tokens: theirs).
    0 for encoders."""
    if not spec.causal:
        return 0
    dec = decoder_seq_len or seq_len
    elements = 0
    for index in range(spec.num_blocks):
        block = block_of(spec, index)
        before = elements
        if block.mixer == "mamba":
            elements += spec.ssm.inner * (spec.ssm.conv_kernel + spec.ssm.state_size)
        elif block.mixer in LINEAR_MIXERS:  # conv window and SSM / delta-rule state (count/mixers.py)
            elements += state_elements(spec, block.mixer)
        elif block.mixer == PARALLEL_MAMBA2:  # Falcon-H1: K/V and the Mamba-2 states
            elements += state_elements(spec, "mamba2") + kv_bytes_per_cached_token(spec) * kv_cache_tokens(
                spec, block, seq_len)
        elif block.cross:
            elements += 2 * spec.kv_width * (dec + seq_len)
        elif spec.compressed_attention is not None:  # DeepSeek-V4's window and compressed keys
            elements += compressed_cache_elements(spec, block.compressor, seq_len)
        else:  # (its layer type's kv heads: MiMo-V2-Flash, specs/attention_shape.py)
            elements += kv_bytes_per_cached_token(for_mixer(spec, block.mixer)) * kv_cache_tokens(spec, block, seq_len)
            elements += 2 * spec.kv_width * cross_memory_len(spec)  # BLIP / VisionEncoderDecoder: the image's cross K/V
        if block.shared:  # Zamba: each use of the shared attention caches its own K and V
            elements += use_cache_elements(spec, seq_len)
        # Inkling's conv states (its own per block, as for_mixer's sizes); a looped block's cache per pass
        elements += conv_cache_elements(for_block(spec, block), block)
        if block.looped:  # Inkling2LoopTextModel deep-copies the loop layers' caches for each later pass
            elements += (elements - before) * (block_passes(spec, block) - 1)
    return batch * elements * dtype_bytes


def kv_cache_bytes_per_token(spec: "TransformerSpec", dtype_bytes: int) -> int:
    """Bytes each further token of context adds to one sequence's cache once every window is full:
    the full-attention blocks' K/V (or MLA latents); sliding, chunked and Mamba blocks add none."""
    if not spec.causal:
        return 0
    per_block = kv_bytes_per_cached_token(for_mixer(spec, "full_attention")) if spec.arch != "encoder_decoder" else 2 * spec.kv_width
    grows = sum(  # (a looped block's cache grows once per pass: count/conv_relative.py)
        block_passes(spec, block) if block.looped else 1 for i in range(spec.num_blocks)
        if (block := block_of(spec, i)).mixer in ("full_attention", PARALLEL_MAMBA2) and (spec.arch != "encoder_decoder" or block.cross)
        and not block.kv_shared
    )
    shared = len(spec.shared_block.layers) * use_cache_elements(spec, 1) if spec.shared_block is not None else 0
    return (grows * per_block + shared) * dtype_bytes


def count_memory(spec, training: "TrainingSpec", micro_batch: int) -> MemoryCount:
    """Model states and the activations of one micro-batch, for one unsharded replica, by the
    model's family (`specs/family.py`)."""
    return family_of(spec).call("memory", spec, training, micro_batch)


def count_transformer_memory(spec, training: "TrainingSpec", micro_batch: int) -> MemoryCount:
    """`count_memory` of a transformer: model states and one micro-batch's activations.

    Encoder-decoders: decoder blocks and the head on decoder_seq_len tokens, cross-attention over
    seq_len encoder tokens. MTP modules (DeepSeek-V3) each keep a block, their norm and projection
    inputs (4 d h per token) and their own logits."""
    seq_len, d = training.seq_len, training.dtype_bytes
    dec_len = decoder_seq_len(spec, training)
    check_seq_len(spec, seq_len, dec_len)
    counted = count_params(spec)
    params = counted.total
    cache: dict[tuple[Block, str], int] = {}
    per_layer = []
    modules = training.recompute_modules or ()
    method, group = training.recompute_method, training.recompute_num_layers or 1
    for index in range(spec.num_blocks):  # one replica: the whole model is one chunk
        block = block_of(spec, index)
        rc = training.recompute
        if rc == "full" and method == "block" and index >= group:
            rc = "none"  # block: only the first N layers are checkpointed
        if rc == "full" and method == "uniform" and index % group:
            per_layer.append(0)  # uniform: inside a group only the group's input is kept
            continue
        if (block, rc) not in cache:
            cache[block, rc] = _block_bytes(spec, block, micro_batch, dec_len if block.cross else seq_len, d, 1,
                                            False, rc, training.attention, memory_len=seq_len,
                                            ac_mode="modules" if modules else "attention_core",
                                            recompute_modules=modules)
        per_layer.append(cache[block, rc])
    head_len = dec_len or seq_len
    activations = (
        embedding_activation_bytes(spec, micro_batch, seq_len)
        + sum(per_layer)
        + output_activation_bytes(spec, micro_batch, head_len, d)
    )
    if spec.mtp_layers:
        mtp = _block_bytes(spec, mtp_block(spec), micro_batch, seq_len, d, 1, False, training.recompute,
                           training.attention)
        inputs = 4 * d * micro_batch * seq_len * spec.hidden  # enorm and hnorm inputs (h each), eh_proj's (2h)
        activations += spec.mtp_layers * (mtp + inputs + output_activation_bytes(spec, micro_batch, seq_len, d))
    trained = counted.trainable  # frozen sinusoid tables (count.seq2seq, count.extras): no gradient, no optimizer state
    return MemoryCount(
        weights=params * d,
        gradients=trained * training.grad_bytes,
        optimizer=trained * training.optimizer_state_bytes * training.optimizer_states,
        master_weights=trained * FP32_BYTES if training.uses_master_weights else 0,
        activations=activations,
        activations_per_layer=per_layer,
        kv_cache=kv_cache_bytes(spec, micro_batch, seq_len, d, dec_len or None),
        kv_cache_per_token=kv_cache_bytes_per_token(spec, d),
        kv_state_per_sequence=kv_cache_bytes(spec, 1, 0, d),  # the cache of a sequence of 0 tokens
    )
