"""Megatron-LM's model flags from a transformer spec: the network the launch trains.

Flag names are those of NVIDIA/Megatron-LM `megatron/training/arguments.py` at the release in
`modelplan.export.versions` (core_v0.16.1): `_add_network_size_args` (many flags there are
generated from megatron-core's `TransformerConfig` field names) and `_add_moe_args`.
What Megatron cannot express is appended to `notes`.
"""

from __future__ import annotations

from modelplan.count.flops import decoder_seq_len
from modelplan.plan.validate import padded_vocab
from modelplan.specs.extras import extras_features
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

Arg = tuple[str, str | None]
"""One argument: the flag and its value (None for a store_true flag)."""

MEGATRON_DEFAULT_ROTARY_BASE = 10000
"""arguments.py `--rotary-base` default (core_v0.16.1)."""


def max_position_embeddings(model: TransformerSpec, training: TrainingSpec, notes: list[str]) -> int:
    """arguments.py asserts max_position_embeddings >= seq_length (and >= decoder_seq_length, an
    encoder-decoder's target length); a rotary model has no position table, so the flag only sizes
    the RoPE cache and may grow to the sequence."""
    longest = max(training.seq_len, decoder_seq_len(model, training))
    if longest <= model.max_positions:
        return model.max_positions
    if model.position == "learned":
        notes.append(
            f"{'seq_len' if longest == training.seq_len else 'decoder_seq_len'} ({longest}) exceeds the learned position table "
            f"({model.max_positions}): --max-position-embeddings grows it to {longest}"
        )
    return longest


def model_args(
    model: TransformerSpec, training: TrainingSpec, plan: Plan, notes: list[str],
    vocab_divisible_by: int = 128,
) -> list[Arg]:
    """Size and architecture flags (GQA groups, SwiGLU, RMSNorm, RoPE, tied head, vocab padded
    as the plan's cost model priced it: to a multiple of vocab_divisible_by * tp)."""
    args: list[Arg] = [
        ("--num-layers", str(model.layers)),
        ("--hidden-size", str(model.hidden)),
        ("--ffn-hidden-size", str(model.ffn_hidden)),
        ("--num-attention-heads", str(model.heads)),
        ("--kv-channels", str(model.dim_head)),
    ]
    if model.num_kv_heads != model.heads:
        # --num-query-groups is the number of key/value heads (arguments.py, network size group).
        args += [("--group-query-attention", None), ("--num-query-groups", str(model.num_kv_heads))]
    args.append(("--max-position-embeddings", str(max_position_embeddings(model, training, notes))))
    position = {"rotary": "rope", "learned": "learned_absolute", "none": "none"}.get(model.position)
    if position is None:
        notes.append(f"position encoding '{model.position}' has no --position-embedding-type")
    else:
        args.append(("--position-embedding-type", position))
    if model.position == "rotary":
        args += _rope_args(model, notes)
    args.append(("--normalization", {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}[model.norm]))
    args.append(("--norm-epsilon", repr(model.norm_eps)))
    if model.norm == "layernorm" and not model.norm_bias:
        notes.append("LayerNorm without bias: Megatron's LayerNorm always has a bias")
    if model.norm == "rmsnorm" and model.norm_bias:
        notes.append("RMSNorm with a bias: Megatron's RMSNorm has none")
    args += _mlp_args(model, notes)
    if model.qk_norm:
        args.append(("--qk-layernorm", None))  # norm type follows --normalization in mcore
    if not model.tied_embeddings:
        args.append(("--untie-embeddings-and-output-weights", None))
    # Megatron pads the table to a multiple of this times tp (tokenizer _vocab_size_with_padding).
    args.append(("--make-vocab-size-divisible-by", str(vocab_divisible_by)))
    padded = padded_vocab(model.vocab, plan.tp, vocab_divisible_by)
    if padded != model.vocab:
        notes.append(f"vocabulary {model.vocab} is padded to {padded} (a multiple of "
                     f"{vocab_divisible_by} * tp {plan.tp}), as the plan priced it")
    if not model.dropout:
        args += [("--attention-dropout", "0.0"), ("--hidden-dropout", "0.0")]
    _architecture_notes(model, notes)
    if model.moe is not None:
        args += moe_args(model, plan, notes, training.moe_flex_dispatcher)
    if model.mtp_layers:
        args += mtp_args(model, notes)
    return args


MEGATRON_MTP_LOSS_SCALE = 0.1
"""TransformerConfig.mtp_loss_scaling_factor default (megatron-core transformer_config.py, core_v0.16.1)."""


def mtp_args(model: TransformerSpec, notes: list[str]) -> list[Arg]:
    """Multi-token prediction: --mtp-num-layers and --mtp-loss-scaling-factor (arguments.py flags
    generated from TransformerConfig.mtp_num_layers / mtp_loss_scaling_factor, core_v0.16.1)."""
    args: list[Arg] = [("--mtp-num-layers", str(model.mtp_layers))]
    if model.mtp_loss_weight != MEGATRON_MTP_LOSS_SCALE:
        args.append(("--mtp-loss-scaling-factor", repr(model.mtp_loss_weight)))
    if model.position not in ("rotary", "none"):  # arguments.py validate_args asserts rope or none with MTP
        notes.append(f"MTP with position encoding '{model.position}': Megatron-LM runs MTP with rope or none only")
    return args


def _mlp_args(model: TransformerSpec, notes: list[str]) -> list[Arg]:
    args: list[Arg] = []
    if model.gated_mlp and model.activation == "silu":
        args.append(("--swiglu", None))
    elif model.gated_mlp:
        notes.append(f"gated MLP with '{model.activation}': Megatron offers --swiglu (SiLU) only")
    elif model.activation == "gelu_tanh":
        args.append(("--openai-gelu", None))
    elif model.activation != "gelu":
        notes.append(f"activation '{model.activation}': Megatron's plain MLP uses GeLU")
    biases = (model.qkv_bias, model.attn_out_bias, model.mlp_bias)
    if biases == (False, False, False):
        args.append(("--disable-bias-linear", None))
    elif biases == (True, False, False):
        args += [("--disable-bias-linear", None), ("--add-qkv-bias", None)]
    elif biases != (True, True, True):
        notes.append(
            f"linear biases qkv={model.qkv_bias} attn_out={model.attn_out_bias} "
            f"mlp={model.mlp_bias}: Megatron sets all linear biases together (or QKV only)"
        )
    return args


def _architecture_notes(model: TransformerSpec, notes: list[str]) -> None:
    extras = {
        "parallel attention+MLP blocks": model.parallel_block,
        "a bias on the output head": model.lm_head_bias,
        "a norm after the embeddings": model.embedding_norm,
        "no final norm": not model.final_norm,
        f"an embedding width ({model.embedding_dim}) other than hidden": model.embedding_dim
        not in (None, model.hidden),
    }
    for what, present in extras.items():
        if present:
            notes.append(f"{what}: not a Megatron GPT option")
    notes.extend(f"{name}: not a Megatron GPT option" for name in extras_features(model))  # specs/extras.py
    if model.arch == "encoder":
        notes.append("encoder (BERT) models launch with pretrain_bert.py, not pretrain_gpt.py")
    if model.arch == "encoder_decoder":  # Megatron-LM's encoder-decoder entry point is pretrain_t5.py
        notes.append("encoder-decoder models launch with pretrain_t5.py (encoder and decoder stacks, "
                     "cross-attention, --encoder-num-layers / --decoder-num-layers), not pretrain_gpt.py as written here")


def moe_args(model: TransformerSpec, plan: Plan, notes: list[str], flex_dispatcher: str | None = None) -> list[Arg]:
    """MoE flags: experts, router, expert parallel and expert-tensor parallel, dispatcher (the
    all-to-all one, or the flex one with the training's DeepEP / HybridEP backend)."""
    moe = model.moe
    assert moe is not None  # caller checks
    args: list[Arg] = [
        ("--num-experts", str(moe.num_experts)),
        ("--moe-router-topk", str(moe.top_k)),
        ("--moe-ffn-hidden-size", str(moe.expert_ffn_hidden)),
        # the plan's expert tensor parallel (Plan.etp, plan/shard.py), by default tp
        ("--expert-tensor-parallel-size", str(plan.etp or plan.tp)),
        # alltoall: tokens go to the ep ranks holding their experts (the dispatch modelplan prices;
        # Megatron's default 'allgather' gathers every token on every rank).
        ("--moe-token-dispatcher-type", "alltoall" if flex_dispatcher is None else "flex"),
    ]
    if flex_dispatcher is not None:  # arguments.py --moe-flex-dispatcher-backend {deepep, hybridep}
        args.append(("--moe-flex-dispatcher-backend", flex_dispatcher))
    if moe.shared_experts:
        # "total ffn hidden size" of all shared experts (arguments.py, moe group).
        shared = moe.shared_experts * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden)
        args.append(("--moe-shared-expert-intermediate-size", str(shared)))
    if moe.first_dense_layers or moe.layer_freq != 1:
        # Explicit per-layer pattern (1 = MoE): Megatron's integer form puts MoE on layer 0.
        pattern = ",".join("1" if model.is_moe_layer(i) else "0" for i in range(model.layers))
        args.append(("--moe-layer-freq", f"[{pattern}]"))
    if moe.capacity_factor is not None:
        args.append(("--moe-expert-capacity-factor", repr(moe.capacity_factor)))
    if moe.router_bias:
        notes.append("router bias: Megatron's router linear has no bias")
    if moe.shared_expert_gate:
        notes.append("shared-expert gate (Qwen2-MoE): not expressed by these arguments")
    return args


def _rope_args(model: TransformerSpec, notes: list[str]) -> list[Arg]:
    """--rotary-base (an int in arguments.py:1655 at core_v0.16.1) and --rotary-percent
    (arguments.py:1657) from the spec's RoPE base and rotated share."""
    args: list[Arg] = []
    theta = model.rope_theta
    if theta is None:
        notes.append(f"RoPE base: the spec states none, so Megatron's --rotary-base default "
                     f"({MEGATRON_DEFAULT_ROTARY_BASE}) applies")
    elif float(theta).is_integer():
        args.append(("--rotary-base", str(int(theta))))
    else:
        notes.append(f"RoPE base {theta:g} is not an integer: Megatron's --rotary-base takes an int")
    if model.rotary_fraction != 1.0:
        args.append(("--rotary-percent", repr(model.rotary_fraction)))
    if model.rope_scaling == "yarn":
        # Megatron-core takes YaRN's factor, original length, betas and mscale as config fields
        # (yarn_rotary_embedding.py); the spec records only that YaRN is used, so plain RoPE is written.
        notes.append("YaRN RoPE scaling: its factor / original length / betas are not in the spec; "
                     "the arguments write plain RoPE, set Megatron's YaRN fields by hand")
    return args

