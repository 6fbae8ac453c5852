"""HF config mappers of further dense Llama-family decoders whose blocks the spec already
expresses: cohere2, glm, exaone, exaone4, smollm3, helium, arcee, ernie4_5,
hunyuan_v1_dense, seed_oss, olmo3, apertus, ministral, ministral3, internlm3, cwm, and the text
models of Qwen2-VL / Qwen2.5-VL / Qwen3-VL (`*_vl_text`), vaultgemma, granite_swa, iquestcoder
(built as Llama by transformers), minicpm3 and youtu (MLA). Each states where its HF module
(transformers 5.24) differs from Llama."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import rotary_fraction
from modelplan.specs.hf_llama import all_sliding, layer_types, llama, qwen_sliding


def pattern_types(c: HFConfig, pattern: int, default_window: int | None) -> dict:
    """Sliding blocks except every `pattern`-th (Cohere2 / EXAONE 4 / OLMo 3:
    block i is sliding unless (i + 1) % pattern == 0), or the config's explicit layer_types."""
    layers = c.size("num_hidden_layers")
    window = c.integer("sliding_window", default_window, nullable=True)
    if pattern < 1:
        raise SpecError(f"{c.source}: {c.path}sliding_window_pattern: must be >= 1, got {pattern}")
    default = None
    if window is not None:
        default = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
    types = layer_types(c, layers, default)
    return {"sliding_window": window if types is not None and "sliding_attention" in types else None,
            "layer_types": types}



def _cohere2(c: HFConfig) -> dict:
    """Cohere2 (Command R7B / Command A): Cohere's parallel block, three sliding blocks (4096)
    per global one; the global blocks have no position encoding (HF Cohere2Attention rotates on
    sliding blocks only)."""
    if c.flag("use_qk_norm", False):
        raise SpecError(f"{c.source}: use_qk_norm: true is not supported for cohere2")
    fields = llama(c, norm="layernorm", norm_bias=False, norm_eps=c.number("layer_norm_eps", 1e-5),
                   parallel_block=True, tied_embeddings=c.flag("tie_word_embeddings", True),
                   logit_scale=c.number("logit_scale", 0.0625), head_dim=c.integer("head_dim", 128),
                   **pattern_types(c, c.integer("sliding_window_pattern", 4), 4096))
    types = fields["layer_types"] or []
    fields["nope_full_attention"] = "sliding_attention" in types and "full_attention" in types
    return fields


def _glm(c: HFConfig) -> dict:
    """GLM (GLM-4-9B, GlmForCausalLM): Llama blocks with q/k/v bias, fused gate_up_proj, half of
    each head rotated, head_dim 128."""
    return llama(c, head_dim=c.integer("head_dim", 128), qkv_bias=c.flag("attention_bias", True),
                 attn_out_bias=False, norm_eps=c.number("rms_norm_eps", 1.5625e-07),
                 rotary_fraction=rotary_fraction(c, 0.5))


def _exaone(c: HFConfig) -> dict:
    """EXAONE 3 / 3.5 (ExaoneForCausalLM): Llama blocks under GPT-2 style key names."""
    c = c.renamed({"num_layers": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps",
                   "activation_function": "hidden_act"})
    return llama(c, norm_eps=c.number("rms_norm_eps", 1e-5), dropout=c.dropout(0.0, "attention_dropout"))


def _exaone4(c: HFConfig) -> dict:
    """EXAONE 4: norms after attention and MLP (x + norm(f(x)), as OLMo-2), per-head RMSNorm
    q/k norms on every block, three sliding blocks per global one (sliding_window_pattern 4 or
    "LLLG"). Its global blocks skip RoPE (HF Exaone4Attention) but keep their q/k norms, which the
    spec's NoPE blocks do not: they are priced with rotary (no count changes)."""
    return llama(c, norm_placement="output", qk_norm=True, **exaone_sliding(c))


def exaone_sliding(c: HFConfig) -> dict:
    """EXAONE 4 / K-EXAONE layer types: sliding_window_pattern as a period or a string of L
    (local) and G (global) letters, or the explicit layer_types."""
    pattern = c.data.get("sliding_window_pattern", 4)
    if not isinstance(pattern, str):
        return pattern_types(c, c.integer("sliding_window_pattern", 4), 4096)
    if not pattern or set(pattern) - {"L", "G"}:
        raise SpecError(f"{c.source}: sliding_window_pattern: expected an integer or a string of L/G, got {pattern!r}")
    layers = c.size("num_hidden_layers")
    window = c.integer("sliding_window", 4096, nullable=True)
    default = ["sliding_attention" if pattern[i % len(pattern)] == "L" else "full_attention" for i in range(layers)]
    return {"sliding_window": window, "layer_types": layer_types(c, layers, default if window is not None else None)}


def _smollm3(c: HFConfig) -> dict:
    """SmolLM3: Llama blocks, tied; its NoPE blocks (every no_rope_layer_interval-th) change no
    count and are priced with rotary."""
    return llama(c, tied_embeddings=c.flag("tie_word_embeddings", True), **qwen_sliding(c))


def _helium(c: HFConfig) -> dict:
    """Helium (Kyutai): Llama blocks, head_dim 128, RMSNorm eps 1e-8."""
    return llama(c, head_dim=c.integer("head_dim", 128), norm_eps=c.number("rms_norm_eps", 1e-8))


def _arcee(c: HFConfig) -> dict:
    """Arcee (AFM-4.5B): Llama attention, plain up/down MLP with squared ReLU (mapped to relu)."""
    return llama(c, gated_mlp=False, activation=c.activation("relu2", "hidden_act"),
                 norm_eps=c.number("rms_norm_eps", 1e-5))


def _ernie4_5(c: HFConfig) -> dict:
    """ERNIE 4.5 dense: Llama blocks, use_bias on q/k/v/o and the MLP, head_dim 128, tied."""
    bias = c.flag("use_bias", False)
    return llama(c, head_dim=c.integer("head_dim", 128), qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias,
                 norm_eps=c.number("rms_norm_eps", 1e-5), tied_embeddings=c.flag("tie_word_embeddings", True))


def _hunyuan_dense(c: HFConfig) -> dict:
    """Hunyuan v1 dense: Llama blocks with per-head RMSNorm query/key layernorms (use_qk_norm)."""
    return llama(c, qk_norm=c.flag("use_qk_norm", True), norm_eps=c.number("rms_norm_eps", 1e-5))


def _seed_oss(c: HFConfig) -> dict:
    """Seed-OSS: Llama blocks, q/k/v bias attention_bias, o bias attention_out_bias."""
    return llama(c, qkv_bias=c.flag("attention_bias", True), attn_out_bias=c.flag("attention_out_bias", False),
                 head_dim=c.integer("head_dim", 128),
                 dropout=c.dropout(0.1, "attention_dropout", "residual_dropout"))


def _olmo3(c: HFConfig) -> dict:
    """OLMo 3: OLMo-2 blocks (output norms, whole-projection q/k RMSNorms) with three sliding
    blocks (4096) per global one."""
    return llama(c, norm_eps=c.number("rms_norm_eps", 1e-5), norm_placement="output", mlp_bias=False,
                 qk_norm=True, qk_norm_scope="all_heads", **pattern_types(c, 4, 4096))


def _apertus(c: HFConfig) -> dict:
    """Apertus: per-head RMSNorm q/k norms, plain up/down MLP with xIELU and its two learned
    scalars per block (XIELUActivation alpha_p, alpha_n); its compute is priced as silu's."""
    if c.text("hidden_act", "xielu") != "xielu":
        raise SpecError(f"{c.source}: hidden_act: only xielu is supported for apertus")
    c = HFConfig({**c.data, "hidden_act": "silu"}, c.source, c.path, c.defaults)
    return llama(c, qk_norm=True, gated_mlp=False, norm_eps=c.number("rms_norm_eps", 1e-5), extras={"act_params": 2})


def _ministral(c: HFConfig) -> dict:
    """Ministral (8B): Mistral blocks; layer_types from the config (sliding or full)."""
    return llama(c, norm_eps=c.number("rms_norm_eps", 1e-6), **all_sliding(c, 4096))


def _ministral3(c: HFConfig) -> dict:
    """Ministral 3 text: Mistral blocks, head_dim 128, no window by default."""
    return llama(c, head_dim=c.integer("head_dim", 128), norm_eps=c.number("rms_norm_eps", 1e-5),
                 **all_sliding(c, None))


def _internlm3(c: HFConfig) -> dict:
    """InternLM3: Llama blocks with head_dim 128; qkv_bias switches the q/k/v biases, bias the
    o_proj and MLP ones (HF InternLM3Attention / InternLM3MLP)."""
    bias = c.flag("bias", False)
    return llama(c, head_dim=c.integer("head_dim", 128), qkv_bias=c.flag("qkv_bias", False),
                 attn_out_bias=bias, mlp_bias=bias, norm_eps=c.number("rms_norm_eps", 1e-5))


def _cwm(c: HFConfig) -> dict:
    """CWM (Code World Model): Llama blocks, head_dim 128, its explicit layer_types of sliding
    (sliding_window 8192) and full blocks."""
    layers = c.size("num_hidden_layers")
    window = c.integer("sliding_window", 8192, nullable=True)
    default = ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(layers)]
    return llama(c, head_dim=c.integer("head_dim", 128), norm_eps=c.number("rms_norm_eps", 1e-5),
                 sliding_window=window, layer_types=layer_types(c, layers, default if window else None))


def _qwen2_vl_text(c: HFConfig) -> dict:
    """Qwen2-VL / Qwen2.5-VL text model: Qwen2 blocks (multimodal RoPE changes no count)."""
    return llama(c, qkv_bias=True, attn_out_bias=False, norm_eps=c.number("rms_norm_eps", 1e-5),
                 **qwen_sliding(c))


def _qwen3_vl_text(c: HFConfig) -> dict:
    """Qwen3-VL text model: Qwen3 blocks (q/k norms, head_dim 128)."""
    bias = c.flag("attention_bias", False)
    return llama(c, head_dim=c.integer("head_dim", 128), qk_norm=True, qkv_bias=bias, attn_out_bias=bias)


def _vaultgemma(c: HFConfig) -> dict:
    """VaultGemma: Gemma 2 attention (soft-caps, query_pre_attn_scalar, alternating sliding and
    global blocks) with two pre-norms per block (input, pre_feedforward) instead of four."""
    from modelplan.specs.hf_llama import LLAMA_MAPPERS

    return {**LLAMA_MAPPERS["gemma2"](c), "norm_placement": "pre"}



def _granite_swa(c: HFConfig) -> dict:
    """Granite SWA: Granite blocks with a learned sink per head, sliding (128) blocks between
    global ones (its layer_types; default one global per four), tied."""
    from modelplan.specs.hf_llama import granite_scales

    layers = c.size("num_hidden_layers")
    window = c.integer("sliding_window", 128, nullable=True)
    default = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(layers)]
    types = layer_types(c, layers, default if window is not None else None)
    return llama(c, attention_sinks=True, tied_embeddings=c.flag("tie_word_embeddings", True),
                 sliding_window=window if types and "sliding_attention" in types else None,
                 layer_types=types, **granite_scales(c))


def _mla_dense(c: HFConfig, **extra) -> dict:
    """Dense blocks with DeepSeek-V2 multi-head latent attention (q/kv LoRA latents, each with
    an RMSNorm; a decoupled rotary key shared by the heads)."""
    mla = dict(kv_lora_rank=c.integer("kv_lora_rank", 512), q_lora_rank=c.integer("q_lora_rank", 1536, nullable=True),
               qk_nope_head_dim=c.integer("qk_nope_head_dim", 128), qk_rope_head_dim=c.integer("qk_rope_head_dim", 64),
               v_head_dim=c.integer("v_head_dim", 128))
    return llama(c, kv_heads=None, head_dim=None, mla=mla, **extra)


def _minicpm3(c: HFConfig) -> dict:
    """MiniCPM3: MLA dense blocks, tied, muP scales: embeddings x scale_emb, each branch x
    scale_depth / sqrt(layers), logits x dim_model_base / hidden (HF MiniCPM3)."""
    hidden, layers = c.divisor("hidden_size"), c.divisor("num_hidden_layers")  # both divided by below
    return _mla_dense(
        c, tied_embeddings=c.flag("tie_word_embeddings", True),
        embedding_scale=c.number("scale_emb", 1.0, positive=True),
        residual_scale=c.number("scale_depth", 1.0, positive=True) / layers ** 0.5,
        logit_scale=c.number("dim_model_base", hidden, positive=True) / hidden,
    )


def _youtu(c: HFConfig) -> dict:
    """Youtu-LLM: MLA dense blocks, tied."""
    return _mla_dense(c, tied_embeddings=c.flag("tie_word_embeddings", True), norm_eps=c.number("rms_norm_eps", 1e-6))



DENSE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "cohere2": _cohere2, "glm": _glm, "exaone": _exaone, "exaone4": _exaone4, "smollm3": _smollm3,
    "helium": _helium, "arcee": _arcee, "ernie4_5": _ernie4_5, "hunyuan_v1_dense": _hunyuan_dense,
    "seed_oss": _seed_oss, "olmo3": _olmo3, "apertus": _apertus, "ministral": _ministral,
    "ministral3": _ministral3, "internlm3": _internlm3, "cwm": _cwm, "qwen2_vl_text": _qwen2_vl_text,
    "qwen2_5_vl_text": _qwen2_vl_text, "qwen3_vl_text": _qwen3_vl_text, "vaultgemma": _vaultgemma,
    "granite_swa": _granite_swa, "iquestcoder": llama, "minicpm3": _minicpm3, "youtu": _youtu,
}
