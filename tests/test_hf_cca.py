"""The model_type of modelplan/specs/hf_cca.py: zaya (compressed convolutional attention, a router
MLP, learned residual scales). Expected totals are sum(p.numel()) of transformers 5.24's
ZayaForCausalLM on the meta device (small configs, the class defaults); the new mechanisms'
parameters and FLOPs against hand-worked formulas from the modeling file's shapes and, for the
convolutions, FlopCounterMode; `count` / `plan --gpus 8` run and `verify` refuses them by name."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan_verify, assert_dense_blocks_shard, assert_one_line_error, class_defaults
from _hf_reference import hf_numel
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import block_of, block_params
from modelplan.count.params import count_params
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.shard import unit_shards
from modelplan.specs.hf import UNMODELLED, from_hf_config
from modelplan.specs.plan import Plan

_ZAYA = {"model_type": "zaya", "num_hidden_layers": 3, "hidden_size": 128, "moe_intermediate_size": 32,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "num_experts": 4, "vocab_size": 1000,
         "router_hidden_size": 16, "cca_time0": 2, "cca_time1": 3}
CASES = {
    "small": _ZAYA,
    # untied with an lm_head bias, attention biases, a sliding block
    "untied-sliding": {**_ZAYA, "tie_word_embeddings": False, "lm_head_bias": True, "attention_bias": True,
                       "layer_types": ["hybrid", "hybrid_sliding", "hybrid"], "sliding_window": 64},
}


@pytest.mark.torch
@pytest.mark.parametrize("name", [*CASES, "class-defaults"])
def test_total_equals_transformers(name):
    """Total = ZayaForCausalLM's sum(p.numel()) on the meta device (the class defaults: ZAYA1-8B)."""
    data = class_defaults("zaya") if name == "class-defaults" else CASES[name]
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_blocks_by_hand():
    """small, h 128, 4 heads + 2 kv heads of 32 (C = 192 conv channels), taps 2 and 3: the convs
    192 x 2 + 192 and 192 x 32 x 3 + 192, the temperature 2 (ZayaCCAProjection, ZayaQKNorm); the
    router down 128 x 16 + 16, norm 16, fc1 / fc2 16 x 16 + 16, out 16 x 5, plus the state scale
    16 after block 0 (ZayaRouter); the residual scales 2 x 4 x 128 (ZayaResidualScaling); the
    embeddings' scale and bias 2 x 128 (ZayaModel)."""
    spec = from_hf_config(CASES["small"])
    first, second = block_params(spec, block_of(spec, 0)), block_params(spec, block_of(spec, 1))
    assert first["attention/cca"] == 192 * 2 + 192 + 192 * 32 * 3 + 192 + 2
    router = 128 * 16 + 16 + 16 + 2 * (16 * 16 + 16) + 16 * 5
    assert (first["mlp/router"], second["mlp/router"]) == (router, router + 16)
    assert first["residual"] == 8 * 128
    assert count_params(spec).breakdown["embedding/input_affine"] == 2 * 128


@pytest.mark.torch
def test_cca_conv_flops_equal_flop_counter():
    """FlopCounterMode over ZayaCCAProjection's forward = its q / k / v projections 2 t h (q + 2 kv)
    + v_proj_delayed once more on the zero initial state (2 h kv / 2) + count's attention/cca + the
    depthwise conv's k1 - 1 extra outputs over the left padding (2 C k0 (k1 - 1)); the last two
    vanish per token at training lengths."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers.models.zaya.modeling_zaya import ZayaCCAProjection

    from _hf_reference import hf_config

    data, t = CASES["small"], 16
    module = ZayaCCAProjection(hf_config(data), 0)
    with FlopCounterMode(display=False) as counter:
        module(torch.randn(1, t, 128), None)
    projections, initial_state, padding = 2 * t * 128 * (128 + 2 * 64), 2 * 128 * 32, 2 * 192 * 2 * (3 - 1)
    spec = from_hf_config(data)
    cca = block_forward_flops(spec, block_of(spec, 0), t, t)["attention/cca"]
    assert counter.get_total_flops() == projections + initial_state + cca + padding


def test_router_mlp_flops_by_hand():
    """The router's GEMMs over t tokens: 2 t (128 x 16 + 2 x 16 x 16 + 16 x 5); the expert a token runs
    once (top 1)."""
    spec, t = from_hf_config(CASES["small"]), 64
    flops = block_forward_flops(spec, block_of(spec, 1), t, t)
    assert flops["mlp/router"] == 2 * t * (128 * 16 + 2 * 16 * 16 + 16 * 5)
    assert flops["mlp/experts"] == 2 * t * 3 * 128 * 32


@pytest.mark.parametrize("name", list(CASES))
def test_kernels_and_shards(name):
    """Weight GEMMs of each block (tp 1) = count's forward FLOPs but the scores, the experts (priced at
    dispatched shapes) and the depthwise conv (a memory-bound pass); one rank holds the counted model."""
    spec, s = from_hf_config(CASES[name]), 64
    for index in range(spec.layers):
        block = block_of(spec, index)
        counted = block_forward_flops(spec, block, 2 * s, s)
        kernels = layer_kernels(spec, 1, 2, s, 2, block=block, moe_layer=block.moe)
        depthwise = 2 * 2 * s * 192 * 2
        expected = sum(v for k, v in counted.items() if "attention/score" not in k and k != "mlp/experts") - depthwise
        gemms = [g for g in kernels.gemms if not g.name.endswith(("/scores", "/context"))
                 and not g.name.startswith("mlp/experts")]
        assert sum(g.flops for g in gemms) == expected, index
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total


def test_cli_count_plan_and_verify_refusal(tmp_path):
    """count and plan --gpus 8 run; verify refuses the new features by name in one line."""
    assert_count_plan_verify(tmp_path, CASES["small"], "cca", "residual_affine", "moe.router_mlp")


@pytest.mark.parametrize(("data", "field"), [
    ({**_ZAYA, "num_experts_per_tok": 2}, "num_experts_per_tok"),
    ({**_ZAYA, "layer_types": ["hybrid", "full_attention", "hybrid"]}, "layer_types"),
])
def test_bad_options_refused_in_one_line(data, field):
    """An option transformers' ZAYA cannot build, or a malformed list: one line naming the field."""
    assert_one_line_error(data, field)


def test_registered_not_refused():
    """zaya is counted, no longer listed as unmodelled."""
    assert "zaya" not in UNMODELLED
