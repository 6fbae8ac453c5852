"""HuggingFace config.json -> TransformerSpec (modelplan.specs.hf): counts of published
checkpoints against their publishers' totals and against transformers' own modules (built on the
meta device), the head read from `architectures`, and one-line errors for bad values."""

from __future__ import annotations

import json

import pytest

from _hf_hybrid_cases import HYBRID_VARIANTS
from _hf_new_cases import NEW_VARIANTS, variant
from _hf_vision_cases import VISION_VARIANTS
from _hf_n18vlm_cases import N18VLM_CASES
from _hf_vlm_towers_cases import TOWER_CASES
from _hf_composites_more_cases import CASES as COMPOSITES_MORE_CASES
from _hf_reference import config, fixture_names, hf_mtp_numel, hf_numel
from modelplan.count.params import count_params, not_built_params
from modelplan.errors import SpecError
from modelplan.specs.hf import MAPPERS, from_hf_config
from modelplan.specs.hf_encoder_models import ENCODER_MODEL_MAPPERS
from modelplan.specs.hf_image_classifiers import IMAGE_CLASSIFIER_MAPPERS


def count(data: dict) -> int:
    return count_params(from_hf_config(data, "config.json")).total


def counts(name: str, **overrides):
    return count_params(from_hf_config(config(name, **overrides), "config.json"))


@pytest.mark.parametrize(
    ("name", "total"),
    [
        ("gpt2", 124_439_808),  # HF safetensors metadata, openai-community/gpt2
        ("llama-2-7b", 6_738_415_616),  # HF safetensors metadata, meta-llama/Llama-2-7b-hf
        ("llama-3-8b", 8_030_261_248),  # HF safetensors metadata, meta-llama/Meta-Llama-3-8B
        ("mistral-7b-v0.1", 7_241_732_096),  # HF safetensors metadata, mistralai/Mistral-7B-v0.1
        ("mixtral-8x7b-v0.1", 46_702_792_704),  # HF safetensors metadata
        ("bloom-560m", 559_214_592),  # bigscience/bloom-560m model card
        ("pythia-160m", 162_322_944),  # Biderman et al. 2023 (Pythia), Table 1 total params
    ],
)
def test_published_totals(name, total):
    """Configs of released models count to the totals their publishers report."""
    assert count(config(name)) == total


@pytest.mark.parametrize(
    ("name", "billions", "digits"),
    [
        ("qwen3-8b", 8.2, 1),  # Qwen3-8B model card: 8.2B parameters
        ("qwen3-32b", 32.8, 1),  # Qwen3-32B model card: 32.8B
        ("qwen3-235b-a22b", 235, 0),  # Qwen3-235B-A22B model card: 235B total
        ("qwen3-30b-a3b", 30.5, 1),  # Qwen3-30B-A3B model card: 30.5B total
        ("gpt-oss-120b", 116.83, 2),  # OpenAI gpt-oss model card, Table 1: 116.83B total
        ("gpt-oss-20b", 20.91, 2),  # OpenAI gpt-oss model card, Table 1: 20.91B total
        ("phi-4", 14.7, 1),  # Abdin et al. 2024 (Phi-4 technical report): 14B-class, HF 14.7B
        ("olmoe-1b-7b-0924", 6.9, 1),  # Muennighoff et al. 2024 (OLMoE): 6.9B total
        ("phi-3.5-moe-instruct", 41.9, 1),  # Phi-3.5-MoE model card: 41.9B total
        ("deepseek-v2-lite", 15.7, 1),  # DeepSeek-V2 paper, sec. 5 (V2-Lite): 15.7B total
        ("jamba-v0.1", 51.6, 1),  # AI21 Jamba model card: 52B total (51.6B)
        ("gemma-3-27b-it", 27.4, 1),  # Gemma 3 technical report, Table 1: 27.4B (vision incl.)
    ],
)
def test_published_totals_rounded(name, billions, digits):
    """New-family checkpoints round to the totals their publishers state."""
    assert round(count(config(name)) / 1e9, digits) == billions


@pytest.mark.parametrize(
    ("name", "billions", "digits"),
    [
        ("qwen3-235b-a22b", 22, 0),  # 22B activated (model card)
        ("qwen3-30b-a3b", 3.3, 1),  # 3.3B activated (model card)
        ("olmoe-1b-7b-0924", 1.3, 1),  # 1.3B active (OLMoE paper)
        ("phi-3.5-moe-instruct", 6.6, 1),  # 6.6B active (model card)
        ("llama-4-scout-17b-16e-text", 17, 0),  # 17B active (Llama 4 model card)
        ("llama-4-maverick-17b-128e-text", 17, 0),  # 17B active
        ("jamba-v0.1", 12, 0),  # 12B active (Jamba model card)
    ],
)
def test_published_active_parameters(name, billions, digits):
    """Active parameters (total minus the routed experts a token skips) match the published
    figures (which count the embedding table, as `active` does) to their stated precision; some
    cards truncate (Qwen3-30B-A3B: 3.35B is '3.3B'), so within one unit of the last digit."""
    assert abs(counts(name).active / 1e9 - billions) < 10 ** -digits


def test_gpt_oss_active_without_the_input_embedding():
    """gpt-oss-120b: 5.13B active (OpenAI model card), counting the unembedding but not the
    embedding table: active - vocab * hidden."""
    spec_counts = counts("gpt-oss-120b")
    assert round((spec_counts.active - 201088 * 2880) / 1e9, 2) == 5.13


def test_deepseek_v3_main_model_and_mtp():
    """DeepSeek-V3: 671B main model (paper, Table / README), what DeepseekV3ForCausalLM builds, and
    one MTP module of 11.6B unique parameters (README_WEIGHTS: 11.5B without the shared embedding
    and head) reported apart as not built, outside the total."""
    spec = from_hf_config(config("deepseek-v3"))
    assert round(count_params(spec).total / 1e9) == 671 and "mtp" not in count_params(spec).breakdown
    assert (spec.mtp_layers, spec.mtp_not_built) == (0, 1)
    assert round(not_built_params(spec)["mtp"] / 1e9, 1) == 11.6


def test_mixtral_active_parameters():
    """Mixtral-8x7B uses 12,879,925,248 parameters per token (model card: 12.9B active)."""
    assert counts("mixtral-8x7b-v0.1").active == 12_879_925_248


def test_falcon_7b_is_multi_query_and_parallel():
    """Falcon-7B (multi_query, parallel_attn): one KV head, one LayerNorm per block."""
    spec = from_hf_config(config("falcon-7b"))
    assert (spec.num_kv_heads, spec.parallel_block, spec.num_norms_per_layer) == (1, True, 1)


def test_opt_position_table_has_two_extra_rows():
    """OPTLearnedPositionalEmbedding allocates max_position_embeddings + 2 rows."""
    assert from_hf_config(config("opt-125m")).max_positions == 2050


def test_gemma3_pattern_is_five_local_one_global():
    """Gemma 3: sliding_window_pattern 6 -> five sliding blocks, then a global one, cyclically."""
    spec = from_hf_config(config("gemma-3-1b-it"))
    assert spec.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    assert (spec.sliding_window, spec.layer_type(5), spec.layer_type(25)) == (512, "full_attention", "sliding_attention")


def test_gpt_oss_layer_types_alternate():
    """gpt-oss lists 36 layer_types alternating sliding (window 128) and full: stored as a cycle."""
    spec = from_hf_config(config("gpt-oss-120b"))
    assert (spec.layer_types, spec.sliding_window) == (["sliding_attention", "full_attention"], 128)


def test_llama4_chunked_layers_and_moe_interleave():
    """Llama 4 Maverick: NoPE global attention every 4th block, chunked (8192) elsewhere; MoE on
    every 2nd block (interleave_moe_layer_step 2: blocks 1, 3, ...)."""
    spec = from_hf_config(config("llama-4-maverick-17b-128e-text"))
    assert spec.layer_types == ["chunked_attention"] * 3 + ["full_attention"]
    assert [spec.is_moe_layer(i) for i in range(4)] == [False, True, False, True]


def test_jamba_hybrid_pattern():
    """Jamba: attention at offset 4 of every 8 blocks, Mamba elsewhere; experts on odd blocks."""
    spec = from_hf_config(config("jamba-v0.1"))
    assert spec.layer_types == ["mamba"] * 4 + ["full_attention"] + ["mamba"] * 3
    assert [spec.is_moe_layer(i) for i in range(4)] == [False, True, False, True]


def test_t5_is_encoder_decoder_with_relative_bias():
    """T5: 12 encoder + 12 decoder blocks; the relative bias (32 buckets x 12 heads) sits in the
    first block of each stack; the decoder blocks carry cross-attention."""
    c = counts("t5-base")
    assert len(c.per_layer) == 24
    assert c.breakdown["layers/attention/relative_bias"] == 2 * 32 * 12
    assert c.breakdown["layers/cross_attention"] == 12 * 4 * 768 * 768


def test_bert_heads_follow_architectures():
    """BertForMaskedLM drops the pooler and adds the MLM transform and the vocab bias; BertModel
    keeps the pooler (HF BertModel(add_pooling_layer=...))."""
    masked = counts("bert-base-uncased")
    bare = counts("bert-base-uncased", architectures=["BertModel"])
    assert bare.total == 109_482_240  # HF BertModel incl. pooler, google-bert/bert-base-uncased
    pooler, transform, bias = 768 * 768 + 768, 768 * 768 + 768 + 2 * 768, 30522
    assert masked.total == bare.total - pooler + transform + bias


def test_sequence_classification_head_replaces_lm_head():
    """LlamaForSequenceClassification: no lm_head, a bias-free score Linear(h, num_labels)."""
    head = counts("llama-3-8b", architectures=["LlamaForSequenceClassification"], num_labels=3)
    lm = counts("llama-3-8b")
    assert lm.total - head.total == 128256 * 4096 - 3 * 4096


def test_unknown_model_type_points_at_the_list():
    """An unknown model_type is a short one-line SpecError that says where the supported ones are
    listed (not all of them inline), and `modelplan presets` does list them."""
    with pytest.raises(SpecError, match=r"model_type: unsupported 'no_such_model' \(\d+ model_types are modelled; "
                                        r"`modelplan presets` lists them\)$") as exc:
        from_hf_config({"model_type": "no_such_model"}, "config.json")
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 200


@pytest.mark.parametrize("typed, meant", [("gpt-neox", "gpt_neox"), ("Qwen2", "qwen2"), ("xlm_roberta", "xlm-roberta")])
def test_misspelt_model_type_suggests_the_modelled_one(typed, meant):
    """A model_type that differs from a modelled one only in case, '-' or '_' (transformers spells
    gpt_neox with '_' and xlm-roberta with '-') names the one meant."""
    with pytest.raises(SpecError, match=rf"unsupported '{typed}'; did you mean '{meant}'\?"):
        from_hf_config({"model_type": typed}, "config.json")


def test_a_different_model_is_not_suggested():
    """reformer is not roformer: no suggestion for a type that merely looks alike."""
    with pytest.raises(SpecError) as exc:
        from_hf_config({"model_type": "no_such_former"}, "config.json")
    assert "did you mean" not in str(exc.value)


def test_missing_model_type_says_what_is_missing():
    """A config.json without model_type is told which key is missing, in one line."""
    data = config("llama-3-8b")
    del data["model_type"]
    with pytest.raises(SpecError, match=r"config.json: model_type: missing") as exc:
        from_hf_config(data, "config.json")
    assert "\n" not in str(exc.value)


def test_unknown_head_is_named():
    """An architectures entry with an unknown head class is a one-line error naming it."""
    with pytest.raises(SpecError, match=r"architectures: unsupported head 'LlamaForImageMagic'"):
        from_hf_config(config("llama-3-8b", architectures=["LlamaForImageMagic"]), "config.json")


def test_missing_size_key_is_named():
    """A config without hidden_size names the key and the model_type."""
    data = config("llama-2-7b")
    del data["hidden_size"]
    with pytest.raises(SpecError, match=r"config.json: hidden_size: missing \(needed for model_type 'llama'\)"):
        from_hf_config(data, "config.json")


def test_invalid_values_are_reported_by_field():
    """A negative size reaches the spec validator and comes back naming the field."""
    with pytest.raises(SpecError, match=r"layers: Input should be greater than 0"):
        from_hf_config(config("llama-2-7b", num_hidden_layers=-1), "config.json")


@pytest.mark.parametrize(
    ("name", "key", "value", "message"),
    [
        ("gpt2", "resid_pdrop", "abc", "resid_pdrop: expected a number, got 'abc' (str)"),
        ("llama-3-8b", "max_position_embeddings", "2048", "max_position_embeddings: expected an integer, got '2048' (str)"),
        ("qwen1.5-moe-a2.7b", "num_experts", "60", "num_experts: expected an integer, got '60' (str)"),
        ("qwen1.5-moe-a2.7b", "mlp_only_layers", 5, "mlp_only_layers: expected a list of integers, got 5 (int)"),
        ("opt-125m", "dropout", json.loads("1e400"), "dropout: expected a finite number, got inf"),
        ("llama-3-8b", "tie_word_embeddings", "yes", "tie_word_embeddings: expected true or false, got 'yes' (str)"),
        ("gemma-3-27b-it", "text_config", {"hidden_size": 5376.5}, "text_config.hidden_size: expected an integer, got 5376.5"),
        ("gemma-2-9b", "query_pre_attn_scalar", 0, "query_pre_attn_scalar: must be > 0, got 0"),
        ("llama-3-8b", "num_hidden_layers", True, "num_hidden_layers: expected an integer, got True (bool)"),
    ],
)
def test_wrong_value_types_are_one_line_errors(name, key, value, message):
    """A value of the wrong type is a one-line SpecError naming the key, before any arithmetic."""
    with pytest.raises(SpecError) as exc:
        from_hf_config(config(name, **{key: value}), "config.json")
    assert f"config.json: {message}" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_mla_needs_no_head_division():
    """DeepSeek-V2-Lite has no q LoRA (q_lora_rank null -> a plain q_proj)."""
    spec = from_hf_config(config("deepseek-v2-lite"))
    assert spec.mla is not None and spec.mla.q_lora_rank is None


# Published configs plus variants that switch the options the mappers read, each compared with
# sum(p.numel()) of the HF module built from the same dict (small layer counts keep it fast).
VARIANTS = [
    ("gpt2", {"n_inner": 1000, "tie_word_embeddings": False}),
    ("gpt2", {"architectures": ["GPT2ForSequenceClassification"]}),
    ("llama-3-8b", {"num_hidden_layers": 2, "attention_bias": True, "mlp_bias": True}),
    ("llama-3-8b", {"num_hidden_layers": 2, "head_dim": 96, "tie_word_embeddings": True}),
    ("llama-3-8b", {"num_hidden_layers": 2, "architectures": ["LlamaForSequenceClassification"]}),
    ("mistral-7b-v0.1", {"num_hidden_layers": 2, "sliding_window": None}),
    ("mixtral-8x7b-v0.1", {"num_hidden_layers": 2, "num_local_experts": 4, "sliding_window": 1024}),
    ("qwen1.5-moe-a2.7b", {"num_hidden_layers": 4, "decoder_sparse_step": 2}),
    ("qwen1.5-moe-a2.7b", {"num_hidden_layers": 4, "mlp_only_layers": [0, 1]}),
    ("qwen1.5-moe-a2.7b", {"num_hidden_layers": 5, "mlp_only_layers": [3]}),
    ("pythia-160m", {"use_parallel_residual": False, "attention_bias": False, "tie_word_embeddings": True}),
    ("santacoder", {"n_layer": 2, "multi_query": False}),
    ("falcon-7b", {"num_hidden_layers": 2, "parallel_attn": False, "bias": True, "alibi": True}),
    ("falcon-40b", {"num_hidden_layers": 2, "num_ln_in_parallel_attn": 1, "ffn_hidden_size": 1000}),
    ("opt-125m", {"enable_bias": False, "do_layer_norm_before": False}),
    ("phi-2", {"num_hidden_layers": 2, "qk_layernorm": True, "num_key_value_heads": 8}),
    ("qwen3-8b", {"num_hidden_layers": 2, "attention_bias": True, "use_sliding_window": True, "max_window_layers": 1}),
    ("qwen3-8b", {"num_hidden_layers": 2, "architectures": ["Qwen3ForTokenClassification"], "num_labels": 5}),
    ("qwen3-8b", {"num_hidden_layers": 2, "architectures": ["Qwen3ForQuestionAnswering"]}),
    ("qwen3-8b", {"num_hidden_layers": 2, "architectures": ["Qwen3Model"]}),
    ("qwen3-30b-a3b", {"num_hidden_layers": 6, "mlp_only_layers": [1, 4]}),
    ("qwen3-30b-a3b", {"num_hidden_layers": 6, "decoder_sparse_step": 2}),
    ("gemma-2-9b", {"num_hidden_layers": 3, "tie_word_embeddings": False}),
    ("gemma-3-1b-it", {"num_hidden_layers": 7, "sliding_window_pattern": 3}),
    ("gemma-3-27b-it", {"vision_config": {"hidden_size": 64, "image_size": 56, "intermediate_size": 96,
                                          "model_type": "siglip_vision_model", "num_attention_heads": 4,
                                          "num_hidden_layers": 2, "patch_size": 14, "vision_use_head": True}}),
    ("phi-3-mini-4k-instruct", {"num_hidden_layers": 2, "num_key_value_heads": 8, "partial_rotary_factor": 0.5}),
    ("phi-3.5-moe-instruct", {"num_hidden_layers": 2, "attention_bias": False, "lm_head_bias": False}),
    ("deepseek-v2-lite", {"num_hidden_layers": 3, "q_lora_rank": 768, "mlp_bias": True}),
    ("olmo-7b-hf", {"num_hidden_layers": 2, "attention_bias": True, "num_key_value_heads": 8, "tie_word_embeddings": True}),
    ("olmo-2-0325-32b", {"num_hidden_layers": 2, "attention_bias": True}),
    ("olmoe-1b-7b-0924", {"num_hidden_layers": 2, "num_key_value_heads": 4}),
    ("starcoder2-15b", {"num_hidden_layers": 2, "use_bias": False, "tie_word_embeddings": True}),
    ("gpt-oss-20b", {"num_hidden_layers": 3, "attention_bias": False,
                     "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]}),
    ("granite-3.1-8b-base", {"num_hidden_layers": 2, "attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False}),
    ("granite-3.0-3b-a800m-base", {"num_hidden_layers": 2, "attention_bias": True}),
    ("c4ai-command-r-plus", {"num_hidden_layers": 2, "use_qk_norm": False, "attention_bias": True, "tie_word_embeddings": False}),
    ("mistral-small-3.1-24b-instruct-2503", {"multimodal_projector_bias": True, "spatial_merge_size": 3, "tie_word_embeddings": False}),
    ("llama-4-scout-17b-16e-text", {"num_hidden_layers": 4, "moe_layers": [0, 3], "attention_bias": True}),
    ("llama-4-maverick-17b-128e-text", {"num_hidden_layers": 4, "interleave_moe_layer_step": 3}),
    ("glm-4-32b-0414", {"num_hidden_layers": 2, "attention_bias": False}),
    ("t5-base", {"num_layers": 3, "num_decoder_layers": 2, "feed_forward_proj": "gated-gelu"}),
    ("t5-base", {"num_layers": 2, "architectures": ["T5Model"]}),
    ("t5-base", {"num_layers": 2, "architectures": ["T5EncoderModel"]}),
    ("flan-t5-xl", {"num_layers": 2, "num_decoder_layers": 3, "relative_attention_num_buckets": 40}),
    ("mamba-130m-hf", {"num_hidden_layers": 2, "use_bias": True, "use_conv_bias": False, "time_step_rank": "auto",
                       "expand": 3, "tie_word_embeddings": False}),
    ("jamba-v0.1", {"num_hidden_layers": 6, "attn_layer_period": 3, "attn_layer_offset": 1, "expert_layer_period": 3,
                    "expert_layer_offset": 2, "mamba_proj_bias": True, "mamba_dt_rank": "auto"}),
    ("jamba-v0.1", {"num_hidden_layers": 4, "num_experts": 1}),
    ("bert-base-uncased", {"architectures": ["BertModel"]}),
    ("bert-base-uncased", {"architectures": ["BertForSequenceClassification"], "id2label": {"0": "a", "1": "b", "2": "c"}}),
    ("bert-base-uncased", {"architectures": ["BertForTokenClassification"], "num_labels": 9}),
    ("bert-base-uncased", {"architectures": ["BertForQuestionAnswering"]}),
    ("bert-base-uncased", {"architectures": ["BertForMultipleChoice"]}),
    ("bert-base-uncased", {"architectures": ["BertForNextSentencePrediction"]}),
    ("bert-base-uncased", {"architectures": ["BertForPreTraining"]}),
    ("bert-base-uncased", {"architectures": ["BertLMHeadModel"]}),
]

# The DeepSeek-V3 fixtures declare MTP modules, which transformers builds as a separate MtpModel.
MTP = [("deepseek-v3", {}), ("deepseek-v3", {"num_hidden_layers": 5, "first_k_dense_replace": 2,
                                              "attention_bias": True, "n_shared_experts": 2}),
       ("deepseek-v3", {"num_hidden_layers": 4, "q_lora_rank": None, "n_routed_experts": 16,
                        "num_nextn_predict_layers": 2})]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("name", fixture_names())
def test_published_configs_equal_transformers_modules(name):
    """Every shipped config.json, at its published size, counts exactly to sum(p.numel()) of the
    transformers class its `architectures` names, built on the meta device."""
    data = config(name)
    assert count(data) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("name", "overrides"), VARIANTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(VARIANTS)])
def test_variants_equal_transformers_modules(name, overrides):
    """Variants that switch each option a mapper reads also count exactly."""
    data = config(name, **overrides)
    assert count(data) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("name", "overrides"), MTP, ids=[f"{n}-{i}" for i, (n, _) in enumerate(MTP)])
def test_mtp_modules_equal_transformers_mtp_model(name, overrides):
    """DeepSeek-V3: the total equals DeepseekV3ForCausalLM (which builds no MTP module) and the
    not-built `mtp` equals what transformers' MtpModel adds (enorm, hnorm, eh_proj, an MoE block,
    post norm per module); trained (mtp_layers), the `mtp` group is that size too."""
    data = config(name, **overrides)
    spec = from_hf_config(data)
    trained = count_params(spec.model_copy(update={"mtp_layers": spec.mtp_not_built, "mtp_not_built": 0}))
    assert (count_params(spec).total, not_built_params(spec)["mtp"]) == (hf_numel(data), hf_mtp_numel(data))
    assert trained.breakdown["mtp"] == hf_mtp_numel(data)


def test_every_mapper_has_a_fixture_or_variant():
    """Each supported model_type is exercised against transformers above (mt5 shares T5's)."""
    tested = {config(name)["model_type"] for name in fixture_names()}
    tested |= {config(name, **o).get("model_type") for name, o in VARIANTS}
    # the round-2 types: tests/test_hf_new.py (variants, Apertus' and the Qwen-VL text checks)
    tested |= {variant(name, o)["model_type"] for name, o in NEW_VARIANTS}
    tested |= {"apertus", "qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text"}
    tested |= {data["model_type"] for data in VISION_VARIANTS}  # tests/test_hf_vision.py
    tested |= {"qwen3_vl_moe_text", "glm4v_text", "glm4v_moe_text"}  # their composites' text_configs
    tested |= {data["model_type"] for data in HYBRID_VARIANTS}  # tests/test_hf_hybrid.py
    tested |= {"zamba", "zamba2", "gemma3n_text", "longcat_flash", "xlstm", "roberta", "xlm-roberta", "camembert",
               "data2vec-text", "roberta-prelayernorm", "xlm-roberta-xl", "sarvam_mla", "mistral4", "glm_moe_dsa"}  # tests/test_hf_n17_*.py (on CPU)
    tested |= {"ernie", "megatron-bert", "openai-gpt", "xglm", "ctrl", "llava_next_video", "llava_onevision",
               "vipllava"}  # tests/test_hf_n17classic.py (on CPU)
    tested |= {"hy_v3", "cohere2_moe", "minimax_m3_vl_text", "nanochat", "olmo_hybrid"}  # tests/test_hf_n17new.py
    tested |= {"electra", "roformer", "rembert", "roc_bert", "xmod", "bert-generation", "biogpt", "gpt_neox_japanese",
               "bitnet", "modernbert-decoder", "axk1", "big_bird", "xlm",
               "cpmant", "xlnet"}  # tests/test_hf_n18small.py
    tested |= {"bart", "mbart", "marian", "pegasus", "blenderbot", "blenderbot-small", "plbart", "mvp",
               "whisper", "trocr", "t5gemma2"}  # tests/test_hf_n18encdec.py (on CPU)

    tested |= {"lfm3", "laguna", "diffllama", "mimo_v2_flash", "jetmoe", "doge", "step3p5", "gemma4_text",
               "gemma4_unified_text"}  # tests/test_hf_n18attn.py
    tested |= {data["model_type"] for data in N18VLM_CASES}  # tests/test_hf_n18vlm.py
    tested |= {"hyperclovax", "kolibri1", "flint", "lara_mini", "aria_text", "emu3", "cohere_compass_text",
               "apertus1p5_text"}  # tests/test_hf_n18causal.py
    tested |= {"mllama"}  # tests/test_hf_n18mllama.py
    tested |= {"beam"}  # tests/test_hf_n18beam.py
    tested |= set(ENCODER_MODEL_MAPPERS)  # tests/test_hf_encoder_models.py
    tested |= set(IMAGE_CLASSIFIER_MAPPERS)  # tests/test_hf_convnets.py, test_hf_swin_networks.py, test_hf_imagegpt.py
    tested |= {data["model_type"] for data in TOWER_CASES}  # tests/test_hf_vlm_towers.py
    tested |= {"hy_v4", "hy_v4_vl_text", "deepseek_v4", "glm5_next", "glm5_next_text", "qwen4_exp", "qwen4_exp_text",  # test_hf_hyperconn.py
               "dots3_note_text", "mistral_large4", "mistral_large4_text",  # test_hf_mla_layers.py
               "bailing_hybrid", "zaya"}  # test_hf_linear_mla.py, test_hf_cca.py
    tested |= {"florence2", "blip", "git", "vision-encoder-decoder", "pix2struct", "kosmos-2", "kosmos-2.5", "got_ocr2",
               "pp_chart2table", "pp_formulanet", "unlimited_ocr", "deepseek_ocr2"}  # tests/test_hf_vlm_encdec.py
    tested |= {"bigbird_pegasus"}  # tests/test_hf_encdec_more.py
    tested |= {"funnel", "prophetnet"}  # tests/test_hf_funnel.py, test_hf_prophetnet.py (canine: ENCODERS_MORE_MAPPERS)
    tested |= {"gemma3n", "encoder-decoder", "fsmt", "pegasus_x", "fast_vlm"}  # test_hf_gemma3n_mm, _text_encdec, _fsmt, _pegasus_x, _fast_vlm
    tested |= {"inkling_text", "inkling2_text", "inkling2_loop_text", "inkling2", "inkling2_loop",  # test_hf_inkling.py
               "musicgen", "musicgen_decoder", "musicgen_melody", "musicgen_melody_decoder", "moshi",  # test_hf_audio_lm.py
               "glmga", "cosmos3_omni", "cohere_compass", "cosmos3_edge", "cosmos3_edge_text",  # test_hf_reused / cosmos3
               "muse_glimmer", "muse_glimmer_text", "nemotron_h_omni"}  # test_hf_muse.py, test_hf_nemotron_omni.py
    tested |= {"distilbert", "mpnet", "ibert", "deberta", "deberta-v2", "modernbert", "albert",
               "flaubert", "esm", "eurobert", "nomic_bert"}  # tests/test_hf_encoders.py
    tested |= {"umt5", "longt5", "switch_transformers", "led", "t5gemma", "m2m_100", "longformer",
               "nllb-moe"}  # test_hf_seq2seq_more.py
    tested |= {data["model_type"] for data in COMPOSITES_MORE_CASES}  # tests/test_hf_composites_more.py
    from modelplan.specs.hf_encoders_more import ENCODERS_MORE_MAPPERS

    tested |= set(ENCODERS_MORE_MAPPERS)  # tests/test_hf_encoders_more.py
    from modelplan.specs.hf_audio_composites import AUDIO_COMPOSITE_MAPPERS
    from modelplan.specs.hf_speech import SPEECH_MAPPERS  # test_hf_conformer / _sew / _speech / _omniasr / ...
    tested |= set(SPEECH_MAPPERS) | set(AUDIO_COMPOSITE_MAPPERS)  # test_hf_audio_composites / _granite_speech
    assert tested | {"mt5"} == set(MAPPERS) | {"gemma3_text"}


def test_absurd_depth_is_refused_before_any_loop():
    """num_hidden_layers 10**12 is a one-line error, not a hang building per-block lists."""
    with pytest.raises(SpecError, match=r"num_hidden_layers: 1000000000000 exceeds 100,000 blocks"):
        from_hf_config(config("gemma-3-1b-it", num_hidden_layers=10**12), "config.json")


def test_cli_config_without_model_type_names_the_missing_key(tmp_path):
    """`modelplan count` on a config.json without model_type: one line naming it, exit 2."""
    from typer.testing import CliRunner

    from modelplan.cli.app import app

    data = config("llama-3-8b")
    del data["model_type"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["count", str(path)])
    assert result.exit_code == 2, result.output
    assert "config.json: model_type: missing" in result.output and result.output.count("\n") == 1


def test_jamba_attention_period_longer_than_the_model():
    """JambaConfig.layers_block_type puts attention where i % attn_layer_period == offset over the
    model's blocks, so a period longer than the model is legal (one attention block, at 4, here);
    the mapper built its pattern over `period` entries, and 10**30 of them never finished. The
    count equals transformers' own sum(p.numel()) on the meta device."""
    data = config("jamba-v0.1", attn_layer_period=10**30)
    spec = from_hf_config(data)
    assert count_params(spec).total == hf_numel(data)
    assert count_params(spec).total == hf_numel(config("jamba-v0.1", attn_layer_period=40))


@pytest.mark.parametrize("key", ["n_head", "n_embd"])
def test_gptj_zero_head_count_or_width_is_a_one_line_error(key):
    """GPT-J's mapper divides n_embd by n_head (head_dim for rotary_dim): 0 was a
    ZeroDivisionError (exit 70, cli_fuzz), now the key is named."""
    with pytest.raises(SpecError, match=f"{key}: must be > 0"):
        from_hf_config(config("gpt-j-6b", **{key: 0}))
