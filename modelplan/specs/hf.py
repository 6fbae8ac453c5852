"""Read a HuggingFace `config.json` (as a dict) into a TransformerSpec.

Each supported `model_type` has one small mapping function that states the module conventions of
the HF implementation (which projections carry biases, how many norms a block has, whether the
embeddings are tied by default). Missing optional keys take the HF config class defaults; the
size keys (layers, hidden, heads, vocab, ...) are required. Encoders (BERT) map to the bare
`BertModel` with its pooler, the module whose count model cards quote.
"""

from __future__ import annotations

from typing import Any, Callable

from modelplan.errors import SpecError, validate_model
from modelplan.specs.transformer import TransformerSpec

_ACTIVATIONS = {
    "silu": "silu", "swish": "silu", "gelu": "gelu", "relu": "relu",
    "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
    "bloom_gelu": "gelu_tanh",
}


# GPT-2 style blocks: LayerNorm with bias, a bias on every linear, plain (non-gated) MLP.
_GPT_STYLE: dict[str, Any] = dict(
    norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
    gated_mlp=False,
)


class _Config:
    """Key lookup over a raw config dict with aliases, HF defaults and one-line errors."""

    def __init__(self, data: dict, source: str) -> None:
        self.data, self.source = data, source

    def req(self, *keys: str) -> Any:
        """The first present key among `keys` (HF attribute_map aliases); missing -> SpecError."""
        for key in keys:
            if self.data.get(key) is not None:
                return self.data[key]
        raise SpecError(f"{self.source}: {keys[0]}: missing (needed for model_type "
                        f"'{self.data.get('model_type')}')")

    def get(self, key: str, default: Any, *aliases: str) -> Any:
        """`key` (or an alias) if present and not null, else the HF default."""
        for name in (key, *aliases):
            if self.data.get(name) is not None:
                return self.data[name]
        return default

    def activation(self, default: str, *keys: str) -> str:
        """Map an HF activation name onto the spec's few kinds (it changes no count)."""
        name = str(self.get(keys[0], default, *keys[1:]))
        if name in _ACTIVATIONS:
            return _ACTIVATIONS[name]
        if "gelu" in name:
            return "gelu"
        raise SpecError(f"{self.source}: {keys[0]}: unsupported activation '{name}'")

    def dropout(self, default: float, *keys: str) -> bool:
        """Whether any of the dropout probabilities `keys` is positive."""
        return any(float(self.get(key, default)) > 0 for key in keys)


def _llama(c: _Config, **extra: Any) -> dict:
    """Llama family (also Mistral, Qwen2, Gemma): RMSNorm, rotary, SwiGLU, optional biases."""
    spec = dict(
        layers=c.req("num_hidden_layers"),
        hidden=c.req("hidden_size"),
        heads=c.req("num_attention_heads"),
        kv_heads=c.get("num_key_value_heads", None),
        head_dim=c.get("head_dim", None),
        ffn_hidden=c.req("intermediate_size"),
        vocab=c.req("vocab_size"),
        max_positions=c.get("max_position_embeddings", 2048),
        position="rotary",
        norm="rmsnorm",
        norm_eps=c.get("rms_norm_eps", 1e-6),
        qkv_bias=c.get("attention_bias", False),  # LlamaAttention: q/k/v/o bias=attention_bias
        attn_out_bias=c.get("attention_bias", False),
        mlp_bias=c.get("mlp_bias", False),
        gated_mlp=True,
        activation=c.activation("silu", "hidden_act"),
        tied_embeddings=c.get("tie_word_embeddings", False),
        dropout=c.dropout(0.0, "attention_dropout"),
    )
    spec.update(extra)
    return spec


def _mixtral(c: _Config) -> dict:
    """Mixtral: Llama blocks whose MLP is num_local_experts SwiGLU experts behind a bias-free router."""
    moe = dict(
        num_experts=c.get("num_local_experts", 8),
        top_k=c.get("num_experts_per_tok", 2),
        expert_ffn_hidden=c.req("intermediate_size"),
    )
    return _llama(c, moe=moe)


def _qwen2(c: _Config) -> dict:
    """Qwen2: Llama blocks with biases on q, k, v (not on o)."""
    return _llama(c, qkv_bias=True, attn_out_bias=False)


def _qwen2_moe(c: _Config) -> dict:
    """Qwen2-MoE: routed experts + one gated shared expert every decoder_sparse_step-th layer."""
    step, dense = c.get("decoder_sparse_step", 1), list(c.get("mlp_only_layers", []))
    if dense and (step != 1 or dense != list(range(len(dense)))):
        raise SpecError(f"{c.source}: mlp_only_layers: only a leading run of dense layers "
                        f"with decoder_sparse_step 1 is supported (got {dense}, step {step})")
    moe = None
    if c.get("num_experts", 60) > 0:
        moe = dict(
            num_experts=c.get("num_experts", 60),
            top_k=c.get("num_experts_per_tok", 4),
            expert_ffn_hidden=c.req("moe_intermediate_size"),
            shared_experts=1,
            shared_expert_ffn_hidden=c.get("shared_expert_intermediate_size", 5632),
            shared_expert_gate=True,
            layer_freq=step,
            first_dense_layers=len(dense),
        )
    return _llama(c, qkv_bias=c.get("qkv_bias", True), attn_out_bias=False, moe=moe)


def _gemma(c: _Config) -> dict:
    """Gemma: Llama blocks with GeGLU, head_dim 256 and tied embeddings by default."""
    act = c.activation("gelu_pytorch_tanh", "hidden_activation", "hidden_act")
    return _llama(c, activation=act, tied_embeddings=c.get("tie_word_embeddings", True))


def _gpt2(c: _Config, multi_query: bool = False) -> dict:
    """GPT-2 (and GPTBigCode with MQA): learned positions, LayerNorm, biases everywhere, tied."""
    hidden = c.req("n_embd", "hidden_size")
    return dict(
        layers=c.req("n_layer", "num_hidden_layers"),
        hidden=hidden,
        heads=c.req("n_head", "num_attention_heads"),
        kv_heads=1 if multi_query else None,
        ffn_hidden=c.get("n_inner", 4 * hidden),
        vocab=c.req("vocab_size"),
        max_positions=c.get("n_positions", 1024, "max_position_embeddings"),
        position="learned",
        **_GPT_STYLE,
        norm_eps=c.get("layer_norm_epsilon", 1e-5),
        activation=c.activation("gelu_new", "activation_function"),
        tied_embeddings=c.get("tie_word_embeddings", True),
        dropout=c.dropout(0.1, "resid_pdrop", "embd_pdrop", "attn_pdrop"),
    )


def _gpt_bigcode(c: _Config) -> dict:
    """GPTBigCode (SantaCoder/StarCoder): GPT-2 blocks with multi-query attention by default."""
    spec = _gpt2(c, multi_query=c.get("multi_query", True))
    spec["activation"] = c.activation("gelu_pytorch_tanh", "activation_function")
    return spec


def _gpt_neox(c: _Config) -> dict:
    """GPT-NeoX / Pythia: parallel residual by default, two LayerNorms per block, untied."""
    return dict(
        layers=c.req("num_hidden_layers"),
        hidden=c.req("hidden_size"),
        heads=c.req("num_attention_heads"),
        ffn_hidden=c.req("intermediate_size"),
        vocab=c.req("vocab_size"),
        max_positions=c.get("max_position_embeddings", 2048),
        position="rotary",
        # query_key_value and dense: bias=attention_bias; the MLP always has biases
        **{**_GPT_STYLE, "qkv_bias": c.get("attention_bias", True),
           "attn_out_bias": c.get("attention_bias", True)},
        norm_eps=c.get("layer_norm_eps", 1e-5),
        activation=c.activation("gelu", "hidden_act"),
        tied_embeddings=c.get("tie_word_embeddings", False),
        parallel_block=c.get("use_parallel_residual", True),
        norms_per_layer=2,  # input_layernorm and post_attention_layernorm, also when parallel
        dropout=c.dropout(0.0, "hidden_dropout", "attention_dropout"),
    )


def _falcon(c: _Config) -> dict:
    """Falcon: MQA (7B) or GQA (new_decoder_architecture, 40B/180B), parallel attention, tied."""
    heads = c.req("num_attention_heads", "n_head")
    hidden = c.req("hidden_size", "n_embed")
    new_arch = c.get("new_decoder_architecture", False)
    if new_arch:
        kv_heads = c.get("num_kv_heads", heads, "n_head_kv")
    else:
        kv_heads = 1 if c.get("multi_query", True) else heads
    parallel = c.get("parallel_attn", True)
    # FalconDecoderLayer: sequential -> 2 norms; parallel -> ln_attn + ln_mlp (new arch) or 1
    norms = 2 if not parallel else c.get("num_ln_in_parallel_attn", 2 if new_arch else 1)
    bias = c.get("bias", False)
    return dict(
        layers=c.req("num_hidden_layers", "n_layer"),
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        ffn_hidden=c.get("ffn_hidden_size", 4 * hidden),
        vocab=c.req("vocab_size"),
        max_positions=c.get("max_position_embeddings", 2048),
        position="alibi" if c.get("alibi", False) else "rotary",
        **{**_GPT_STYLE, "qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": bias},
        norm_eps=c.get("layer_norm_epsilon", 1e-5),
        activation=c.activation("gelu", "activation"),
        tied_embeddings=c.get("tie_word_embeddings", True),
        parallel_block=parallel,
        norms_per_layer=norms,
        dropout=c.dropout(0.0, "hidden_dropout", "attention_dropout"),
    )


def _bloom(c: _Config) -> dict:
    """BLOOM: ALiBi, LayerNorm after the embeddings, biases everywhere, 4h MLP, tied."""
    hidden = c.req("hidden_size", "n_embed")
    return dict(
        layers=c.req("n_layer", "num_hidden_layers"),
        hidden=hidden,
        heads=c.req("n_head", "num_attention_heads"),
        ffn_hidden=4 * hidden,  # BloomMLP: dense_h_to_4h
        vocab=c.req("vocab_size"),
        position="alibi",
        **_GPT_STYLE,
        norm_eps=c.get("layer_norm_epsilon", 1e-5),
        activation="gelu_tanh",
        tied_embeddings=c.get("tie_word_embeddings", True),
        embedding_norm=True,  # word_embeddings_layernorm
        dropout=c.dropout(0.0, "hidden_dropout", "attention_dropout"),
    )


def _opt(c: _Config) -> dict:
    """OPT: learned positions with a 2-row offset, optional project_in/out, final norm if pre-LN."""
    if not c.get("layer_norm_elementwise_affine", True):
        raise SpecError(f"{c.source}: layer_norm_elementwise_affine: false is not supported")
    hidden = c.req("hidden_size")
    pre_norm = c.get("do_layer_norm_before", True)
    bias = c.get("enable_bias", True)
    word_dim = c.get("word_embed_proj_dim", hidden)
    return dict(
        layers=c.req("num_hidden_layers"),
        hidden=hidden,
        heads=c.req("num_attention_heads"),
        ffn_hidden=c.req("ffn_dim"),
        vocab=c.req("vocab_size"),
        embedding_dim=word_dim if word_dim != hidden else None,
        # OPTLearnedPositionalEmbedding: max_position_embeddings + 2 rows (offset 2)
        max_positions=c.get("max_position_embeddings", 2048) + 2,
        position="learned",
        **{**_GPT_STYLE, "qkv_bias": bias, "attn_out_bias": bias, "mlp_bias": bias},
        activation=c.activation("relu", "activation_function"),
        tied_embeddings=c.get("tie_word_embeddings", True),
        final_norm=pre_norm and not c.get("_remove_final_layer_norm", False),
        dropout=c.dropout(0.1, "dropout", "attention_dropout"),
    )


def _phi(c: _Config) -> dict:
    """Phi-1/1.5/2: parallel block with one LayerNorm, biases everywhere, untied head with bias."""
    return dict(
        layers=c.req("num_hidden_layers"),
        hidden=c.req("hidden_size"),
        heads=c.req("num_attention_heads"),
        kv_heads=c.get("num_key_value_heads", None),
        ffn_hidden=c.req("intermediate_size"),
        vocab=c.req("vocab_size"),
        max_positions=c.get("max_position_embeddings", 2048),
        position="rotary",
        **_GPT_STYLE,
        norm_eps=c.get("layer_norm_eps", 1e-5),
        activation=c.activation("gelu_new", "hidden_act"),
        qk_norm=c.get("qk_layernorm", False),
        tied_embeddings=c.get("tie_word_embeddings", False),
        lm_head_bias=True,
        parallel_block=True,
        dropout=c.dropout(0.0, "resid_pdrop", "embd_pdrop", "attention_dropout"),
    )


def _bert(c: _Config) -> dict:
    """BERT as `BertModel`: post-LN encoder, learned positions + token types, pooler, no LM head."""
    return dict(
        arch="encoder",
        layers=c.req("num_hidden_layers"),
        hidden=c.req("hidden_size"),
        heads=c.req("num_attention_heads"),
        ffn_hidden=c.req("intermediate_size"),
        vocab=c.req("vocab_size"),
        max_positions=c.get("max_position_embeddings", 512),
        type_vocab=c.get("type_vocab_size", 2),
        position="learned",
        **_GPT_STYLE,
        norm_eps=c.get("layer_norm_eps", 1e-12),
        activation=c.activation("gelu", "hidden_act"),
        embedding_norm=True,
        final_norm=False,
        pooler=True,
        lm_head=False,
        dropout=c.dropout(0.1, "hidden_dropout_prob", "attention_probs_dropout_prob"),
    )


MAPPERS: dict[str, Callable[[_Config], dict]] = {
    "llama": _llama, "mistral": _llama, "mixtral": _mixtral, "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe, "gemma": _gemma, "gpt2": _gpt2, "gpt_neox": _gpt_neox,
    "gpt_bigcode": _gpt_bigcode, "falcon": _falcon, "bloom": _bloom, "opt": _opt, "phi": _phi,
    "bert": _bert,
}


def from_hf_config(data: dict, source: str = "config.json") -> TransformerSpec:
    """A TransformerSpec from a parsed HuggingFace config.json; unknown model_type -> SpecError."""
    model_type = data.get("model_type")
    mapper = MAPPERS.get(str(model_type))
    if mapper is None:
        raise SpecError(
            f"{source}: model_type: unsupported '{model_type}' (supported: {', '.join(sorted(MAPPERS))})"
        )
    fields = mapper(_Config(data, source))
    name = data.get("_name_or_path") or source.removesuffix(".json")
    fields = {"name": str(name), "source": f"HuggingFace config.json ({source})", **fields}
    if fields.get("head_dim") is None:
        fields.pop("head_dim", None)
    return validate_model(TransformerSpec, fields, source)
