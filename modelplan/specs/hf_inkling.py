"""HF config mapper of Inkling's text model (transformers 5.24 InklingForCausalLM, InklingTextConfig
defaults): GQA blocks without rotary, q/k RMSNorms over head_dim (scores scaled 1/head_dim), short
convolutions on the keys, values and both residual branches and a relative-logit bias
(`specs/conv_relative.py`); sliding blocks ('hybrid_sliding') with their own heads, kv heads and
head_dim (`attention_by_type`); a SwiGLU of intermediate_size where mlp_layer_types says dense, else
a sigmoid router (e_score_correction_bias a buffer) whose weight also scores the n_shared_experts
shared SwiGLUs, top-k renormalised with them and x route_scale; an RMS-normed token table, an
untied head over vocab_size, the final states divided by logits_mup_width_multiplier.

Inkling 2's text model (Inkling2ForCausalLM, Inkling2TextConfig defaults) keeps the convolutions and
the relative logits and adds attention residuals, per-token sinks, dynamic k/v taps in full blocks and
learned clip scales (`specs/conv_relative.py`), a sigmoid gate on the attention output
(gate_proj Linear(h, heads head_dim): `head_gate` 'element'), routed experts only (a sigmoid router,
renormalised, x route_scale) of a soft-capped SwiGLU in every block, a head of unpadded_vocab_size
rows over a token table of vocab_size rows, and a final logit soft-cap. Inkling 2 Loop's text model
(Inkling2LoopForCausalLM) runs a range of those blocks several passes with message gates."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import compact_types, llama

_TYPES = {"hybrid": "full_attention", "hybrid_sliding": "sliding_attention"}
_ALIASES = {"sconv_kernel_size": "conv_kernel_size", "sliding_window": "sliding_window_size",
            "num_local_experts": "n_routed_experts", "model_max_length": "max_position_embeddings"}
"""InklingTextConfig.attribute_map: checkpoint names of the class's fields."""


def _aliased(c: HFConfig, aliases: dict[str, str]) -> HFConfig:
    """The config with each attribute_map alias's value under its field, the alias winning where both
    are given (PreTrainedConfig sets the alias after the fields, redirected to the field)."""
    data = {**c.data, **{key: c.data[alias] for alias, key in aliases.items() if c.data.get(alias) is not None}}
    return HFConfig(data, c.source, c.path, c.defaults)


def _layer_types(c: HFConfig, layers: int) -> list[str]:
    """layer_types, else every block slides but each sixth, or those local_layer_ids lists
    (InklingTextConfig.__post_init__)."""
    names = c.texts("layer_types", None)
    if names is None:
        local = c.ints("local_layer_ids", None)
        local = set(local) if local is not None else {i for i in range(layers) if (i + 1) % 6}
        names = ["hybrid_sliding" if i in local else "hybrid" for i in range(layers)]
    c.check_names("layer_types", names, _TYPES, layers, "hybrid, hybrid_sliding")
    return [_TYPES[name] for name in names]


def _inkling_text(c: HFConfig) -> dict:
    """Inkling's text model (module docstring)."""
    c = _aliased(c, _ALIASES)
    layers, ffn, expert_ffn = c.size("num_hidden_layers"), c.integer("intermediate_size", 24576), c.integer(
        "moe_intermediate_size", 3072)
    if c.has("dense_intermediate_size"):  # __post_init__: intermediate_size is then the experts' width
        ffn, expert_ffn = c.size("dense_intermediate_size"), ffn
    types = _layer_types(c, layers)
    dense_prefix = c.integer("dense_mlp_idx", 0)
    sparse = c.mlp_sparse_layers(["dense" if i < dense_prefix else "sparse" for i in range(layers)])
    shared = c.integer("n_shared_experts", 2)
    moe = None
    if sparse:
        if shared < 1:
            raise SpecError(f"{c.source}: {c.path}n_shared_experts: {shared} (InklingTopkRouter slices off at "
                            "least one shared expert's logit)")
        moe = dict(num_experts=c.integer("n_routed_experts", 256), top_k=c.integer("num_experts_per_tok", 6),
                   expert_ffn_hidden=expert_ffn, router="sigmoid", router_score_correction=True,
                   norm_topk_prob=True, routed_scaling=c.number("route_scale", 8.0, positive=True),
                   expert_bias=False, shared_experts=shared, shared_expert_ffn_hidden=expert_ffn, layers=sparse)
    window = c.integer("sliding_window_size", 512)
    sliding = "sliding_attention" in types
    by_type = None
    if sliding:
        by_type = {"sliding_attention": {"heads": c.integer("swa_num_attention_heads", 64),
                                         "kv_heads": c.integer("swa_num_key_value_heads", 16),
                                         "head_dim": c.integer("swa_head_dim", 128)}}
    conv = dict(conv_kernel=c.integer("conv_kernel_size", 4), d_rel=c.integer("d_rel", 16),
                rel_extent=c.integer("rel_extent", 1024), sliding_rel_extent=window,
                router_extra_rows=shared if sparse else 0)
    return llama(c, heads=c.integer("num_attention_heads", 64), kv_heads=c.integer("num_key_value_heads", 8),
                 head_dim=c.integer("head_dim", 128), ffn_hidden=ffn, vocab=c.integer("vocab_size", 201024),
                 max_positions=c.integer("max_position_embeddings", 131072), position="none", qk_norm=True,
                 layer_types=compact_types(types), sliding_window=window if sliding else None,
                 attention_by_type=by_type, moe=moe, embedding_norm=True, tied_embeddings=False,
                 logit_scale=1 / c.number("logits_mup_width_multiplier", 24.0, positive=True),
                 # InklingAttention.scaling: 1 / head_dim (q, k RMS-normed); sliding blocks 1 / swa_head_dim
                 attention_scale=1 / c.divisor("head_dim", 128), extras={"conv_relative": conv})


_ALIASES2 = {"sconv_kernel_size": "conv_kernel_size", "sliding_window": "sliding_window_size",
             "num_local_experts": "n_routed_experts", "intermediate_size": "moe_intermediate_size",
             "routed_scaling_factor": "route_scale"}
"""Inkling2TextConfig.attribute_map."""


_INKLING2_SIZES = {"hidden_size": 4608, "num_hidden_layers": 48, "num_attention_heads": 48,
                   "swa_num_attention_heads": 48, "moe_intermediate_size": 2304, "n_routed_experts": 384}
"""Inkling2TextConfig's defaults where Inkling2LoopTextConfig's differ."""
_LOOP_SIZES = {"hidden_size": 2304, "num_hidden_layers": 24, "num_attention_heads": 24,
               "swa_num_attention_heads": 24, "moe_intermediate_size": 1152, "n_routed_experts": 128}
"""Inkling2LoopTextConfig's defaults (transformers 5.24)."""


def _loop(c: HFConfig, layers: int, pool: int) -> dict:
    """Inkling2LoopTextConfig's loop: loop_layer_index_start / end, loop_num_passes, loop_gate_rank
    (or a checkpoint's loop_config core_start / core_end / num_passes / gate_rank), as its
    validate_architecture checks them; the range must fit the blocks (message_input is sized by it)."""
    lc = c.sub("loop_config") or HFConfig({}, c.source, "loop_config.")
    start = lc.integer("core_start", c.integer("loop_layer_index_start", 6))
    end = lc.integer("core_end", c.integer("loop_layer_index_end", 18))
    passes = lc.integer("num_passes", c.integer("loop_num_passes", 3))
    rank = lc.integer("gate_rank", c.integer("loop_gate_rank", 64))
    if passes < 1 or rank < 1:
        raise SpecError(f"{c.source}: {c.path}loop_num_passes / loop_gate_rank: {passes} / {rank} must be >= 1")
    if not 0 < start <= end <= layers or start % pool or end % pool:
        raise SpecError(f"{c.source}: {c.path}loop_layer_index_start / loop_layer_index_end: {start} .. {end} must "
                        f"be multiples of n_layers_per_attn_res_block ({pool}) with 0 < start <= end <= "
                        f"num_hidden_layers ({layers})")
    return dict(loop_start=start, loop_end=end, loop_passes=passes, loop_gate_rank=rank)


def _inkling2_text(c: HFConfig, loop: bool = False) -> dict:
    """Inkling 2's text model (module docstring), with Inkling 2 Loop's looped blocks when `loop`."""
    c = _aliased(c, _ALIASES2).with_defaults(_LOOP_SIZES if loop else _INKLING2_SIZES)
    layers = c.size("num_hidden_layers")
    names = c.texts("layer_types", None) or ["hybrid" if (i + 1) % 6 == 0 else "hybrid_sliding" for i in range(layers)]
    c.check_names("layer_types", names, _TYPES, layers, "hybrid, hybrid_sliding")
    types = [_TYPES[name] for name in names]
    if c.text("scoring_func", "sigmoid") != "sigmoid":
        raise SpecError(f"{c.source}: {c.path}scoring_func: '{c.text('scoring_func')}' not modelled (supported: sigmoid)")
    vocab, head_rows = c.integer("vocab_size", 201024), c.integer("unpadded_vocab_size", 200058)
    if head_rows > vocab:
        raise SpecError(f"{c.source}: {c.path}unpadded_vocab_size: {head_rows} exceeds vocab_size {vocab} (the head "
                        f"would predict tokens the table lacks)")
    expert_ffn, window = c.integer("moe_intermediate_size", 2304), c.integer("sliding_window_size", 1024)
    moe = dict(num_experts=c.integer("n_routed_experts", 384), top_k=c.integer("num_experts_per_tok", 8),
               expert_ffn_hidden=expert_ffn, router="sigmoid", router_score_correction=True, norm_topk_prob=True,
               routed_scaling=c.number("route_scale", 8.0, positive=True), expert_bias=False)
    sliding = "sliding_attention" in types
    c = HFConfig(c.data, c.source, c.path, {**c.defaults, "intermediate_size": expert_ffn})  # experts only
    by_type = {"sliding_attention": {"heads": c.integer("swa_num_attention_heads", 48),
                                     "kv_heads": c.integer("swa_num_key_value_heads", 8),
                                     "head_dim": c.integer("swa_head_dim", 128)}} if sliding else None
    conv = dict(conv_kernel=c.integer("conv_kernel_size", 4), d_rel=c.integer("d_rel", 16),
                rel_extent=c.integer("rel_extent", 1024), sliding_rel_extent=window, mlp_scale=False,
                clip_scales=True, dynamic_kv_conv=True, sink_proj=True,
                pool_block_layers=c.integer("n_layers_per_attn_res_block", 6))
    if loop:
        conv.update(_loop(c, layers, conv["pool_block_layers"]))
    return llama(c, heads=c.integer("num_attention_heads", 48), kv_heads=c.integer("num_key_value_heads", 8),
                 head_dim=c.integer("head_dim", 128), vocab=head_rows, max_positions=c.integer("max_position_embeddings", 1048576),
                 position="none", layer_types=compact_types(types), sliding_window=window if sliding else None,
                 attention_by_type=by_type, moe=moe, embedding_norm=True, tied_embeddings=False,
                 head_gate="element", final_logit_softcap=c.number("final_logit_softcapping", 30.0, positive=True),
                 extras={"conv_relative": conv, "token_extra_rows": vocab - head_rows})


INKLING_MAPPERS = {"inkling_text": _inkling_text, "inkling2_text": _inkling2_text,
                   "inkling2_loop_text": lambda c: _inkling2_text(c, loop=True)}


_VISION_ALIASES = {"native_patch_size": "patch_size", "adapter_merge_size": "spatial_merge_size"}
"""Inkling2VisionConfig.attribute_map."""


def _inkling2_tower(c: HFConfig, text_hidden: int) -> dict:
    """Inkling2VisionModel (Inkling2VisionConfig defaults): a bias-free Linear(C p^2, h) patch embedding,
    a class embedding with its own position row beside a posemb_grid_size^2-row table (interpolated to
    each image: priced at a grid of that side), a biased pre-LayerNorm, ViT blocks (biased q/k/v/out
    and fc1 -> intermediate_size -> fc2, LayerNorms before and after, layer-scale lambdas, 2-D rotary),
    no final norm; Inkling2VisionMerger: m x m patches into linear_1 Linear(h m^2, projection_hidden_dim)
    and linear_2 to the text width, biased when projector_bias."""
    from modelplan.specs.hf_vision import _linear

    raw = c.data.get("vision_config") or {}
    v = _aliased(HFConfig(raw, c.source, "vision_config."), _VISION_ALIASES)
    hidden, patch, grid = v.integer("hidden_size", 1024), v.integer("patch_size", 20), v.integer("posemb_grid_size", 32)
    ffn = v.integer("intermediate_size", None) or int(hidden * v.number("mlp_ratio", 4.0, positive=True))
    merge, inner, bias = v.integer("spatial_merge_size", 2), v.integer("projection_hidden_dim", 4096), v.flag(
        "projector_bias", False)
    return dict(layers=v.integer("num_hidden_layers", 23), hidden=hidden, heads=v.integer("num_attention_heads", 16),
                ffn_hidden=ffn, patch_size=patch, image_size=grid * patch, channels=v.integer("num_channels", 3),
                patch_bias=False, position="learned", position_rows=grid * grid + 1, class_token=True,
                norm="layernorm", norm_bias=True, pre_norm=True, post_norm=False, layer_scale=True,
                connector=[_linear("linear_1", hidden * merge * merge, inner, bias, merge * merge),
                           _linear("linear_2", inner, text_hidden, bias, merge * merge)])


def _inkling2(c: HFConfig, text_mappers: dict, text_type: str) -> dict:
    """Inkling2ForConditionalGeneration / Inkling2LoopForConditionalGeneration: the text model of
    `text_type` (its untied head) and `_inkling2_tower`."""
    from modelplan.specs.hf_n18vlm_base import _text

    fields, _ = _text(c, text_mappers, text_type)
    vision = c.sub("vision_config")
    declared = vision.integer("text_hidden_size", None) if vision is not None else None
    if declared is not None and declared != fields["hidden"]:  # Inkling2Config.validate_architecture
        raise SpecError(f"{c.source}: vision_config.text_hidden_size: {declared} must match text_config.hidden_size "
                        f"({fields['hidden']})")
    fields["vision"] = _inkling2_tower(c, fields["hidden"])
    return fields


INKLING_COMPOSITES = {"inkling2": lambda c, m: _inkling2(c, m, "inkling2_text"),
                      "inkling2_loop": lambda c, m: _inkling2(c, m, "inkling2_loop_text")}
