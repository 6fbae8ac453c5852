"""HF config mappers of decoders built from the block stack's small options (`specs/extras.py`;
transformers 5.24 modeling code): biogpt, gpt_neox_japanese, bitnet, modernbert-decoder, cpmant and
axk1 (DeepSeek-V3 blocks with a norm on every MoE output). Registered through hf_n18small.py."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE, rotary_fraction
from modelplan.specs.hf_llama import llama
from modelplan.specs.hf_moe import MOE_MAPPERS, moe_placement


def _biogpt(c: HFConfig) -> dict:
    """BioGptForCausalLM: pre-LN blocks (biased q/k/v/out_proj, fc1/fc2), learned positions with 2
    offset rows (BioGptLearnedPositionalEmbedding(max_position_embeddings + 2)), final LayerNorm,
    embeddings scaled by sqrt(h) (scale_embedding), output_projection tied without bias."""
    hidden = c.size("hidden_size")
    return dict(
        layers=c.size("num_hidden_layers"), hidden=hidden, heads=c.size("num_attention_heads"),
        ffn_hidden=c.size("intermediate_size"), vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 1024), position="learned", **GPT_STYLE,
        norm_eps=c.number("layer_norm_eps", 1e-12), activation=c.activation("gelu", "hidden_act"),
        embedding_scale=hidden ** 0.5 if c.flag("scale_embedding", True) else None,
        tied_embeddings=c.flag("tie_word_embeddings", True), extras={"position_offset": 2},
        dropout=c.dropout(0.1, "hidden_dropout_prob", "attention_probs_dropout_prob"),
    )


def _gpt_neox_japanese(c: HFConfig) -> dict:
    """GPTNeoXJapaneseForCausalLM: sequential pre-LN blocks, bias-free query_key_value / dense and MLP
    (h -> h x intermediate_multiple_size), rotary on partial_rotary_factor of each head; the last
    block's attention holds dense_bias (h), added with the residual; final LayerNorm; embed_out tied."""
    hidden, layers = c.size("hidden_size"), c.size("num_hidden_layers")
    return dict(
        layers=layers, hidden=hidden, heads=c.size("num_attention_heads"),
        ffn_hidden=int(hidden * c.number("intermediate_multiple_size", 4)), vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 2048), position="rotary", rotary_fraction=rotary_fraction(c),
        **{**GPT_STYLE, "qkv_bias": False, "attn_out_bias": False, "mlp_bias": False},
        norm_eps=c.number("layer_norm_eps", 1e-5), activation=c.activation("gelu", "hidden_act"),
        tied_embeddings=c.flag("tie_word_embeddings", True), extras={"out_bias_blocks": [layers - 1]},
        dropout=c.dropout(0.1, "attention_dropout", "hidden_dropout"),
    )


def _bitnet(c: HFConfig) -> dict:
    """BitNetForCausalLM: Llama blocks (GQA, squared-ReLU SwiGLU) with attn_sub_norm before o_proj
    and ffn_sub_norm before down_proj (RMSNorms). Its linears are nn.Linear of the full shape
    (ternary values are a quantisation of them), so the parameter count is the dense one; memory
    prices them as the training dtype's latent weights (BitNet b1.58 trains full-precision latents,
    Ma et al. 2024 sec. 2)."""
    return llama(c, extras={"sub_norms": True})  # hidden_act relu2 reads as relu (no count change)


def _modernbert_decoder(c: HFConfig) -> dict:
    """ModernBertDecoderForCausalLM: embedding LayerNorm, pre-LN blocks (q/k/v and Wo with
    attention_bias, gated Wi Linear(h, 2 f) and Wo with mlp_bias) whose block 0 has no attn_norm,
    sliding blocks of local_attention // 2 keys per layer_types (default: every third global),
    final LayerNorm, head dense (classifier_bias) + LayerNorm, decoder tied with decoder_bias."""
    layers, bias = c.size("num_hidden_layers"), c.flag("attention_bias", False)
    every = c.integer("global_attn_every_n_layers", 3)
    types = c.texts("layer_types", None) or ["sliding_attention" if i % every else "full_attention"
                                             for i in range(layers)]
    if len(types) != layers or set(types) - {"full_attention", "sliding_attention"}:
        raise SpecError(f"{c.source}: layer_types: expected {layers} entries of full_attention / sliding_attention")
    local = c.integer("local_attention", 128, nullable=True)
    sliding = "sliding_attention" in types and local
    return dict(
        layers=layers, hidden=c.size("hidden_size"), heads=c.size("num_attention_heads"),
        ffn_hidden=c.size("intermediate_size"), vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 8192), position="rotary",
        layer_types=types if sliding else None, sliding_window=local // 2 if sliding else None,
        norm="layernorm", norm_bias=c.flag("norm_bias", False), norm_eps=c.number("norm_eps", 1e-5),
        qkv_bias=bias, attn_out_bias=bias, mlp_bias=c.flag("mlp_bias", False), gated_mlp=True,
        activation=c.activation("gelu", "hidden_activation"), embedding_norm=True,
        mlm_transform=True, lm_head_bias=c.flag("decoder_bias", True),
        tied_embeddings=c.flag("tie_word_embeddings", True),
        extras={"no_input_norm_blocks": [0], "head_transform_bias": c.flag("classifier_bias", False)},
        rope_theta=_modernbert_theta(c), dropout=c.dropout(0.0, "attention_dropout", "mlp_dropout", "embedding_dropout"),
    )


def _modernbert_theta(c: HFConfig) -> float:
    """The global blocks' RoPE base (ModernBertDecoderConfig: rope_parameters.full_attention, 160000)."""
    params = c.sub("rope_parameters")
    full = params.sub("full_attention") if params is not None else None
    return full.number("rope_theta", 160000.0) if full is not None else c.number("global_rope_theta", 160000.0)


_AXK1 = dict(vocab_size=163840, num_hidden_layers=61, n_routed_experts=192, num_experts_per_tok=8,
             n_shared_experts=1, n_group=8, topk_group=4, q_lora_rank=1536, routed_scaling_factor=2.5,
             topk_method="noaux_tc", scoring_func="sigmoid")
"""AXK1Config's defaults where they differ from DeepseekV3Config's or are not keys of it (transformers 5.24)."""


def _axk1(c: HFConfig) -> dict:
    """AXK1ForCausalLM (A.X-K1): DeepSeek-V3 blocks (MLA, sigmoid experts with groups and a correction
    buffer, one shared expert) placed by mlp_layer_types (default: first_k_dense_replace 1, moe_layer_freq
    1), each AXK1MoE ending in post_mlp_layernorm (RMSNorm(h)); no MTP modules."""
    layers = c.integer("num_hidden_layers", 61)
    first, freq = c.integer("first_k_dense_replace", 1), c.integer("moe_layer_freq", 1)
    kinds = c.texts("mlp_layer_types", None) or ["sparse" if i >= first and i % freq == 0 else "dense"
                                                 for i in range(layers)]
    if len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
        raise SpecError(f"{c.source}: mlp_layer_types: expected {layers} entries of dense / sparse, got {kinds!r}")
    data = {**_AXK1, **c.data, "num_nextn_predict_layers": 0, "first_k_dense_replace": 0, "moe_layer_freq": 1}
    fields = MOE_MAPPERS["deepseek_v3"](HFConfig(data, c.source, c.path, c.defaults))
    sparse = [i for i, kind in enumerate(kinds) if kind == "sparse"]
    if not sparse:
        return {**fields, "moe": None}
    moe = {**fields["moe"], "first_dense_layers": 0, "layer_freq": 1, "layers": None, **moe_placement(layers, sparse)}
    return {**fields, "moe": moe, "extras": {"moe_output_norm": True}}


def _cpmant(c: HFConfig) -> dict:
    """CpmAntForCausalLM (CPM-Ant): pre-norm blocks of weight-only RMS LayerNorms
    (CpmAntLayerNorm), bias-free project_q/k/v / attention_out of num_attention_heads x dim_head,
    a GELU-gated w_0 / w_1 -> w_out FFN, output_layernorm; input_embedding holds vocab_size +
    prompt_types x prompt_length rows, segment_embedding segment_types rows; one
    CpmAntSegmentPositionEmbedding table (segment_types^2 + position_bias_num_buckets, heads) read by
    every block (counted in block 0, as T5's relative bias); lm_head Linear(h, vocab) of its own
    (the class ties nothing)."""
    segments = c.integer("segment_types", 32)
    return dict(
        layers=c.size("num_hidden_layers"), hidden=c.size("hidden_size"), heads=c.size("num_attention_heads"),
        head_dim=c.integer("dim_head", 128), ffn_hidden=c.integer("dim_ff", 10240), vocab=c.size("vocab_size"),
        position="relative", relative_buckets=segments * segments + c.integer("position_bias_num_buckets", 512),
        relative_max_distance=c.integer("position_bias_max_distance", 2048),
        max_positions=c.integer("position_bias_max_distance", 2048),  # no table: caps nothing
        type_vocab=segments, norm="rmsnorm", norm_eps=c.number("eps", 1e-6), gated_mlp=True, activation="gelu",
        tied_embeddings=False,
        extras={"token_extra_rows": c.integer("prompt_types", 32) * c.integer("prompt_length", 32)},
        dropout=c.dropout(0.0, "dropout_p"),
    )


N18SMALL_DECODERS: dict[str, Callable[[HFConfig], dict]] = {
    "biogpt": _biogpt, "gpt_neox_japanese": _gpt_neox_japanese, "bitnet": _bitnet,
    "modernbert-decoder": _modernbert_decoder, "axk1": _axk1, "cpmant": _cpmant,
}
