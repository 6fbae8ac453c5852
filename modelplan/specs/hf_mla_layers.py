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
- mistral_large4_text (MistralLarge4TextModel, MistralLarge4TextConfig defaults) and the composite
  mistral_large4 (MistralLarge4ForConditionalGeneration: Mistral 3's Pixtral tower and projector,
  hf_other.py): MLA without a query latent whose blocks listed 0 in no_rope_layers have no rotary
  dims (their rope dims join the nope ones, no rope key), whose kv_source_layers entries pointing
  to an earlier block read that block's latent (no kv_a_proj_with_mqa / kv_a_layernorm), a learned
  per-head softmax scale and bias on the queries, the lightning indexer over the block input
  (LayerNorm(h), wq_b Linear(h, H d), its own scales) on the 'full' indexer_types blocks, a
  learned rotary alpha, final_logit_softcapping; a dense first_k_dense_replace prefix, then
  softmax group-routed experts beside n_shared_experts x moe_intermediate_size (Mistral4MoE).
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_deepseek32 import DEEPSEEK32_MAPPERS
from modelplan.specs.hf_deepseek_like import _with
from modelplan.specs.hf_moe import MOE_MAPPERS
from modelplan.specs.hf_other import OTHER_MAPPERS

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
    return {**fields, "heads": heads, "mla": base, "moe": moe, "head_gate": "head",
            "mtp_not_built": 0,
            "layer_types": types if "sliding_attention" in names else None,
            "sliding_window": c.size("sliding_window") if "sliding_attention" in names else None,
            "attention_by_type": shapes or None}


_ML4 = dict(vocab_size=204800, hidden_size=6144, intermediate_size=24576, moe_intermediate_size=6144,
            num_hidden_layers=72, num_attention_heads=64, n_shared_experts=1, n_routed_experts=128,
            routed_scaling_factor=1.0, kv_lora_rank=512, qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=64,
            n_group=1, topk_group=1, num_experts_per_tok=4, max_position_embeddings=1048576, rms_norm_eps=1e-5,
            index_topk=2048, index_head_dim=128, index_n_heads=32, first_k_dense_replace=1,
            final_logit_softcapping=30.0, tie_word_embeddings=False)
"""MistralLarge4TextConfig's defaults (transformers 5.24 configuration_mistral_large4.py)."""

_ML4_VISION = dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=30, num_attention_heads=16,
                   patch_size=14, image_size=1540, hidden_act="silu")
"""MistralLarge4Config's Pixtral tower defaults (sub_configs_defaults)."""


def _ml4_indexers(c: HFConfig, layers: int) -> list[int]:
    """The blocks whose indexer_types entry is 'full' (GlmMoeDsaConfig's schedule when absent:
    index_topk_pattern, else every max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0)."""
    names = c.texts("indexer_types", None)
    pattern = c.data.get("index_topk_pattern")
    if names is None and isinstance(pattern, str) and not set(pattern) - {"F", "S"}:
        names = [{"F": "full", "S": "shared"}[x] for x in pattern]
    elif names is None and pattern is not None:
        raise SpecError(f"{c.source}: index_topk_pattern: expected a string of F (full) and S (shared)")
    if names is None:
        freq, offset = max(c.integer("index_topk_freq", 1), 1), c.integer("index_skip_topk_offset", 2)
        names = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]
    c.check_names("indexer_types", names, ("full", "shared"), layers)
    if names[0] != "full":
        raise SpecError(f"{c.source}: indexer_types: block 0 must be 'full' (a 'shared' block reuses an earlier top-k)")
    return [i for i, name in enumerate(names) if name == "full"]


def _mistral_large4_text(c: HFConfig) -> dict:
    """MistralLarge4TextModel (+ the composite's untied lm_head) as DeepSeek-V3 MLA / MoE modules."""
    c = _with(c, _ML4)
    layers = c.size("num_hidden_layers")
    interval = c.integer("no_rope_layer_interval", 4)
    rope = c.ints("no_rope_layers", None) or [int((i + 1) % interval != 0) for i in range(layers)]
    sources = c.ints("kv_source_layers", None) or list(range(layers))
    if len(rope) < layers or len(sources) != layers:
        raise SpecError(f"{c.source}: no_rope_layers / kv_source_layers: one entry per block ({layers}) expected")
    if any(s > i or sources[s] != s for i, s in enumerate(sources)):
        raise SpecError(f"{c.source}: kv_source_layers: every block must read its own latent or an earlier "
                        f"block's that owns one")
    if any(rope[s] != rope[i] for i, s in enumerate(sources)):
        raise SpecError(f"{c.source}: kv_source_layers: a block reading another's latent with a different "
                        f"no_rope_layers entry is not modelled")
    kinds = c.texts("mlp_layer_types", None)
    first = c.integer("first_k_dense_replace", 1)
    kinds = kinds or ["dense" if i < first else "sparse" for i in range(layers)]
    c.check_names("mlp_layer_types", kinds, ("dense", "sparse"), layers)
    v3 = HFConfig({**c.data, "q_lora_rank": None, "first_k_dense_replace": 0, "topk_method": "group_limited_greedy",
                   "scoring_func": "softmax", "num_nextn_predict_layers": 0}, c.source, c.path, c.defaults)
    fields = MOE_MAPPERS["deepseek_v3"](v3)
    sparse = [i for i, kind in enumerate(kinds) if kind == "sparse"]
    moe = {k: v for k, v in fields["moe"].items() if k not in ("first_dense_layers", "layer_freq")}
    owners = _ml4_indexers(c, layers)
    indexer = dict(heads=c.size("index_n_heads"), head_dim=c.size("index_head_dim"), topk=c.size("index_topk"),
                   query_from_hidden=True, layers=None if len(owners) == layers else owners)
    nope = [i for i in range(layers) if not rope[i]]
    mla = {**fields["mla"], "indexer": indexer, "softmax_scales": True, "rotary_alpha": True,
           "nope_layers": nope or None, "kv_source": None if sources == list(range(layers)) else sources}
    return {**fields, "mla": mla, "moe": {**moe, "layers": sparse, "norm_topk_prob": True} if sparse else None,
            "final_logit_softcap": c.number("final_logit_softcapping", 30.0, positive=True, nullable=True)}


def _mistral_large4(c: HFConfig, text_mappers: dict) -> dict:
    """MistralLarge4ForConditionalGeneration: its text model and Mistral 3's Pixtral tower and
    projector (hf_other.py's mistral3 mapper, with MistralLarge4Config's tower defaults)."""
    text = c.sub("text_config") or HFConfig({}, c.source, "text_config.")
    fields = _mistral_large4_text(text)
    vision = {**_ML4_VISION, **(c.sub("vision_config").data if c.sub("vision_config") is not None else {})}
    stand_in = {"model_type": "mistral", "hidden_size": fields["hidden"], "intermediate_size": 1,
                "num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": 1}  # only its width is read
    data = {**c.data, "text_config": stand_in, "vision_config": vision}
    fields["vision"] = OTHER_MAPPERS["mistral3"](HFConfig(data, c.source, c.path))["vision"]
    return {**fields, "tied_embeddings": c.flag("tie_word_embeddings", False)}


MLA_LAYERS_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"dots3_note_text": _dots3_note_text,
                                                              "mistral_large4_text": _mistral_large4_text}
MLA_LAYERS_COMPOSITES = {"mistral_large4": _mistral_large4}
MLA_LAYERS_TEXT_ONLY: dict[str, str] = {"dots3_note": "dots3_note_text"}
"""dots.3's composite (its vision and audio towers are not modelled) counts its text model as dots3_note_text."""
