"""Cross-field checks of a TransformerSpec (run by its validator; each raises one ValueError
line that names the fields and their values)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.specs.attention_shape import check_shapes
from modelplan.specs.compressed_attention import check_compressed
from modelplan.specs.extras import check_extras

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def check_transformer(spec: "TransformerSpec") -> None:
    """Raise ValueError naming the first inconsistent fields of `spec`."""
    _check_attention(spec)
    _check_blocks(spec)
    _check_heads(spec)
    check_extras(spec)  # specs/extras.py


def _check_attention(spec: "TransformerSpec") -> None:
    if spec.head_dim is None and spec.mla is None and spec.hidden % spec.heads:
        raise ValueError(
            f"heads ({spec.heads}) must divide hidden ({spec.hidden}) when no head_dim is given"
        )
    kv = spec.num_kv_heads
    if spec.heads % kv:
        raise ValueError(f"kv_heads ({kv}) must divide heads ({spec.heads})")
    if spec.mla is not None and spec.qk_norm:
        raise ValueError("qk_norm does not apply to mla (its latents have their own norms)")
    if spec.nope_full_attention and spec.qk_norm and spec.qk_norm_weight != "none":
        raise ValueError(f"qk_norm_weight ('{spec.qk_norm_weight}') with nope_full_attention: q/k norms sit on the "
                         "rotary blocks only there, and only weight-free ones (Llama 4's L2 norm) are modelled")
    if (spec.head_gate_bias or spec.differential_attention) and spec.mla is not None:
        raise ValueError("head_gate_bias and differential_attention apply to q/k/v attention, not mla")
    if spec.head_gate_bias and spec.head_gate is None:
        raise ValueError("head_gate_bias needs a head_gate")
    if spec.v_head_dim is not None and spec.mla is not None:
        raise ValueError("v_head_dim does not apply to mla (set mla.v_head_dim)")
    check_shapes(spec)
    check_compressed(spec)  # specs/compressed_attention.py
    if spec.attention_experts is not None and (spec.mla is not None or spec.heads // kv > spec.attention_experts):
        raise ValueError(f"attention_experts ({spec.attention_experts}) needs q/k/v attention and at least "
                         f"heads / kv_heads ({spec.heads // kv}) experts")
    if spec.differential_attention and kv % 2:  # DiffLlamaAttention splits V over its kv heads
        raise ValueError(f"differential_attention needs an even kv_heads (got {kv})")
    types = set(spec.layer_types or ())
    if "sliding_attention" in types and spec.sliding_window is None:
        raise ValueError("layer_types has sliding_attention but sliding_window is not set")
    if "chunked_attention" in types and spec.attention_chunk is None:
        raise ValueError("layer_types has chunked_attention but attention_chunk is not set")
    if "mamba" in types and spec.ssm is None:
        raise ValueError("layer_types has mamba but ssm is not set")
    if spec.ssm is not None and "mamba" not in types:
        raise ValueError("ssm is set but no block is mamba (add 'mamba' to layer_types)")
    if "parallel_mamba2" in types:
        types = types | {"mamba2"}  # Falcon-H1 blocks hold a Mamba-2 mixer too
    for kind, field in (("mamba2", "mamba2"), ("gated_deltanet", "deltanet"), ("short_conv", "short_conv"),
                        ("rglru", "rglru"), ("lightning", "lightning"), ("rwkv", "rwkv"),
                        ("mlstm", "mlstm")):
        if (kind in types) != (getattr(spec, field) is not None):
            raise ValueError(f"layer_types has {kind} but {field} is not set" if kind in types
                             else f"{field} is set but no block is {kind} (add '{kind}' to layer_types)")


def _check_blocks(spec: "TransformerSpec") -> None:
    if spec.arch == "encoder_decoder":
        if (spec.moe is not None and spec.moe.layers is None) or spec.mtp_layers:  # Switch: moe.layers over both stacks
            raise ValueError("encoder_decoder models take no mtp_layers, and moe only with explicit moe.layers")
        if set(spec.layer_types or ()) - {"full_attention", "sliding_attention"}:
            raise ValueError(f"encoder_decoder layer_types ({sorted(set(spec.layer_types))}) must be full_attention "
                             "or sliding_attention (each stack repeats them from its first block)")
    elif spec.decoder_layers is not None:
        raise ValueError(f"decoder_layers ({spec.decoder_layers}) needs arch 'encoder_decoder'")
    s2s = spec.seq2seq
    if s2s is not None and s2s.idle_cross_attention != (spec.arch == "decoder"):
        raise ValueError(f"seq2seq.idle_cross_attention must be true exactly for arch 'decoder' (a decoder "
                         f"built alone); got {s2s.idle_cross_attention} with arch '{spec.arch}'")
    if spec.inputs is not None and (spec.arch != "encoder" or spec.type_vocab):
        raise ValueError(f"inputs (images / audio) needs arch 'encoder' without token types, not '{spec.arch}'")
    if s2s is not None and s2s.cross_memory is not None and not s2s.idle_cross_attention:
        raise ValueError("seq2seq.cross_memory needs idle_cross_attention (a decoder whose encoder_attn reads it)")
    if s2s is not None and (spec.arch == "encoder" or (s2s.audio is not None and spec.arch != "encoder_decoder")):
        raise ValueError(f"seq2seq is for arch 'encoder_decoder' (or a decoder built alone, without the audio "
                         f"front-end), not '{spec.arch}'")
    moe = spec.moe
    if moe is not None and moe.first_dense_layers > spec.layers:
        raise ValueError(
            f"moe.first_dense_layers ({moe.first_dense_layers}) exceeds layers ({spec.layers})"
        )
    if moe is not None and moe.layers is not None and any(i >= spec.num_blocks for i in moe.layers):
        raise ValueError(f"moe.layers ({moe.layers}) must be below the model's {spec.num_blocks} blocks")
    if moe is not None and not any(spec.has_mlp(i) for i in range(spec.layers)):
        raise ValueError("moe needs mlp (blocks without an MLP have no experts)")
    if "mlp" in set(spec.layer_types or ()) and spec.mlp:
        raise ValueError("layer_types has mlp (mixer-free MLP blocks) but mlp is true: set mlp false")
    dense = any(spec.has_mlp(i) and not spec.is_moe_layer(i) for i in range(spec.layers))
    if dense and spec.ffn_hidden == 0:
        raise ValueError("ffn_hidden must be > 0: some blocks have a dense MLP")
    if spec.kv_shared_layers >= spec.layers and spec.kv_shared_layers:
        raise ValueError(f"kv_shared_layers ({spec.kv_shared_layers}) must be below layers ({spec.layers})")
    if (spec.altup or spec.per_layer_input or spec.laurel_rank or spec.kv_shared_layers) and spec.arch != "decoder":
        raise ValueError("altup, per_layer_input, laurel_rank and kv_shared_layers need a decoder model")
    shared = spec.shared_block
    if shared is not None and (spec.arch != "decoder" or any(i >= spec.layers for i in shared.layers)):
        raise ValueError(f"shared_block.layers ({shared.layers}) must be blocks of a decoder below layers ({spec.layers})")
    if spec.mtp_layers and spec.arch != "decoder":
        raise ValueError(f"mtp_layers ({spec.mtp_layers}) needs a decoder model")


def _check_heads(spec: "TransformerSpec") -> None:
    if spec.lm_head_bias and not spec.lm_head:
        raise ValueError("lm_head_bias needs lm_head (there is no output head to carry it)")
    if spec.head_bias_copy and not spec.lm_head_bias:
        raise ValueError("head_bias_copy needs lm_head_bias (it copies the head's bias)")
    if spec.mlm_transform and not spec.lm_head and spec.classifier is None:
        raise ValueError("mlm_transform needs lm_head or a classifier (it feeds the output head)")
    if spec.mtp_layers and not spec.lm_head:
        raise ValueError("mtp_layers needs lm_head (the modules share the output head)")
