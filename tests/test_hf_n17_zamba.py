"""Zamba / Zamba2 (modelplan/specs/hf_zamba.py, specs/shared_block.py, count/shared_block.py): a
shared attention + MLP block whose weights are counted once per copy and whose FLOPs, activations
and K/V cache are counted at every use. Parameter counts equal transformers 5.24's own modules
built on CPU from small configs (and on the meta device for the class defaults, Zyphra/Zamba-7B-v1
and Zyphra/Zamba2-2.7B); FLOPs of one hybrid block by hand; `count` / `plan` run and `verify`
refuses the shared block in one line."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan_verify, assert_one_line_error, class_defaults
from _hf_reference import hf_model, hf_numel
from modelplan.count.blocks import block_of
from modelplan.count.flops import count_flops, layer_forward_flops
from modelplan.count.memory import activation_bytes_per_layer, count_memory, kv_cache_bytes
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

ZAMBA = dict(model_type="zamba", hidden_size=32, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=48, vocab_size=101, n_mamba_heads=2, attn_layer_period=3, attn_layer_offset=1,
             mamba_d_state=4, mamba_dt_rank=3)
ZAMBA2 = dict(model_type="zamba2", hidden_size=32, num_hidden_layers=7, num_attention_heads=4,
              intermediate_size=48, vocab_size=101, n_mamba_heads=4, mamba_d_state=8, num_mem_blocks=2,
              adapter_rank=4, use_shared_attention_adapter=True,
              layers_block_type=["mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba", "hybrid"])
CASES = [
    ZAMBA,
    {**ZAMBA, "tie_word_embeddings": False, "mamba_proj_bias": True, "mamba_conv_bias": False, "n_mamba_heads": 4},
    {**ZAMBA, "layers_block_type": ["mamba"] * 8},  # no hybrid layer: no shared block
    ZAMBA2,
    {**ZAMBA2, "use_shared_attention_adapter": False, "add_bias_linear": True, "mamba_ngroups": 2},
    {**ZAMBA2, "num_mem_blocks": 6},  # more copies than uses: transformers builds one per use
    {**ZAMBA2, "num_key_value_heads": 2, "use_shared_attention_adapter": False, "tie_word_embeddings": False},
    {**ZAMBA2, "tie_word_embeddings": False},  # untied: a copy per use, its class's adapters each
    {**ZAMBA2, "tie_word_embeddings": False, "num_mem_blocks": 3},
]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", CASES, ids=[f"{d['model_type']}-{i}" for i, d in enumerate(CASES)])
def test_total_equals_transformers_on_cpu(data):
    """sum(p.numel()) of transformers' ZambaForCausalLM / Zamba2ForCausalLM built on CPU (tied
    shared blocks yielded once) equals modelplan's total."""
    model = hf_model(data, device="cpu")
    assert count_params(from_hf_config(data)).total == sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["zamba", "zamba2"])
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults (Zamba-7B-v1, Zamba2-2.7B) on the meta device."""
    data = class_defaults(model_type)
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_shared_weights_counted_once_per_copy_by_hand():
    """ZAMBA2 (h 32, w 64, 4 heads x 16, f 48, r 4): one copy is q/k/v 64 x 192 + o 64 x 32 +
    gate_up 32 x 96 + down 48 x 32 + norms 64 + 32 = 12,288 + 2,048 + 3,072 + 1,536 + 96 = 19,040;
    two copies 38,080, with each of the 4 uses' adapters 4 x (32 + 96) + 3 x 2 x 64 x 4 = 512 +
    1,536 = 2,048 held once by its copy. Each use adds Linear(32, 32) = 1,024 to its block.
    Untied (tie_word_embeddings false) each use builds its own copy with the adapters of its class
    (uses 0, 2 and 1, 3: two each): 4 x 19,040 + 4 x 2 x 2,048."""
    b = count_params(from_hf_config(ZAMBA2)).breakdown
    assert b["shared_blocks"] - b["shared_blocks/adapters"] == 2 * 19_040 and b["shared_blocks/adapters"] == 4 * 2_048
    assert b["layers/shared_block/linear"] == 4 * 1_024
    untied = count_params(from_hf_config({**ZAMBA2, "tie_word_embeddings": False})).breakdown
    assert untied["shared_blocks"] == 4 * 19_040 + 4 * 2 * 2_048


def test_hybrid_block_flops_by_hand():
    """ZAMBA2 block 1 (hybrid), 10 tokens of one sequence: the shared block adds q/k/v
    2 x 10 x 64 x 192 = 245,760, scores 4 x 10 x 10 x 64 = 25,600, o 2 x 10 x 64 x 32 = 40,960,
    gate_up 2 x 10 x 32 x 96 = 61,440, down 30,720, adapters 2 x 10 x 2,048 = 40,960, linear
    2 x 10 x 32 x 32 = 20,480 to its Mamba-2 mixer's; block 0 (Mamba-2 only) has none."""
    spec = from_hf_config(ZAMBA2)
    hybrid, plain = layer_forward_flops(spec, 1, 10, 10), layer_forward_flops(spec, 0, 10, 10)
    extra = {k: v for k, v in hybrid.items() if k.startswith("shared_block/")}
    assert extra == {"shared_block/attention/qkv": 245_760, "shared_block/attention/score": 25_600,
                     "shared_block/attention/out": 40_960, "shared_block/mlp/in": 61_440,
                     "shared_block/mlp/out": 30_720, "shared_block/adapters": 40_960, "shared_block/linear": 20_480}
    assert {k: v for k, v in hybrid.items() if not k.startswith("shared_block/")} == plain


def test_selective_recompute_redoes_the_shared_scores():
    """Selective recompute redoes every use's QK^T and AV: 4 uses x 4 x 30 tokens x 10 keys x 64."""
    spec = from_hf_config(ZAMBA2)
    none = count_flops(spec, TrainingSpec(seq_len=10, global_batch=3, recompute="none"))
    selective = count_flops(spec, TrainingSpec(seq_len=10, global_batch=3, recompute="selective"))
    assert selective.hardware - none.hardware == 4 * 4 * 30 * 10 * 64


def test_gradients_follow_the_once_counted_parameters():
    """Gradient bytes are parameters x grad bytes: the shared weights' gradient is held once."""
    spec = from_hf_config(ZAMBA2)
    memory = count_memory(spec, TrainingSpec(seq_len=10, global_batch=1), 1)
    assert memory.gradients == count_params(spec).total * TrainingSpec(seq_len=10, global_batch=1).grad_bytes


def test_each_use_keeps_activations_and_caches_kv():
    """A hybrid block keeps more than a Mamba-2 one (the use's tensors, eager scores grow with s);
    the cache holds K and V of every use: 4 uses x 2 x 64 x s elements beside the Mamba-2 states."""
    spec = from_hf_config(ZAMBA2)
    hybrid = [activation_bytes_per_layer(spec, 1, s, 2, layer_index=1) for s in (16, 32)]
    plain = [activation_bytes_per_layer(spec, 1, s, 2, layer_index=0) for s in (16, 32)]
    assert hybrid[0] > plain[0] and hybrid[1] - hybrid[0] > 2 * (plain[1] - plain[0])
    assert kv_cache_bytes(spec, 1, 20, 2) - kv_cache_bytes(spec, 1, 10, 2) == 2 * 4 * 2 * 64 * 10


def test_block_kinds():
    """Hybrid layers are their own block kind; without hybrid layers there is no shared block."""
    spec = from_hf_config(ZAMBA2)
    assert [block_of(spec, i).shared for i in range(7)] == [False, True, False, True, True, False, True]
    assert spec.shared_block.copies == 2
    assert from_hf_config({**ZAMBA, "layers_block_type": ["mamba"] * 8}).shared_block is None


@pytest.mark.parametrize(("data", "message"), [
    ({**ZAMBA2, "layers_block_type": ["mamba", "attention"] * 3 + ["mamba"]}, r"layers_block_type: unsupported \['attention'\]"),
    ({**ZAMBA2, "layers_block_type": ["mamba"]}, r"layers_block_type: 1 entries for num_hidden_layers 7"),
    ({k: v for k, v in ZAMBA2.items() if k != "layers_block_type"}, r"layers_block_type: missing"),
    ({**ZAMBA, "n_mamba_heads": 3}, r"n_mamba_heads: 3 must divide"),
    ({**ZAMBA, "attn_layer_period": 0}, r"attn_layer_period: must be >= 1"),
    ({**ZAMBA, "mamba_dt_rank": "big"}, r"mamba_dt_rank: expected an integer"),
])
def test_bad_configs_are_one_line_errors(data, message):
    assert_one_line_error(data, message)


@pytest.mark.parametrize("data", [ZAMBA, ZAMBA2], ids=["zamba", "zamba2"])
def test_cli_count_plan_and_verify(tmp_path, data):
    """count and plan --gpus 8 exit 0; verify refuses the shared block by name in one line."""
    assert_count_plan_verify(tmp_path, data, "shared_block")