"""HF config mappers of further causal LMs (transformers 5.24) whose blocks the spec already
expresses: hyperclovax (Granite + peri-layer norms), kolibri1 (GLM-4 sandwich blocks with
Kolibri's sigmoid experts), flint (Qwen3-MoE with attention sinks and an ungated shared expert),
lara_mini (Qwen3.5 gated DeltaNet + Qwen3 attention, Flint's experts), aria_text (Aria's MoE
language model), emu3 (its language model), cohere_compass_text (Cohere2's parallel block) and
apertus1p5_text (Apertus with an extended
vocabulary); and the refused causal-LM types with the mechanism each lacks. Each mapper states
where its HF module differs from Llama."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_dense import DENSE_MAPPERS
from modelplan.specs.hf_gpt import rotary_fraction
from modelplan.specs.hf_hybrid import _deltanet
from modelplan.specs.hf_llama import compact_types, granite_scales, layer_types, llama
from modelplan.specs.hf_moe import _qwen_moe_layers, moe_placement


def _sliding(c: HFConfig, default: list[str]) -> dict:
    """sliding_window and the per-block attention kinds (the config's layer_types, else `default`)."""
    types = layer_types(c, c.size("num_hidden_layers"), default)
    window = c.integer("sliding_window", None, nullable=True)
    return {"sliding_window": window if types and "sliding_attention" in types else None, "layer_types": types}


def _hyperclovax(c: HFConfig) -> dict:
    """HyperCLOVAX (HyperCLOVAXForCausalLM, a GraniteForCausalLM): Granite's multipliers, except that
    logits are multiplied by logits_scaling (Granite divides) and attention_multiplier null means
    head_dim ** -0.5; use_post_norm (default true) adds post_norm1 / post_norm2 RMSNorms after
    attention and MLP (peri-layer norms: the spec's sandwich, four norms a block)."""
    heads = c.size("num_attention_heads")
    head_dim = c.integer("head_dim", None) or c.size("hidden_size") // heads
    fields = llama(c, head_dim=head_dim, **granite_scales(c))
    fields["attention_scale"] = c.number("attention_multiplier", head_dim ** -0.5, positive=True)
    fields["logit_scale"] = c.number("logits_scaling", 1.0, positive=True)  # logits * logits_scaling
    if c.flag("use_post_norm", True):
        fields["norm_placement"] = "sandwich"
    return fields


_KOLIBRI1 = {"vocab_size": 128000, "hidden_size": 2560, "num_hidden_layers": 50, "num_attention_heads": 48,
             "num_key_value_heads": 4, "head_dim": 128, "max_position_embeddings": 262144, "sliding_window": 513,
             "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 6,
             "num_experts": 384, "norm_topk_prob": False, "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
"""Kolibri1Config defaults (configuration_kolibri1.py; the rest from Qwen3MoeConfig)."""


def _kolibri1(c: HFConfig) -> dict:
    """Kolibri 1 (Kolibri1ForCausalLM): EXAONE-4 attention (per-head q/k RMSNorms, no biases) in GLM-4
    sandwich blocks (input, post_self_attn, post_attention, post_mlp norms), four sliding (513)
    blocks per full one, and every block MoE: a bias-free router whose top-k is picked on logits +
    a correction-bias buffer, weights sigmoid(logit) (renormalised with norm_topk_prob), beside one
    ungated shared SwiGLU of shared_expert_intermediate_size (selection on logits, not on sigmoid
    scores as DeepSeek-V3's: no count or cost changes). Its full blocks skip RoPE but keep
    their q/k norms, which the spec's NoPE blocks do not: priced with rotary (no count changes)."""
    c = c.with_defaults(_KOLIBRI1, fill_null=True)
    layers = c.size("num_hidden_layers")
    default = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(layers)]
    moe = dict(num_experts=c.size("num_experts"), top_k=c.size("num_experts_per_tok"),
               expert_ffn_hidden=c.size("moe_intermediate_size"), router="sigmoid", router_score_correction=True,
               norm_topk_prob=c.flag("norm_topk_prob", False), expert_bias=False, shared_experts=1,
               shared_expert_ffn_hidden=c.size("shared_expert_intermediate_size"))
    no_dense = HFConfig(c.data, c.source, c.path, {**c.defaults, "intermediate_size": 0})  # the class has none
    return llama(no_dense, ffn_hidden=0, qk_norm=True, norm_placement="sandwich", moe=moe, **_sliding(c, default))


_FLINT = {"vocab_size": 150144, "intermediate_size": 6144, "num_hidden_layers": 49, "num_attention_heads": 32,
          "num_key_value_heads": 4, "head_dim": 128, "max_position_embeddings": 262144, "sliding_window": 513,
          "moe_intermediate_size": 512, "shared_expert_intermediate_size": 1024, "num_experts_per_tok": 6,
          "num_experts": 256, "norm_topk_prob": True, "mlp_only_layers": [0, 1], "rms_norm_eps": 1e-6,
          "tie_word_embeddings": False}
"""FlintConfig defaults (configuration_flint.py; the rest from Qwen2MoeConfig)."""


def _flint(c: HFConfig) -> dict:
    """Flint (FlintForCausalLM): Qwen3-MoE attention (per-head q/k RMSNorms) with gpt-oss sinks (one
    logit per head), full blocks 0, 1, every i % 4 == 1 and the last, the others sliding (513);
    dense SwiGLU of intermediate_size on mlp_only_layers (default [0, 1]), elsewhere sigmoid
    experts (top-k of sigmoid(logits), renormalised) beside one ungated shared SwiGLU of
    shared_expert_intermediate_size. Full blocks skip RoPE but keep q/k norms: priced with
    rotary (no count changes)."""
    c = c.with_defaults(_FLINT, fill_null=True)
    layers = c.size("num_hidden_layers")
    default = ["full_attention" if i < 2 or i % 4 == 1 or i == layers - 1 else "sliding_attention"
               for i in range(layers)]
    placement = _qwen_moe_layers(c)
    moe = None
    if c.integer("num_experts", 256) > 0 and placement != {"layers": []}:
        moe = dict(num_experts=c.size("num_experts"), top_k=c.size("num_experts_per_tok"),
                   expert_ffn_hidden=c.size("moe_intermediate_size"), router="sigmoid",
                   norm_topk_prob=c.flag("norm_topk_prob", True), expert_bias=False, shared_experts=1,
                   shared_expert_ffn_hidden=c.size("shared_expert_intermediate_size"), **placement)
    return llama(c, qk_norm=True, attention_sinks=True, moe=moe, **_sliding(c, default))


_LARA_MINI = {"hidden_size": 1024, "num_hidden_layers": 34, "num_attention_heads": 16, "num_key_value_heads": 4,
              "head_dim": 128, "max_position_embeddings": 131072, "tie_word_embeddings": True, "sliding_window": 512,
              "linear_num_key_heads": 8, "linear_num_value_heads": 16, "num_experts_per_tok": 4, "num_experts": 128,
              "vocab_size": 151936, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
              "norm_topk_prob": True, "rms_norm_eps": 1e-6}
"""LaraMiniConfig defaults (configuration_lara_mini.py; the rest from Qwen3NextConfig)."""

_LARA_KINDS = ("linear_attention", "sliding_attention", "full_attention")


def _lara_mini(c: HFConfig) -> dict:
    """LaraMini (LaraMiniForCausalLM): Qwen3.5 blocks whose mixer is a gated DeltaNet
    (linear_attention) or Qwen3 attention (per-head q/k RMSNorms, no output gate; sliding 512 or
    full, full blocks without RoPE), default pattern linear, sliding, linear, full, sliding; every
    block MoE: softmax top-k router (renormalised) and Flint's ungated shared SwiGLU of
    shared_expert_intermediate_size. Full blocks keep their q/k norms without RoPE: priced with
    rotary (no count changes)."""
    c = c.with_defaults(_LARA_MINI, fill_null=True)
    layers = c.size("num_hidden_layers")
    names = c.texts("layer_types", None) or [("linear_attention", "sliding_attention", "linear_attention",
                                              "full_attention", "sliding_attention")[i % 5] for i in range(layers)]
    c.check_names("layer_types", names, _LARA_KINDS, layers)
    types = compact_types(["gated_deltanet" if t == "linear_attention" else t for t in names])
    moe = dict(num_experts=c.size("num_experts"), top_k=c.size("num_experts_per_tok"),
               expert_ffn_hidden=c.size("moe_intermediate_size"), norm_topk_prob=c.flag("norm_topk_prob", True),
               shared_experts=1, shared_expert_ffn_hidden=c.size("shared_expert_intermediate_size"),
               **moe_placement(layers, list(range(layers))))
    no_dense = HFConfig(c.data, c.source, c.path, {**c.defaults, "intermediate_size": 0})  # the class has none
    fields = llama(no_dense, ffn_hidden=0, qk_norm=True, moe=moe, layer_types=types,
                   rotary_fraction=rotary_fraction(c, 0.25),
                   sliding_window=c.integer("sliding_window", 512) if "sliding_attention" in names else None)
    if "linear_attention" in names:
        fields["deltanet"] = _deltanet(c)
    return fields


_ARIA_TEXT = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "moe_num_experts": 8, "moe_topk": 2, "moe_num_shared_experts": 2,
              "rms_norm_eps": 1e-6, "max_position_embeddings": 2048, "tie_word_embeddings": False}
"""AriaTextConfig defaults (configuration_aria.py)."""


def _aria_text(c: HFConfig) -> dict:
    """Aria's language model (AriaTextForCausalLM): Llama attention, every block MoE: moe_num_experts
    SwiGLU experts of intermediate_size picked on raw logits with a softmax over the top-k
    (AriaTextTopKRouter), beside one shared SwiGLU of intermediate_size x moe_num_shared_experts
    (AriaSharedExpertsMLP, biases with mlp_bias); no dense MLP."""
    c = c.with_defaults(_ARIA_TEXT, fill_null=True)
    layers, width = c.size("num_hidden_layers"), c.size("intermediate_size")
    shared = c.integer("moe_num_shared_experts", 2)
    moe = dict(num_experts=c.size("moe_num_experts"), top_k=c.size("moe_topk"), expert_ffn_hidden=width,
               router="topk_softmax", expert_bias=False, shared_experts=1 if shared else 0,
               shared_expert_ffn_hidden=shared * width if shared else None,
               **moe_placement(layers, list(range(layers))))
    return llama(c, ffn_hidden=0, moe=moe)


def _emu3(c: HFConfig) -> dict:
    """Emu3's language model (Emu3ForCausalLM on an Emu3Config reads its text_config, an
    Emu3TextConfig): Llama blocks, attention biases with attention_bias, vocab 184622. The
    composite Emu3ForConditionalGeneration adds the VQ-VAE image tokenizer: refused."""
    arch = (c.texts("architectures", None) or ["Emu3ForCausalLM"])[0]
    if not arch.endswith("ForCausalLM"):
        raise SpecError(f"{c.source}: architectures: '{arch}' (Emu3's VQ-VAE image tokenizer) is not modelled; "
                        f"Emu3ForCausalLM counts its language model")
    text = c.sub("text_config") or c
    defaults = {"vocab_size": 184622, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 9216,
                "rms_norm_eps": 1e-5, "tie_word_embeddings": False}  # Emu3TextConfig defaults
    return llama(text.with_defaults(defaults, fill_null=True), norm_eps=text.number("rms_norm_eps", 1e-5))


def _apertus1p5_text(c: HFConfig) -> dict:
    """Apertus 1.5 text model (Apertus1p5TextForCausalLM, an ApertusForCausalLM): Apertus blocks
    (counted as apertus) over an extended
    vocabulary (266752); an LM head pruned to output_vocab_size rows (narrower than the
    embeddings) is not modelled: refused."""
    vocab = c.integer("vocab_size", 266752)
    out = c.integer("output_vocab_size", None, nullable=True)
    if out is not None and out != vocab:
        raise SpecError(f"{c.source}: output_vocab_size: an LM head of {out} rows beside {vocab} embedding rows "
                        f"is not modelled for apertus1p5_text")
    return DENSE_MAPPERS["apertus"](c.with_defaults({"vocab_size": 266752, "max_position_embeddings": 65536}, fill_null=True))


def _cohere_compass_text(c: HFConfig) -> dict:
    """Cohere Compass text model (CohereCompassForCausalLM): Cohere2's parallel block (one bias-free
    LayerNorm, attention and MLP summed), head_dim = hidden / heads, tied, logits x logit_scale
    (null: 1); layer_types default all full, sliding blocks see sliding_window (4096); a layer type
    whose rope_parameters entry is null runs without RoPE (no q/k norms: the spec's NoPE blocks)."""
    heads = c.size("num_attention_heads")
    types = _sliding(c, ["full_attention"] * c.size("num_hidden_layers"))
    rope = c.data.get("rope_parameters")
    nope = isinstance(rope, dict) and "full_attention" in rope and rope["full_attention"] is None
    return llama(c, norm="layernorm", norm_bias=False, norm_eps=c.number("layer_norm_eps", 1e-5),
                 parallel_block=True, tied_embeddings=c.flag("tie_word_embeddings", True),
                 logit_scale=c.number("logit_scale", 1.0, positive=True), head_dim=c.size("hidden_size") // heads,
                 kv_heads=c.integer("num_key_value_heads", None) or heads,
                 nope_full_attention=nope and "sliding_attention" in (types["layer_types"] or []), **types)


N18CAUSAL_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "hyperclovax": _hyperclovax, "kolibri1": _kolibri1, "flint": _flint, "lara_mini": _lara_mini,
    "aria_text": _aria_text, "emu3": _emu3, "apertus1p5_text": _apertus1p5_text,
    "cohere_compass_text": _cohere_compass_text,
}


N18CAUSAL_UNMODELLED: dict[str, str] = {
    "dory": "nGPT's unit-sphere blocks (learned per-channel sqk, s_gate, suv and lambda residual rates, a "
            "per-vocab logit scale) and looped recurrent blocks",
    "hrm_text": "two block stacks (H and L modules) reused over H_cycles x (L_cycles + 1) recurrent passes, "
                "weight-free norms and a sigmoid attention gate",
    "blt": "byte-level patching (a local encoder and decoder around a global transformer, hash n-gram "
           "embeddings and cross-attention between bytes and patches)",
}
"""Refused causal-LM model_types with the mechanism the spec does not express (transformers 5.24)."""
