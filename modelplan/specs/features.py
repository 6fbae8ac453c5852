"""The architectural features a TransformerSpec uses beyond the baseline block (pre-norm q/k/v
attention over the full sequence, dense or softmax-routed MoE MLP, LM head), by name.

One list, read by the executor (which refuses by name what it cannot run: `execute/support.py`)
and by the planner (which says in its notes what it prices as a baseline block). A feature's name
is the spec field, with its value where the field is not a flag (`norm_placement=sandwich`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.specs.extras import extras_features

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def _layer_type_features(spec: "TransformerSpec") -> list[str]:
    types = set(spec.layer_types or ())
    return [f"layer_types={kind}" for kind in ("sliding_attention", "chunked_attention", "mamba", "mamba2", "gated_deltanet", "mlp",
                                                                   "parallel_mamba2", "short_conv", "rglru",
                                                                   "lightning", "rwkv", "mlstm")
            if kind in types]


def _moe_features(spec: "TransformerSpec") -> list[str]:
    moe = spec.moe
    if moe is None:
        return []
    out = []
    if moe.router not in ("softmax", "topk_softmax"):
        out.append(f"moe.router={moe.router}")
    checks = {
        "moe.norm_topk_prob=false": moe.router == "softmax" and not moe.norm_topk_prob,
        "moe.router_score_correction": moe.router_score_correction,
        "moe.score_correction_param": moe.score_correction_param,
        "moe.routed_scaling": moe.routed_scaling != 1.0,
        "moe.router_groups": moe.router_groups > 1,
        "moe.weights_on_input": moe.weights_on_input,
        "moe.shared_expert_gate": moe.shared_expert_gate,
        "moe.expert_bias": moe.expert_bias is not None and moe.expert_bias != spec.mlp_bias,
        "moe.zero_experts": moe.zero_experts > 0,
        "moe.shortcut": moe.shortcut,
        "moe.output_bias": moe.output_bias,
        "moe.router_scales": moe.router_scales,
        "moe.branch_norms": moe.branch_norms > 0,
    }
    return out + [name for name, used in checks.items() if used]


def architecture_features(spec: "TransformerSpec") -> list[str]:
    """Names of every non-baseline feature `spec` uses, in spec order."""
    default_scale = (spec.mla.qk_head_dim if spec.mla is not None else spec.dim_head) ** -0.5
    checks = {
        "arch=encoder_decoder": spec.arch == "encoder_decoder",
        "seq2seq.audio": spec.seq2seq is not None and spec.seq2seq.audio is not None,  # Whisper's conv front-end
        # a decoder built alone keeps encoder_attn weights (TrOCR, BLIP, VisionEncoderDecoder), run on image tokens or not
        "seq2seq.idle_cross_attention": spec.seq2seq is not None and spec.seq2seq.idle_cross_attention,
        "qk_norm": spec.qk_norm,
        "attention_sinks": spec.attention_sinks,
        "attn_logit_softcap": spec.attn_logit_softcap is not None,
        "final_logit_softcap": spec.final_logit_softcap is not None,
        "attention_scale": spec.attention_scale is not None and abs(spec.attention_scale - default_scale) > 1e-12,
        "qkv_clip": spec.qkv_clip is not None,
        "rotary_fraction": spec.position == "rotary" and spec.rotary_fraction != 1.0,
        "nope_full_attention": spec.nope_full_attention,
        "mla": spec.mla is not None,
        "mla.indexer": spec.mla is not None and spec.mla.indexer is not None,
        "mla.rope_key_norm": spec.mla is not None and spec.mla.rope_key_norm,
        "mla.softmax_scales": spec.mla is not None and spec.mla.softmax_scales,
        "mla.nope_layers": spec.mla is not None and bool(spec.mla.nope_layers),
        "mla.kv_source": spec.mla is not None and spec.mla.kv_source is not None,
        "mla.indexer.query_from_hidden": spec.mla is not None and spec.mla.indexer is not None and spec.mla.indexer.query_from_hidden,
        "shared_block": spec.shared_block is not None,
        "altup": spec.altup is not None,
        "hyper_connections": spec.hyper_connections is not None,
        "compressed_attention": spec.compressed_attention is not None,
        "cca": spec.cca is not None,
        "token_indexer": spec.token_indexer is not None,
        "residual_affine": spec.residual_affine,
        "moe.router_mlp": spec.moe is not None and spec.moe.router_mlp is not None,
        "per_layer_input": spec.per_layer_input is not None,
        "laurel_rank": spec.laurel_rank is not None,
        "kv_shared_layers": spec.kv_shared_layers > 0,
        "kv_shared_ffn_hidden": spec.kv_shared_ffn_hidden is not None,
        "ssm.heads": spec.ssm is not None and spec.ssm.heads > 1,
        "attention_output_gate": spec.attention_output_gate,
        "head_gate": spec.head_gate is not None,
        "differential_attention": spec.differential_attention,
        "v_head_dim": spec.v_head_dim is not None and spec.v_head_dim != spec.dim_head,
        "attention_by_type": bool(spec.attention_by_type),
        "value_is_key": spec.value_is_key,
        "attention_experts": spec.attention_experts is not None,
        "dynamic_mask": spec.dynamic_mask,
        "residual_weights": spec.residual_weights,
        "product_key_experts": spec.product_key_experts is not None,
        "deltanet.kda": spec.deltanet is not None and spec.deltanet.kda,
        "deltanet.kda_full_rank_gates": spec.deltanet is not None and spec.deltanet.kda_full_rank_gates,
        "mlp=false": not spec.mlp,
        f"position={spec.position}": spec.position in ("alibi", "relative"),
        f"norm_placement={spec.placement}": spec.placement != "pre",
        "norm_affine=false": not spec.norm_affine,
        "embedding_dim": spec.embedding_dim is not None and spec.embedding_dim != spec.hidden,
        "embedding_scale": spec.embedding_scale is not None and spec.embedding_scale != 1.0,
        "residual_scale": spec.residual_scale != 1.0,
        "logit_scale": spec.logit_scale != 1.0,
        "activation=swiglu_clamp": spec.activation == "swiglu_clamp",
        "pooler": spec.pooler,
        "mlm_transform": spec.mlm_transform,
        "head_bias_copy": spec.head_bias_copy,
        "lm_head=false": not spec.lm_head,
        "classifier": spec.classifier is not None,
        "mtp_layers": spec.mtp_layers > 0,
        "vision": spec.vision is not None,
        "inputs": spec.inputs is not None,  # image / audio encoder front-ends (specs/encoder_inputs.py)
    }
    return ([name for name, used in checks.items() if used] + _layer_type_features(spec) + _moe_features(spec)
            + extras_features(spec))
