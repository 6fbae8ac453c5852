"""HF config mappers of decoders with hyper-connections (transformers 5.24; `specs/hyperconn.py`):

- hy_v4 (HYV4ForCausalLM, HYV4Config defaults, tencent/Hy4-preview): DeepSeek-V3.2 blocks (MLA
  with the lightning indexer, a dense first block, sigmoid-routed experts and one shared expert)
  whose attention adds a per-channel output gate (gate_proj Linear(h, heads v_head_dim)) and a
  sink logit per head (HYV4Attention); the indexer only on the blocks indexer_types says 'full'
  (default block 0 and every block i with (i - 1) % 4 == 0), the others reuse its top-k; independent
  hyper-connections of hc_mult streams around both branches and a learned collapse head
  (HYV4HyperConnection, HYV4HyperHead); no MTP modules built (HYV4PreTrainedModel ignores them);
  hy_v4_vl_text: HY-V4-VL's language model, the same blocks under HYV4VLTextConfig's defaults.
- deepseek_v4 (DeepseekV4ForCausalLM, DeepseekV4Config defaults, DeepSeek-V4-Flash-Base):
  DeepSeek-V4's attention (`specs/compressed_attention.py`: shared-KV MQA over a sliding window,
  HCA / CSA compressors, the CSA indexer, a grouped low-rank output, sinks) and an MoE MLP in
  every block (a bias-free router, sqrtsoftplus or sigmoid scores; 'hash_moe' blocks pick
  their experts from a frozen tid2eid buffer, the same weights; one shared expert of
  moe_intermediate_size, DeepseekV4MLP), manifold-constrained hyper-connections of hc_mult streams
  and a learned head (DeepseekV4HyperConnection, DeepseekV4HyperHead); the checkpoint's MTP
  modules are not built (num_nextn_predict_layers is ignored, as the class does). The experts'
  swiglu_limit clamp and the router's score function change no count and are not executed.
- glm5_next_text (Glm5NextTextModel and the composite's untied lm_head, Glm5NextTextConfig
  defaults, zai-org/GLM-5.3-Flash): Kimi Delta Attention blocks ('linear_attention': q/k/v, a
  depthwise conv, low-rank forget and output gates, per-channel dt_bias, A_log per head) beside
  NoPE MLA blocks ('indexed_attention', qk_rope_head_dim 0) whose lightning indexer scores pooled
  keys (index_kpool tokens a pool, Glm5NextTextIndexer) and whose 'shared' blocks reuse the last
  top-k; dense first blocks then DeepSeek-V3 routed + shared experts; manifold-constrained
  hyper-connections with a parameter-free mean head (Glm5NextTextHyperHead); no position encoding.
- qwen4_exp_text (Qwen4ExpForCausalLM, Qwen4ExpTextConfig defaults; the qwen4_exp composite reads it
  through Qwen3.5-MoE's tower mapper): Qwen3.5-MoE's gated-DeltaNet and gated-attention blocks,
  the full-attention ('indexed_attention') ones with the QSA token indexer (`specs/qsa.py`), every
  block wrapped in two low-rank gated residuals over hc_count streams that replace its norms, a
  gated-residual head and no final norm; per-layer n-gram embeddings (ple_layer_ids) are refused.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_deepseek32 import DEEPSEEK32_MAPPERS
from modelplan.specs.hf_deepseek_like import _with
from modelplan.specs.hf_llama import llama
from modelplan.specs.hf_n18ocr import OCR_MAPPERS
from modelplan.specs.hf_hybrid import HYBRID_MAPPERS
from modelplan.specs.hf_vision import VISION_MAPPERS, _linear

_HY_V4 = dict(vocab_size=120832, hidden_size=2816, intermediate_size=6912, moe_intermediate_size=768,
              num_hidden_layers=34, num_attention_heads=32, max_position_embeddings=262144, rms_norm_eps=1e-5,
              tie_word_embeddings=False, attention_bias=False, n_routed_experts=256, n_shared_experts=1,
              num_experts_per_tok=8, routed_scaling_factor=2.827, norm_topk_prob=True, n_group=1, topk_group=1,
              q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
              index_topk=2048, index_head_dim=128, index_n_heads=16, hc_mult=4)
"""HYV4Config's defaults (transformers 5.24 configuration_hy_v4.py)."""

_HY_V4_VL_TEXT = {**_HY_V4, "hidden_size": 6144, "intermediate_size": 18432, "moe_intermediate_size": 2048,
                  "num_hidden_layers": 78, "num_attention_heads": 64, "q_lora_rank": 2048, "index_n_heads": 32}
"""HYV4VLTextConfig's defaults (configuration_hy_v4_vl.py: HYV4Config with a wider text model)."""


def _hy_v4(c: HFConfig, defaults: dict = _HY_V4) -> dict:
    """HYV4ForCausalLM as DeepSeek-V3.2 modules plus the gate, sinks and hyper-connections."""
    c = _with(c, defaults)
    layers = c.size("num_hidden_layers")
    kinds = c.texts("layer_types", None)
    if kinds is not None and set(kinds) - {"indexed_attention"}:
        raise SpecError(f"{c.source}: layer_types: only 'indexed_attention' blocks exist in hy_v4 (got {sorted(set(kinds))})")
    if c.texts("mlp_layer_types", None) is None:  # HYV4Config.__post_init__: one dense block, then sparse
        c = HFConfig({**c.data, "mlp_layer_types": ["dense"] * min(1, layers) + ["sparse"] * max(layers - 1, 0)},
                     c.source, c.path, c.defaults)
    indexers = c.texts("indexer_types", None) or ["full" if i == 0 or (i - 1) % 4 == 0 else "shared"
                                                  for i in range(layers)]
    c.check_names("indexer_types", indexers, ("full", "shared"), layers)
    if indexers[0] != "full":
        raise SpecError(f"{c.source}: indexer_types: block 0 must be 'full' (a 'shared' block reuses an earlier top-k)")
    fields = DEEPSEEK32_MAPPERS["deepseek_v32"](c)
    owners = [i for i, kind in enumerate(indexers) if kind == "full"]
    indexer = {**fields["mla"]["indexer"], "layers": None if len(owners) == layers else owners}
    hc = dict(streams=c.integer("hc_mult", 4), comb=False, head="learned")
    if hc["streams"] < 2:
        raise SpecError(f"{c.source}: hc_mult: {hc['streams']} streams is not a hyper-connection (>= 2)")
    return {**fields, "mla": {**fields["mla"], "indexer": indexer}, "head_gate": "element", "attention_sinks": True,
            "hyper_connections": hc, "mtp_not_built": 0}


_DEEPSEEK_V4 = dict(vocab_size=129280, hidden_size=4096, moe_intermediate_size=2048, num_hidden_layers=43,
                    num_attention_heads=64, head_dim=512, q_lora_rank=1024, num_experts_per_tok=6,
                    n_routed_experts=256, scoring_func="sqrtsoftplus", routed_scaling_factor=1.5,
                    max_position_embeddings=1048576, hc_mult=4, sliding_window=128, o_groups=8, o_lora_rank=1024,
                    index_n_heads=64, index_head_dim=128, index_topk=512, rms_norm_eps=1e-6, tie_word_embeddings=False)
"""DeepseekV4Config's defaults (transformers 5.24 configuration_deepseek_v4.py)."""

_V4_TYPES = {"sliding_attention": "none", "compressed_sparse_attention": "csa", "heavily_compressed_attention": "hca"}
_V4_RATIOS = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}


def _v4_compressors(c: HFConfig, layers: int) -> list[str]:
    """layer_types (or the legacy compress_ratios), else DeepseekV4Config.__post_init__'s default:
    two HCA blocks, then CSA at odd and HCA at even offsets."""
    names = c.texts("layer_types", None)
    if names is None and c.data.get("compress_ratios") is not None:
        ratios = c.ints("compress_ratios")
        if set(ratios) - set(_V4_RATIOS):
            raise SpecError(f"{c.source}: compress_ratios: expected entries of 0, 4, 128 (got {sorted(set(ratios))})")
        names = [_V4_RATIOS[r] for r in ratios]
    if names is None:
        names = ["heavily_compressed_attention"] * min(layers, 2) + [
            "compressed_sparse_attention" if i % 2 else "heavily_compressed_attention" for i in range(max(layers - 2, 0))]
    names = names[:layers]
    c.check_names("layer_types", names, _V4_TYPES, layers)
    return [_V4_TYPES[name] for name in names]


def _v4_rates(c: HFConfig) -> tuple[int, int]:
    """(csa, hca) tokens a compressed key pools: compress_rates, the legacy compress_rate_csa /
    compress_rate_hca, else 4 and 128."""
    rates = c.sub("compress_rates")
    csa = rates.integer("compressed_sparse_attention", 4) if rates is not None else 4
    hca = rates.integer("heavily_compressed_attention", 128) if rates is not None else 128
    return c.integer("compress_rate_csa", csa), c.integer("compress_rate_hca", hca)


def _v4_rotary_fraction(c: HFConfig, head_dim: int) -> float:
    """partial_rotary_factor (top level or rope_parameters.main), else the legacy qk_rope_head_dim
    over head_dim, else 64 / 512 (DeepseekV4Config.default_partial_rotary_factor)."""
    rope = c.sub("rope_parameters")
    main = rope.sub("main") if rope is not None else None
    if c.data.get("partial_rotary_factor") is not None:
        return c.number("partial_rotary_factor")
    if main is not None and main.has("partial_rotary_factor"):
        return main.number("partial_rotary_factor")
    if c.data.get("qk_rope_head_dim") is not None:
        return c.integer("qk_rope_head_dim") / head_dim
    return 64 / 512


def _deepseek_v4(c: HFConfig) -> dict:
    """DeepseekV4ForCausalLM: every block DeepSeek-V4 attention + MoE, hyper-connections around both."""
    c = _with(c, _DEEPSEEK_V4)
    layers, head_dim = c.size("num_hidden_layers"), c.size("head_dim")
    mlp_types = c.texts("mlp_layer_types", None)
    if mlp_types is not None:
        c.check_names("mlp_layer_types", mlp_types[:layers], ("hash_moe", "moe"), layers)
    scoring = c.text("scoring_func", "sqrtsoftplus")
    if scoring not in ("sqrtsoftplus", "sigmoid"):  # DeepseekV4TopKRouter: ACT2FN[scoring_func] (no softmax there)
        raise SpecError(f"{c.source}: scoring_func: unsupported '{scoring}' (sqrtsoftplus, sigmoid: the activations "
                        f"DeepseekV4TopKRouter can look up)")
    csa, hca = _v4_rates(c)
    ffn = c.size("moe_intermediate_size")
    moe = dict(num_experts=c.integer("n_routed_experts", 256), top_k=c.integer("num_experts_per_tok", 6),
               expert_ffn_hidden=ffn, shared_experts=1, shared_expert_ffn_hidden=ffn, expert_bias=False,
               router="sigmoid", norm_topk_prob=True,
               router_score_correction=True, routed_scaling=c.number("routed_scaling_factor", 1.5, positive=True))
    ca = dict(q_lora_rank=c.size("q_lora_rank"), o_groups=c.size("o_groups"), o_lora_rank=c.size("o_lora_rank"),
              csa_rate=csa, hca_rate=hca, index_heads=c.size("index_n_heads"), index_head_dim=c.size("index_head_dim"),
              index_topk=c.size("index_topk"), compressors=_v4_compressors(c, layers))
    hc = dict(streams=c.integer("hc_mult", 4), comb=True, head="learned")
    c = HFConfig({**c.data, "intermediate_size": ffn}, c.source, c.path, c.defaults)
    return llama(c, kv_heads=1, head_dim=head_dim, ffn_hidden=0, qkv_bias=False, attn_out_bias=False, mlp_bias=False,
                 rotary_fraction=_v4_rotary_fraction(c, head_dim), layer_types=["sliding_attention"],
                 sliding_window=c.size("sliding_window"), attention_sinks=True, compressed_attention=ca, moe=moe,
                 hyper_connections=hc)


_GLM5_NEXT_TEXT = dict(num_hidden_layers=45, hidden_size=4096, intermediate_size=12288, num_attention_heads=64,
                       max_position_embeddings=1048576, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=256,
                       qk_rope_head_dim=0, v_head_dim=256, moe_intermediate_size=2048, num_experts_per_tok=8,
                       n_routed_experts=288, n_shared_experts=1, routed_scaling_factor=2.5, n_group=1, topk_group=1,
                       norm_topk_prob=True, linear_head_dim=128, linear_num_heads=64, linear_conv_kernel_dim=4,
                       hc_mult=4, index_kpool=16, index_head_dim=128, index_n_heads=32, index_topk=2048,
                       vocab_size=154880, rms_norm_eps=1e-5, tie_word_embeddings=False, num_nextn_predict_layers=0)
"""Glm5NextTextConfig's defaults (transformers 5.24 configuration_glm5_next.py; GlmMoeDsaConfig's for the rest)."""


def _glm5_indexers(c: HFConfig, layers: int) -> list[str]:
    """indexer_types, else index_topk_pattern ('F' full / 'S' shared), else Glm5NextTextConfig's
    schedule: 'full' where max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0."""
    names = c.texts("indexer_types", None)
    pattern = c.data.get("index_topk_pattern")
    if names is None and pattern is not None:
        if not isinstance(pattern, str) or set(pattern) - {"F", "S"}:
            raise SpecError(f"{c.source}: index_topk_pattern: expected a string of F (full) and S (shared)")
        names = [{"F": "full", "S": "shared"}[x] for x in pattern]
    if names is None:
        freq, offset = max(c.integer("index_topk_freq", 1), 1), c.integer("index_skip_topk_offset", 2)
        names = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]
    c.check_names("indexer_types", names, ("full", "shared"), layers)
    return names


def _glm5_next_text(c: HFConfig) -> dict:
    """GLM-5-Next's language model: KDA and indexed NoPE MLA blocks with mHC hyper-connections."""
    c = _with(c, _GLM5_NEXT_TEXT)
    layers = c.size("num_hidden_layers")
    types = c.texts("layer_types", None) or ["linear_attention" if i % 4 != 3 else "indexed_attention"
                                             for i in range(layers)]
    types = ["indexed_attention" if t == "full_attention" else t for t in types]
    c.check_names("layer_types", types, ("linear_attention", "indexed_attention"), layers)
    if c.texts("mlp_layer_types", None) is None:
        c = HFConfig({**c.data, "mlp_layer_types": ["dense"] * min(3, layers) + ["sparse"] * max(layers - 3, 0)},
                     c.source, c.path, c.defaults)
    if c.size("index_topk") % c.size("index_kpool"):
        raise SpecError(f"{c.source}: index_topk: {c.size('index_topk')} is not a multiple of index_kpool "
                        f"{c.size('index_kpool')} (Glm5NextTextConfig.validate_architecture)")
    linear = c.sub("linear_attn_config")
    heads = linear.integer("num_heads", c.size("linear_num_heads")) if linear is not None else c.size("linear_num_heads")
    dim = linear.integer("head_dim", c.size("linear_head_dim")) if linear is not None else c.size("linear_head_dim")
    kernel = (linear.integer("short_conv_kernel_size", c.size("linear_conv_kernel_dim")) if linear is not None
              else c.size("linear_conv_kernel_dim"))
    fields = DEEPSEEK32_MAPPERS["deepseek_v32"](c)
    indexed = [i for i, t in enumerate(types) if t == "indexed_attention"]
    owners = [i for i, kind in enumerate(_glm5_indexers(c, layers)) if kind == "full" and i in indexed]
    if indexed and (not owners or owners[0] != indexed[0]):
        raise SpecError(f"{c.source}: indexer_types: the first indexed_attention block must be 'full'")
    indexer = {**fields["mla"]["indexer"], "kpool": c.size("index_kpool"),
               "kpool_tail": c.flag("index_kpool_always_select_tail", True),
               "layers": None if owners == list(range(layers)) else owners or [0]}
    out = {**fields, "mla": {**fields["mla"], "indexer": indexer}, "position": "none",
           "mtp_not_built": 0,
           "hyper_connections": dict(streams=c.integer("hc_mult", 4), comb=True, head="mean"),
           "layer_types": ["gated_deltanet" if t == "linear_attention" else "full_attention" for t in types]}
    if "linear_attention" in types:
        out["deltanet"] = dict(key_heads=heads, value_heads=heads, key_head_dim=dim, value_head_dim=dim,
                               conv_kernel=kernel, kda=True)
    return out


def _glm5_next(c: HFConfig, text_mappers: dict) -> dict:
    """Glm5NextForConditionalGeneration: its text model (`_glm5_next_text`, untied lm_head) and
    Glm5NextVisionModel, GLM-OCR's tower (hf_n18ocr.py) whose merger's SwiGLU is
    projection_intermediate_size wide (Glm5NextVisionPatchMerger: context_dim)."""
    text = c.sub("text_config") or HFConfig({}, c.source, "text_config.")
    fields = _glm5_next_text(text)
    v = c.sub("vision_config", {})
    vision = OCR_MAPPERS["glm_ocr"](HFConfig({"vision_config": v.data}, c.source, c.path), text_mappers)["vision"]
    out, inner = v.integer("out_hidden_size", 1536), v.integer("projection_intermediate_size", 10240)
    m2 = v.integer("spatial_merge_size", 2) ** 2
    kept = [layer for layer in vision["connector"] if layer["name"] not in ("merger/gate_up", "merger/down")]
    vision["connector"] = kept + [_linear("merger/gate_up", out, inner, False, m2, 2), _linear("merger/down", inner, out, False, m2)]
    return {**fields, "vision": vision, "tied_embeddings": c.flag("tie_word_embeddings", False)}


_QWEN4 = dict(num_experts=512, num_experts_per_tok=10, norm_topk_prob=True, hc_count=4, hc_lowrank=320)
"""Qwen4ExpTextConfig's defaults where they differ from Qwen3_5MoeTextConfig's (transformers 5.24)."""

_QSA = ("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio")


def _qwen4_exp_text(c: HFConfig) -> dict:
    """Qwen4ExpForCausalLM: Qwen3.5-MoE blocks, QSA on the full-attention ones, gated residual streams."""
    c = _with(c, _QWEN4)
    if c.ints("ple_layer_ids", None):
        raise SpecError(f"{c.source}: ple_layer_ids: per-layer n-gram embeddings (PLE: hashed n-gram tables and a "
                        f"dilated conv per listed block) are not modelled")
    types = c.texts("layer_types", None)
    if types is not None:
        types = ["full_attention" if t in ("indexed_attention", "full_attention") else t for t in types]
        c = HFConfig({**c.data, "layer_types": types}, c.source, c.path, c.defaults)
    fields = HYBRID_MAPPERS["qwen3_5_moe_text"](c)  # Qwen3.5-MoE's blocks (hf_hybrid.py)
    if any(t != "gated_deltanet" for t in fields.get("layer_types") or ["full_attention"]):
        missing = [key for key in _QSA if c.data.get(key) is None]
        if missing:
            raise SpecError(f"{c.source}: {missing[0]}: missing (Qwen4-Exp's full-attention blocks build the QSA "
                            f"indexer: transformers 5.24 cannot build them without {', '.join(missing)})")
        if c.integer("indexer_kv_heads") != 1:
            raise SpecError(f"{c.source}: indexer_kv_heads: Qwen4-Exp's QSA has one index key head "
                            f"(got {c.integer('indexer_kv_heads')})")
        fields["token_indexer"] = dict(heads=c.size("indexer_n_heads"), head_dim=c.size("indexer_head_dim"),
                                       budget=c.size("indexer_budget"), compress_ratio=c.size("indexer_compress_ratio"))
    streams = c.integer("hc_count", 4)
    if streams < 2:
        raise SpecError(f"{c.source}: hc_count: {streams} streams is not a hyper-connection (>= 2)")
    fields["hyper_connections"] = dict(streams=streams, comb=False, lowrank=c.size("hc_lowrank"), head="learned")
    return {**fields, "final_norm": False, "norms_per_layer": None}


def _qwen4_exp(c: HFConfig, text_mappers: dict) -> dict:
    """Qwen4ExpForConditionalGeneration: Qwen3.5-MoE's tower and merger (Qwen4ExpVisionModel is
    Qwen3_5MoeVisionModel; hf_vision.py) around the qwen4_exp_text model."""
    text = c.sub("text_config")
    data = {**c.data, "text_config": {"model_type": "qwen4_exp_text", **(text.data if text is not None else {})}}
    return VISION_MAPPERS["qwen3_5_moe"](HFConfig(data, c.source, c.path), text_mappers)


HYPERCONN_COMPOSITES = {"glm5_next": _glm5_next, "qwen4_exp": _qwen4_exp}
"""Composite model_types (the config and the text mapper table, as hf_vision.VISION_MAPPERS)."""

HYPERCONN_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "hy_v4": _hy_v4, "hy_v4_vl_text": lambda c: _hy_v4(c, _HY_V4_VL_TEXT), "deepseek_v4": _deepseek_v4,
    "glm5_next_text": _glm5_next_text, "qwen4_exp_text": _qwen4_exp_text}
"""hy_v4_vl_text: HY-V4-VL's language model (HYV4VLTextModel, the same modules; its m-RoPE has no
weights) with the composite's untied lm_head."""

HYPERCONN_TEXT_ONLY: dict[str, str] = {"hy_v4_vl": "hy_v4_vl_text"}
"""Refused composites whose text_config alone is counted (its HunYuan-VL tower is not modelled)."""
