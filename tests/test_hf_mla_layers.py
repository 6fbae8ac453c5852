"""The model_type of modelplan/specs/hf_mla_layers.py: dots3_note_text (MLA sizes by layer type, the
indexer on the indexed blocks only, a per-head gate and a rope-key norm). Expected totals are
sum(p.numel()) of transformers 5.24's Dots3NoteForCausalLM on the meta device, for small configs
and the config class's defaults; per-block sizes and FLOPs against hand-worked formulas from the
modeling file's shapes; `count` / `plan --gpus 8` run and `verify` refuses the new features."""

from __future__ import annotations

import pytest

from _hf_n17_checks import (assert_count_plan_verify, assert_dense_blocks_shard, assert_kernels_match_counted_gemms,
                            assert_one_line_error, class_defaults)
from _hf_reference import hf_numel
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import block_of, block_params
from modelplan.count.params import count_params
from modelplan.plan.shard import unit_shards
from modelplan.specs.hf import UNMODELLED, from_hf_config
from modelplan.specs.plan import Plan

_DOTS = {"model_type": "dots3_note_text", "num_hidden_layers": 6, "hidden_size": 128, "intermediate_size": 256,
         "moe_intermediate_size": 32, "num_attention_heads": 8, "num_key_value_heads": 8, "q_lora_rank": 64,
         "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 24, "head_dim": 24,
         "n_routed_experts": 8, "num_experts_per_tok": 2, "index_n_heads": 2, "index_head_dim": 16, "index_topk": 16,
         "sliding_window": 32, "vocab_size": 1000, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
         "shared_experts_intermediate_size": 48}
_SWA = {"swa_num_attention_heads": 4, "swa_num_key_value_heads": 4, "swa_q_lora_rank": 48, "swa_kv_lora_rank": 40,
        "swa_head_dim": 32, "swa_qk_nope_head_dim": 24, "swa_v_head_dim": 16}

CASES = {
    # default layer_types at 6 blocks: indexed, indexed, sliding x 3, indexed; the legacy swa_* sizes
    "swa-keys": {**_DOTS, **_SWA},
    # per_layer_config as transformers writes it (zero-padded block keys, only what differs), 2 shared experts
    "per-layer": {**_DOTS, "layer_types": ["indexed_attention", "sliding_attention"] * 3, "n_shared_experts": 2,
                  "per_layer_config": {f"0{i}": {"num_attention_heads": 4, "num_key_value_heads": 4,
                                                 "kv_lora_rank": 16} for i in (1, 3, 5)}},
    # no DSA: full blocks without an indexer, two dense blocks
    "no-dsa": {**_DOTS, **_SWA, "use_dsa": False, "first_k_dense_replace": 2},
}


@pytest.mark.torch
@pytest.mark.parametrize("name", [*CASES, "class-defaults"])
def test_total_equals_transformers(name):
    """Total = Dots3NoteForCausalLM's sum(p.numel()) on the meta device (the class defaults: dots3-note-prev)."""
    data = class_defaults("dots3_note_text") if name == "class-defaults" else CASES[name]
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_sliding_and_indexed_blocks_by_hand():
    """swa-keys, h 128: an indexed block (8 heads, r 64, d_c 32, nope 16, rope 8, v 24) holds q_a 128 x 64,
    q_a_norm 64, q_b 64 x 192, kv_a 128 x 40, kv_a_norm 32, kv_b 32 x 320, o_proj 192 x 128, the rope-key
    norm 8, g_proj 128 x 8 and the indexer; a sliding block (4 heads, r 48, d_c 40, nope 24, rope 8,
    v 16) q_a 128 x 48, 48, q_b 48 x 128, kv_a 128 x 48, 40, kv_b 40 x 160, o_proj 64 x 128, 8, g_proj
    128 x 4 and no indexer (Dots3NoteTextAttention)."""
    spec = from_hf_config(CASES["swa-keys"])
    indexed, sliding = block_params(spec, block_of(spec, 1)), block_params(spec, block_of(spec, 2))
    attention = lambda b: sum(v for k, v in b.items() if k.startswith("attention/") and k != "attention/indexer")
    assert attention(indexed) == 128 * 64 + 64 + 64 * 192 + 128 * 40 + 32 + 32 * 320 + 192 * 128 + 8 + 128 * 8
    assert attention(sliding) == 128 * 48 + 48 + 48 * 128 + 128 * 48 + 40 + 40 * 160 + 64 * 128 + 8 + 128 * 4
    assert "attention/indexer" in indexed and "attention/indexer" not in sliding


def test_sliding_blocks_read_their_window():
    """s = t = 128: a sliding block's 4 heads score its 32-key window over qk 32 and v 16 dims; an
    indexed block's 8 heads its top-16 keys over qk 24 and v 24 dims."""
    spec, t = from_hf_config(CASES["swa-keys"]), 128
    sliding, indexed = (block_forward_flops(spec, block_of(spec, i), t, t) for i in (2, 1))
    assert sliding["attention/score"] == 2 * t * 32 * 4 * (32 + 16)
    assert indexed["attention/score"] == 2 * t * 16 * 8 * (24 + 24)
    assert sliding["attention/head_gate"] == 2 * t * 128 * 4


@pytest.mark.parametrize("name", list(CASES))
def test_kernels_match_counted_gemms(name):
    """plan/kernels.py's weight GEMMs of each block (tp 1) add up to count's forward FLOPs but the
    attention scores / context (and the indexer's) and, in MoE blocks, the MLP."""
    assert_kernels_match_counted_gemms(from_hf_config(CASES[name]), 64)


@pytest.mark.parametrize("name", list(CASES))
def test_shards_hold_the_counted_model(name):
    """Plan() (one rank): plan/shard.py's units sum to count's total; the dense block at tp 2 (SP)."""
    spec = from_hf_config(CASES[name])
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total
    assert_dense_blocks_shard(spec)


def test_cli_count_plan_and_verify_refusal(tmp_path):
    """count and plan --gpus 8 run; verify refuses the new features by name in one line."""
    assert_count_plan_verify(tmp_path, CASES["swa-keys"], "mla.rope_key_norm", "head_gate", "attention_by_type")


@pytest.mark.parametrize(("data", "field"), [
    ({**_DOTS, "layer_types": ["indexed_attention", "full_attention"] * 3}, "layer_types"),
    ({**_DOTS, "per_layer_config": {"2": {"sliding_window": 64}}}, "per_layer_config.2"),
    ({**_DOTS, "per_layer_config": {"2": {"kv_lora_rank": 16}, "3": {"kv_lora_rank": 24}}}, "per_layer_config"),
    ({**_DOTS, "per_layer_config": {"9": {"kv_lora_rank": 16}}}, "per_layer_config"),
    ({**_DOTS, "n_shared_experts": 0}, "n_shared_experts"),
])
def test_bad_options_refused_in_one_line(data, field):
    """An option the spec cannot state (or a malformed one): one line naming the field."""
    assert_one_line_error(data, field)


def test_composite_points_to_its_text_model():
    """dots3_note is refused for its towers, naming the model_type that counts its language model;
    dots3_note_text is no longer unmodelled."""
    assert "dots3_note_text" not in UNMODELLED
    assert_one_line_error({"model_type": "dots3_note"}, "vision and audio towers.*model_type 'dots3_note_text'")


_ML4 = {"model_type": "mistral_large4_text", "num_hidden_layers": 4, "hidden_size": 128, "intermediate_size": 256,
        "moe_intermediate_size": 32, "num_attention_heads": 4, "kv_lora_rank": 32, "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8, "v_head_dim": 24, "n_routed_experts": 8, "num_experts_per_tok": 2, "index_n_heads": 2,
        "index_head_dim": 16, "index_topk": 16, "vocab_size": 1000, "pad_token_id": 0}
ML4 = {
    # default no_rope_layers at 4 blocks: rope, rope, rope, NoPE; block 2 reads block 1's latent
    "mistral_large4_text": {**_ML4, "kv_source_layers": [0, 1, 1, 3]},
    # shared indexers (index_topk_pattern), two dense blocks, no KV sharing
    "mistral_large4_text-shared": {**_ML4, "index_topk_pattern": "FSFS", "first_k_dense_replace": 2},
}


def _ml4_reference(data: dict) -> int:
    """transformers has no mistral_large4_text causal-LM class: MistralLarge4TextModel's sum(p.numel())
    plus the untied lm_head Linear(h, vocab, bias=False) MistralLarge4ForConditionalGeneration puts on it."""
    import torch
    from transformers.models.mistral_large4.modeling_mistral_large4 import MistralLarge4TextModel

    from _hf_reference import hf_config

    cfg = hf_config(data)
    with torch.device("meta"):
        model = MistralLarge4TextModel(cfg)
    return sum(p.numel() for p in model.parameters()) + cfg.vocab_size * cfg.hidden_size


@pytest.mark.torch
@pytest.mark.parametrize("name", [*ML4, "class-defaults"])
def test_mistral_large4_text_equals_transformers(name):
    """Mistral Large 4's language model = transformers' own (the class defaults: 1.05 T parameters)."""
    data = class_defaults("mistral_large4_text") if name == "class-defaults" else ML4[name]
    assert count_params(from_hf_config(data)).total == _ml4_reference(data)


@pytest.mark.torch
def test_mistral_large4_composite_equals_transformers():
    """MistralLarge4ForConditionalGeneration (class defaults: Mistral-Large-4-1T-A52B) = transformers'
    own: its text model and Mistral 3's Pixtral tower and projector."""
    data = {**class_defaults("mistral_large4"), "architectures": ["MistralLarge4ForConditionalGeneration"]}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_mistral_large4_blocks_by_hand():
    """h 128, 4 heads, d_c 32, nope 16, rope 8, v 24: a rope block holds q_proj 128 x 96, kv_a 128 x 40,
    kv_a_norm 32, kv_b 32 x 160, o_proj 96 x 128, softmax scales 2 x 4 and the indexer (q_input_norm
    2 x 128, wq_b 128 x 32, wk 128 x 16, k_norm 2 x 16, weights_proj 128 x 2, its scales 2 x 2); block 2
    (reading block 1's latent) no kv_a / kv_a_norm; the NoPE block 3 kv_a 128 x 32 and kv_b 32 x 192
    (MistralLarge4TextAttention, MistralLarge4TextIndexer); the model's rotary alpha 8 / 2."""
    spec = from_hf_config(ML4["mistral_large4_text"])
    rope, shared, nope = (block_params(spec, block_of(spec, i)) for i in (0, 2, 3))
    indexer = 2 * 128 + 128 * 32 + 2 * 2 + 128 * 16 + 2 * 16 + 128 * 2
    assert (rope["attention/kv/down"], rope["attention/softmax_scales"], rope["attention/indexer"]) == (128 * 40, 8, indexer)
    assert (shared["attention/kv/down"], shared["attention/kv/norm"]) == (0, 0)
    assert (nope["attention/kv/down"], nope["attention/kv/up"]) == (128 * 32, 32 * 192)
    assert count_params(spec).breakdown["embedding/rotary_alpha"] == 4


@pytest.mark.parametrize("name", list(ML4))
def test_mistral_large4_kernels_and_shards(name):
    """Weight GEMMs of each block (tp 1) = count's forward FLOPs but the scores and MoE MLPs; one rank
    holds the counted model; the dense block at tp 2 (SP)."""
    spec = from_hf_config(ML4[name])
    assert_kernels_match_counted_gemms(spec, 64)
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total
    assert_dense_blocks_shard(spec)


def test_mistral_large4_cli(tmp_path):
    """count and plan --gpus 8 run; verify refuses the new features; bad schedules in one line."""
    assert_count_plan_verify(tmp_path, ML4["mistral_large4_text"], "mla.kv_source", "mla.nope_layers",
                             "mla.softmax_scales")
    assert_one_line_error({**_ML4, "kv_source_layers": [0, 0, 1, 3]}, "kv_source_layers")
    assert_one_line_error({**_ML4, "kv_source_layers": [0, 1, 2, 2]}, "kv_source_layers")
    assert_one_line_error({**_ML4, "index_topk_pattern": "SFFF"}, "indexer_types")
