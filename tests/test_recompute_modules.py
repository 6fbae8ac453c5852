"""Megatron-core's --recompute-modules and --recompute-method / --recompute-num-layers.

Expected bytes are worked by hand from what megatron-core core_v0.16 frees (transformer_layer.py
recompute_pre_mlp_layernorm, moe/experts.py moe_act output-discarding checkpoint, mlp checkpoint,
transformer_block.py _checkpointed_forward) with Korthikanti et al. 2022's per-token tensors
(norm output d h; gated MLP fc1 output 2 d f, fc2 input d f; full recompute keeps 2 s b h).
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from _golden import model
from modelplan.count.memory import activation_bytes_per_layer, count_memory
from modelplan.export.engines import export_plan
from modelplan.errors import ModelplanError
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

S, D = 4096, 2  # tokens of one micro-batch, bf16


def _bytes(spec, modules, layer=0):
    kw = dict(layer_index=layer, attention="flash")
    none = activation_bytes_per_layer(spec, 1, S, D, **kw)
    with_modules = activation_bytes_per_layer(spec, 1, S, D, recompute="selective", ac_mode="modules",
                                              recompute_modules=modules, **kw)
    return none, with_modules


def test_gpt_oss_layernorm_and_moe_act_free_the_norm_output_and_the_expert_activation():
    """GPT-OSS-120B MoE layer: layernorm frees the pre-MLP norm output (d h = 2 x 2880) and
    moe_act the routed experts' fc2 input (top_k d f = 4 x 2 x 2880): 28,800 B per token."""
    spec = model("gpt-oss-120b")
    none, kept = _bytes(spec, ("layernorm", "moe_act"))
    assert none - kept == S * (2 * 2880 + 4 * 2 * 2880)


def test_dense_layernorm_frees_nothing_and_mlp_frees_its_inner_activations():
    """Llama-3-8B dense layer: its norms are fused into TE LayerNormLinear (IdentityOp), so
    layernorm frees nothing; mlp frees the MLP norm output (d h) and fc1 out + fc2 in (3 d f)."""
    spec = model("llama-3-8b")
    none, kept = _bytes(spec, ("layernorm",))
    assert none == kept
    none, kept = _bytes(spec, ("mlp",))
    assert none - kept == S * (2 * 4096 + 3 * 2 * 14336)


def test_core_attn_under_flash_frees_nothing():
    spec = model("llama-3-8b")
    none, kept = _bytes(spec, ("core_attn",))
    assert none == kept


def test_full_block_and_uniform_methods_in_count():
    """Block 4: the first 4 layers keep 2 s b h (their input), the others everything; uniform 4:
    one 2 s b h input per group of 4 layers, nothing else kept."""
    spec = model("llama-3-8b")
    none = count_memory(spec, TrainingSpec(seq_len=S), 1).activations_per_layer
    block = count_memory(spec, TrainingSpec(seq_len=S, recompute="full", recompute_method="block",
                                            recompute_num_layers=4), 1).activations_per_layer
    assert block[:4] == [2 * S * 4096] * 4 and block[4:] == none[4:]
    uniform = count_memory(spec, TrainingSpec(seq_len=S, recompute="full", recompute_method="uniform",
                                              recompute_num_layers=4), 1).activations_per_layer
    assert sum(uniform) == (32 // 4) * 2 * S * 4096


def test_recompute_modules_reach_the_planner_settings():
    """The run's modules become the planner's selective ('modules'), Megatron's default kept."""
    from modelplan.plan.engine import engine_settings
    from modelplan.specs.load import load_engine
    training = TrainingSpec(seq_len=S, recompute="selective", recompute_modules=("layernorm", "moe_act"))
    sw = engine_settings(training, load_engine("megatron"))
    assert sw.ac_mode == "modules" and sw.recompute_modules == ("layernorm", "moe_act")


@pytest.mark.parametrize("kw, field", [
    (dict(recompute="selective", framework="torchtitan", recompute_modules=("mlp",)), "recompute_modules"),
    (dict(recompute="none", recompute_modules=("mlp",)), "recompute_modules"),
    (dict(recompute="full", recompute_method="block"), "recompute_num_layers"),
    (dict(recompute="selective", recompute_method="uniform", recompute_num_layers=2), "recompute_method"),
])
def test_bad_settings_name_the_field(kw, field):
    with pytest.raises(ValidationError, match=field):
        TrainingSpec(**kw)


def test_megatron_export_and_other_engines():
    spec = model("mixtral-8x7b")
    training = TrainingSpec(global_batch=256, seq_len=4096, recompute="selective",
                            recompute_modules=("layernorm", "moe_act"))
    plan = Plan(dp=8, tp=2, pp=4, ep=8, zero=1, sequence_parallel=True, recompute="selective")
    text = export_plan("megatron", spec, training, plan).text
    assert "--recompute-modules layernorm moe_act" in text and "--moe-grouped-gemm" in text
    with pytest.raises(ModelplanError, match="training.recompute_modules"):
        export_plan("deepspeed", spec, training, plan)
    full = TrainingSpec(global_batch=256, seq_len=4096, recompute="full", recompute_method="block",
                        recompute_num_layers=2)
    text = export_plan("megatron", spec, full, plan.model_copy(update={"recompute": "full"})).text
    assert "--recompute-method block" in text and "--recompute-num-layers 2" in text


@pytest.mark.slow
def test_megatron_core_accepts_the_recompute_flags():
    """megatron-core's TransformerConfig takes the exported recompute flags (its __post_init__
    checks modules, moe_act needing grouped GEMM, method and num_layers)."""
    from _engines import engine_module
    from _megatron_rules import parse_flags, read_script, transformer_config_kwargs
    tc = engine_module("megatron.core.transformer.transformer_config")
    spec = model("mixtral-8x7b")
    plan = Plan(dp=8, tp=2, pp=4, ep=8, zero=1, sequence_parallel=True)
    for training in (TrainingSpec(global_batch=256, seq_len=4096, recompute="selective",
                                  recompute_modules=("layernorm", "moe_act")),
                     TrainingSpec(global_batch=256, seq_len=4096, recompute="full", recompute_method="block",
                                  recompute_num_layers=2)):
        _, argv = read_script(export_plan("megatron", spec, training, plan.model_copy(
            update={"recompute": training.recompute})).text)
        config = tc.TransformerConfig(**transformer_config_kwargs(parse_flags(argv)))
        assert config.recompute_granularity == training.recompute
        if training.recompute_modules:
            assert config.recompute_modules == list(training.recompute_modules)
        else:
            assert (config.recompute_method, config.recompute_num_layers) == ("block", 2)
