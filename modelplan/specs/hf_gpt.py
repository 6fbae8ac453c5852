"""HF config mappers of the GPT-style families (LayerNorm with biases, fused or learned
positions): gpt2, gpt_bigcode, gpt_neox, falcon, bloom, opt, phi, and the BERT encoder."""

from __future__ import annotations

from typing import Any, Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig

# GPT-2 style blocks: LayerNorm with bias, a bias on every linear, plain (non-gated) MLP.
GPT_STYLE: dict[str, Any] = dict(
    norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
    gated_mlp=False,
)


def rotary_fraction(c: HFConfig, default: float = 1.0) -> float:
    """partial_rotary_factor, top level or inside rope_parameters / rope_scaling (HF 5 moves it)."""
    for key in ("rope_parameters", "rope_scaling"):
        nested = c.sub(key)
        if nested is not None and nested.has("partial_rotary_factor"):
            return nested.number("partial_rotary_factor")
    return c.number("partial_rotary_factor", default)


def _gpt2(c: HFConfig, multi_query: bool = False) -> dict:
    """GPT-2 (and GPTBigCode with MQA): learned positions, LayerNorm, biases everywhere, tied."""
    hidden = c.size("n_embd", "hidden_size")
    return dict(
        layers=c.size("n_layer", "num_hidden_layers"),
        hidden=hidden,
        heads=c.size("n_head", "num_attention_heads"),
        kv_heads=1 if multi_query else None,
        ffn_hidden=c.integer("n_inner", None) or 4 * hidden,
        vocab=c.size("vocab_size"),
        max_positions=c.integer("n_positions", 1024, "max_position_embeddings"),
        position="learned",
        **GPT_STYLE,
        norm_eps=c.number("layer_norm_epsilon", 1e-5),
        activation=c.activation("gelu_new", "activation_function"),
        tied_embeddings=c.flag("tie_word_embeddings", True),
        dropout=c.dropout(0.1, "resid_pdrop", "embd_pdrop", "attn_pdrop"),
    )


def _gpt_bigcode(c: HFConfig) -> dict:
    """GPTBigCode (SantaCoder/StarCoder): GPT-2 blocks with multi-query attention by default."""
    spec = _gpt2(c, multi_query=c.flag("multi_query", True))
    spec["activation"] = c.activation("gelu_pytorch_tanh", "activation_function")
    return spec


def _gpt_neox(c: HFConfig) -> dict:
    """GPT-NeoX / Pythia: parallel residual by default, two LayerNorms per block, untied."""
    bias = c.flag("attention_bias", True)
    return dict(
        layers=c.size("num_hidden_layers"),
        hidden=c.size("hidden_size"),
        heads=c.size("num_attention_heads"),
        ffn_hidden=c.size("intermediate_size"),
        vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 2048),
        position="rotary",
        rotary_fraction=c.number("rotary_pct", 0.25),
        # query_key_value and dense: bias=attention_bias; the MLP always has biases
        **{**GPT_STYLE, "qkv_bias": bias, "attn_out_bias": bias},
        norm_eps=c.number("layer_norm_eps", 1e-5),
        activation=c.activation("gelu", "hidden_act"),
        tied_embeddings=c.flag("tie_word_embeddings", False),
        parallel_block=c.flag("use_parallel_residual", True),
        norms_per_layer=2,  # input_layernorm and post_attention_layernorm, also when parallel
        dropout=c.dropout(0.0, "hidden_dropout", "attention_dropout"),
    )


def _falcon(c: HFConfig) -> dict:
    """Falcon: MQA (7B) or GQA (new_decoder_architecture, 40B/180B), parallel attention, tied."""
    heads = c.size("num_attention_heads", "n_head")
    hidden = c.size("hidden_size", "n_embed")
    new_arch = c.flag("new_decoder_architecture", False)
    if new_arch:
        kv_heads = c.integer("num_kv_heads", heads, "n_head_kv")
    else:
        kv_heads = 1 if c.flag("multi_query", True) else heads
    parallel = c.flag("parallel_attn", True)
    # FalconDecoderLayer: sequential -> 2 norms; parallel -> ln_attn + ln_mlp (new arch) or 1
    norms = 2 if not parallel else c.integer("num_ln_in_parallel_attn", 2 if new_arch else 1)
    bias = c.flag("bias", False)
    return dict(
        layers=c.size("num_hidden_layers", "n_layer"),
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        ffn_hidden=c.integer("ffn_hidden_size", None) or 4 * hidden,
        vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 2048),
        position="alibi" if c.flag("alibi", False) else "rotary",
        **{**GPT_STYLE, "qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": bias},
        norm_eps=c.number("layer_norm_epsilon", 1e-5),
        activation=c.activation("gelu", "activation"),
        tied_embeddings=c.flag("tie_word_embeddings", True),
        parallel_block=parallel,
        norms_per_layer=norms,
        dropout=c.dropout(0.0, "hidden_dropout", "attention_dropout"),
    )


def _bloom(c: HFConfig) -> dict:
    """BLOOM: ALiBi, LayerNorm after the embeddings, biases everywhere, 4h MLP, tied."""
    hidden = c.size("hidden_size", "n_embed")
    return dict(
        layers=c.size("n_layer", "num_hidden_layers"),
        hidden=hidden,
        heads=c.size("n_head", "num_attention_heads"),
        ffn_hidden=4 * hidden,  # BloomMLP: dense_h_to_4h
        vocab=c.size("vocab_size"),
        position="alibi",
        **GPT_STYLE,
        norm_eps=c.number("layer_norm_epsilon", 1e-5),
        activation="gelu_tanh",
        tied_embeddings=c.flag("tie_word_embeddings", True),
        embedding_norm=True,  # word_embeddings_layernorm
        dropout=c.dropout(0.0, "hidden_dropout", "attention_dropout"),
    )


def _opt(c: HFConfig) -> dict:
    """OPT: learned positions with a 2-row offset, optional project_in/out, final norm if pre-LN."""
    if not c.flag("layer_norm_elementwise_affine", True):
        raise SpecError(f"{c.source}: layer_norm_elementwise_affine: false is not supported")
    hidden = c.size("hidden_size")
    pre_norm = c.flag("do_layer_norm_before", True)
    bias = c.flag("enable_bias", True)
    word_dim = c.integer("word_embed_proj_dim", hidden)
    return dict(
        layers=c.size("num_hidden_layers"),
        hidden=hidden,
        heads=c.size("num_attention_heads"),
        ffn_hidden=c.size("ffn_dim"),
        vocab=c.size("vocab_size"),
        embedding_dim=word_dim if word_dim != hidden else None,
        # OPTLearnedPositionalEmbedding: max_position_embeddings + 2 rows (offset 2)
        max_positions=c.integer("max_position_embeddings", 2048) + 2,
        position="learned",
        **{**GPT_STYLE, "qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": bias},
        norm_placement="pre" if pre_norm else "post",
        activation=c.activation("relu", "activation_function"),
        tied_embeddings=c.flag("tie_word_embeddings", True),
        final_norm=pre_norm and not c.flag("_remove_final_layer_norm", False),
        dropout=c.dropout(0.1, "dropout", "attention_dropout"),
    )


def _phi(c: HFConfig) -> dict:
    """Phi-1/1.5/2: parallel block with one LayerNorm, biases everywhere, untied head with bias."""
    return dict(
        layers=c.size("num_hidden_layers"),
        hidden=c.size("hidden_size"),
        heads=c.size("num_attention_heads"),
        kv_heads=c.integer("num_key_value_heads", None),
        ffn_hidden=c.size("intermediate_size"),
        vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 2048),
        position="rotary",
        rotary_fraction=rotary_fraction(c, 0.5),
        **GPT_STYLE,
        norm_eps=c.number("layer_norm_eps", 1e-5),
        activation=c.activation("gelu_new", "hidden_act"),
        qk_norm=c.flag("qk_layernorm", False),  # q_layernorm / k_layernorm: LayerNorm(head_dim)
        tied_embeddings=c.flag("tie_word_embeddings", False),
        lm_head_bias=True,
        parallel_block=True,
        dropout=c.dropout(0.0, "resid_pdrop", "embd_pdrop", "attention_dropout"),
    )


def _bert(c: HFConfig) -> dict:
    """BERT as `BertModel`: post-LN encoder, learned positions + token types, pooler, no LM head."""
    return dict(
        arch="encoder",
        layers=c.size("num_hidden_layers"),
        hidden=c.size("hidden_size"),
        heads=c.size("num_attention_heads"),
        ffn_hidden=c.size("intermediate_size"),
        vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 512),
        type_vocab=c.integer("type_vocab_size", 2),
        position="learned",
        **GPT_STYLE,
        norm_placement="post",
        norm_eps=c.number("layer_norm_eps", 1e-12),
        activation=c.activation("gelu", "hidden_act"),
        embedding_norm=True,
        final_norm=False,
        pooler=True,
        lm_head=False,
        dropout=c.dropout(0.1, "hidden_dropout_prob", "attention_probs_dropout_prob"),
    )


GPT_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "gpt2": _gpt2, "gpt_bigcode": _gpt_bigcode, "gpt_neox": _gpt_neox, "falcon": _falcon,
    "bloom": _bloom, "opt": _opt, "phi": _phi, "bert": _bert,
}
