"""HF config mapper of a decoder whose MLA sizes differ by layer type (transformers 5.24;
`TransformerSpec.attention_by_type` with an `mla` per layer type, specs/attention_shape.py):

- dots3_note_text (Dots3NoteForCausalLM, Dots3NoteTextConfig defaults, dots-studio/dots3-note-prev):
  DeepSeek-V3.2 blocks whose 'indexed_attention' blocks (default: blocks 0, 1 and every i with
  i % 4 == 1) run MLA with the lightning indexer and whose 'sliding_attention' blocks run a
  narrower MLA (their own heads, ranks and head widths: per_layer_config, or the legacy swa_* keys)
  over a sliding_window without one; every block adds a per-head sigmoid gate g_proj Linear(h,
  heads) and an RMSNorm over the rope key (k_rope_only_layernorm); a dense first block, then
  sigmoid-routed experts beside one shared expert of shared_experts_intermediate_size x
  n_shared_experts (Dots3NoteTextMoE); the checkpoint's MTP block is not built.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_deepseek32 import DEEPSEEK32_MAPPERS
from modelplan.specs.hf_deepseek_like import _with

_DOTS3 = dict(vocab_size=152064, hidden_size=5120, intermediate_size=13824, moe_intermediate_size=1536,
              num_hidden_layers=46, num_attention_heads=128, n_shared_experts=1, n_routed_experts=256,
              routed_scaling_factor=1.0, kv_lora_rank=512, q_lora_rank=1024, qk_rope_head_dim=64, v_head_dim=128,
              qk_nope_head_dim=128, n_group=1, topk_group=1, num_experts_per_tok=8, norm_topk_prob=True,
              max_position_embeddings=524288, rms_norm_eps=1e-5, tie_word_embeddings=False, index_topk=2048,
              index_head_dim=128, index_n_heads=64, sliding_window=512, shared_experts_intermediate_size=1536)
"""Dots3NoteTextConfig's defaults (transformers 5.24 configuration_dots3_note.py)."""

_SWA = dict(num_attention_heads=64, q_lora_rank=1024, kv_lora_rank=1024, head_dim=256, qk_nope_head_dim=192,
            v_head_dim=128)
"""The sliding blocks' sizes when per_layer_config is absent (Dots3NoteTextConfig.__post_init__'s swa_* defaults)."""

_SIZES = ("num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank", "head_dim", "qk_nope_head_dim",
          "qk_rope_head_dim", "v_head_dim")


def _layer_types(c: HFConfig, layers: int) -> list[str]:
    """layer_types, else the __post_init__ default (use_sliding_window, use_dsa)."""
    names = c.texts("layer_types", None)
    if names is None:
        full = "full_attention" if c.data.get("use_dsa") is False else "indexed_attention"
        sliding = c.data.get("use_sliding_window", True) is not False
        names = [full if not sliding or i < 2 or i % 4 == 1 else "sliding_attention" for i in range(layers)]
    c.check_names("layer_types", names, ("indexed_attention", "full_attention", "sliding_attention"), layers)
    if {"indexed_attention", "full_attention"} <= set(names):
        raise SpecError(f"{c.source}: layer_types: 'indexed_attention' beside 'full_attention' blocks (an indexer "
                        f"on some global blocks only) is not modelled")
    return names


def _overrides(c: HFConfig, names: list[str]) -> dict[int, dict]:
    """Each block's size overrides: per_layer_config (keys the block index), else the swa_* keys on
    the sliding blocks."""
    given = c.sub("per_layer_config")
    if given is None:
        swa = {key: c.integer(f"swa_{key}", default) for key, default in _SWA.items()}
        swa["qk_rope_head_dim"] = c.integer("swa_qk_rope_head_dim", swa["head_dim"] - swa["qk_nope_head_dim"])
        return {i: swa for i, name in enumerate(names) if name == "sliding_attention"}
    out = {}
    for key in given.data:
        if not key.isdigit() or int(key) >= len(names):
            raise SpecError(f"{c.source}: per_layer_config: '{key}' is not a block index below {len(names)}")
        block = given.sub(key)
        unknown = sorted(set(block.data) - set(_SIZES))
        if unknown:
            raise SpecError(f"{c.source}: per_layer_config.{key}: {unknown} are not modelled (sizes: {', '.join(_SIZES)})")
        out[int(key)] = {k: block.integer(k) for k in block.data}
    return out


def _mla(c: HFConfig, sizes: dict) -> dict:
    return dict(kv_lora_rank=sizes.get("kv_lora_rank", c.size("kv_lora_rank")),
                q_lora_rank=sizes.get("q_lora_rank", c.size("q_lora_rank")),
                qk_nope_head_dim=sizes.get("qk_nope_head_dim", c.size("qk_nope_head_dim")),
                qk_rope_head_dim=sizes.get("qk_rope_head_dim", c.size("qk_rope_head_dim")),
                v_head_dim=sizes.get("v_head_dim", c.size("v_head_dim")), rope_key_norm=True)


def _dots3_note_text(c: HFConfig) -> dict:
    """Dots3NoteForCausalLM as DeepSeek-V3.2 modules with MLA sizes by layer type."""
    c = _with(c, _DOTS3)
    layers = c.size("num_hidden_layers")
    names = _layer_types(c, layers)
    if c.texts("mlp_layer_types", None) is None:
        first, freq = c.integer("first_k_dense_replace", 1), c.integer("moe_layer_freq", 1)
        kinds = ["sparse" if i >= first and i % freq == 0 else "dense" for i in range(layers)]
        c = HFConfig({**c.data, "mlp_layer_types": kinds}, c.source, c.path, c.defaults)
    overrides = _overrides(c, names)
    by_type: dict[str, dict] = {}
    for i, name in enumerate(names):
        sizes = overrides.get(i, {})
        if by_type.setdefault(name, sizes) != sizes:
            raise SpecError(f"{c.source}: per_layer_config: sizes that differ between {name} blocks are not modelled")
    fields = DEEPSEEK32_MAPPERS["deepseek_v32"](c)
    base_type = "sliding_attention" if set(names) == {"sliding_attention"} else next(n for n in names if n != "sliding_attention")
    base = _mla(c, by_type[base_type])
    if base_type == "indexed_attention":
        base["indexer"] = fields["mla"]["indexer"]
    heads = by_type[base_type].get("num_attention_heads", c.size("num_attention_heads"))
    shapes = {}
    if "sliding_attention" in names and base_type != "sliding_attention":
        sizes = by_type["sliding_attention"]
        shapes["sliding_attention"] = {"heads": sizes.get("num_attention_heads", heads), "mla": _mla(c, sizes)}
    types = ["sliding_attention" if n == "sliding_attention" else "full_attention" for n in names]
    moe = fields["moe"]
    if moe is not None:  # Dots3NoteTextMoE: one shared MLP of shared_experts_intermediate_size x n_shared_experts
        shared = c.integer("n_shared_experts", 1)
        if shared < 1:
            raise SpecError(f"{c.source}: n_shared_experts: dots.3 needs at least one shared expert (got {shared})")
        moe = {**moe, "shared_experts": 1, "shared_expert_ffn_hidden": shared * c.size("shared_experts_intermediate_size")}
    return {**fields, "heads": heads, "mla": base, "moe": moe, "head_gate": "head", "mtp_layers": 0,
            "layer_types": types if "sliding_attention" in names else None,
            "sliding_window": c.size("sliding_window") if "sliding_attention" in names else None,
            "attention_by_type": shapes or None}


MLA_LAYERS_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"dots3_note_text": _dots3_note_text}
MLA_LAYERS_TEXT_ONLY: dict[str, str] = {"dots3_note": "dots3_note_text"}
"""dots.3's composite (its vision and audio towers are not modelled) counts its text model as dots3_note_text."""
