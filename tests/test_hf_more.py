"""The model_types added by issue 16: LFM2 / LFM2-MoE (gated short-convolution blocks,
modelplan/specs/hf_lfm2.py, count/short_conv.py, plan/short_conv.py) and AFMoE (gated attention
output, expert_bias parameter, modelplan/specs/hf_afmoe.py). Counts equal
transformers 5.24's own modules on the meta device; FLOPs and state caches equal hand-worked
formulas; `count` / `plan` run and `verify` refuses the mixer by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _hf_more_cases import MORE_FIXTURES, MORE_VARIANTS
from _hf_reference import config, hf_components
from modelplan.cli import app
from modelplan.count.blocks import Block, block_of, block_params
from modelplan.count.flops import layer_forward_flops
from modelplan.count.memory import activation_bytes_per_layer, kv_cache_bytes, kv_cache_bytes_per_token
from modelplan.count.params import count_params
from modelplan.count.short_conv import short_conv_params
from modelplan.errors import SpecError
from modelplan.plan.kernels import layer_kernels
from modelplan.specs.hf import from_hf_config
from modelplan.specs.transformer import TransformerSpec

HF = Path(__file__).parent / "data" / "hf"
runner = CliRunner()


def components(data: dict) -> dict[str, int]:
    b = count_params(from_hf_config(data, "config.json")).breakdown
    return {key: b.get(key, 0) for key in ("embedding", "layers", "final_norm", "head")}


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", [config(n) for n in MORE_FIXTURES] + MORE_VARIANTS,
                         ids=MORE_FIXTURES + [f"{d['model_type']}-{i}" for i, d in enumerate(MORE_VARIANTS)])
def test_equal_transformers_by_component(data):
    """Published configs and variants (biases, kernel, ffn rounding, tying, dense prefix, expert
    bias buffer): embedding / layers / final_norm / head equal transformers 5.24's module."""
    assert components(data) == hf_components(data)


@pytest.mark.parametrize(("name", "billions", "digits"), [
    ("lfm2-1.2b", 1.17, 2),  # LiquidAI/LFM2-1.2B model card: 1.17B parameters
    ("lfm2-8b-a1b", 8.3, 1),  # LiquidAI/LFM2-8B-A1B model card: 8.3B total (1.5B active)
    ("trinity-mini", 26, 0),  # arcee-ai/Trinity-Mini model card: 26B total (3B active)
    ("trinity-nano-preview", 6, 0),  # arcee-ai/Trinity-Nano-Preview model card: 6B total (1B active)
])
def test_published_totals_rounded(name, billions, digits):
    assert round(count_params(from_hf_config(config(name))).total / 1e9, digits) == billions


def tiny(**conv) -> TransformerSpec:
    return TransformerSpec(layers=1, hidden=5, heads=1, vocab=7, mlp=False, position="none",
                           layer_types=["short_conv"], short_conv=conv)


def test_short_conv_parameters_by_hand():
    """Lfm2ShortConv, h 5, L 3: in_proj 5 x 15 = 75, conv 5 x 3 = 15, out_proj 25; with biases
    +15, +5, +5."""
    assert short_conv_params(tiny(conv_kernel=3)) == {"short_conv/in_proj": 75, "short_conv/conv": 15,
                                                      "short_conv/out_proj": 25}
    assert short_conv_params(tiny(conv_kernel=3, bias=True)) == {"short_conv/in_proj": 90, "short_conv/conv": 20,
                                                                 "short_conv/out_proj": 30}


def test_short_conv_flops_by_hand():
    """4 tokens, h 5, L 3: in_proj 2 x 4 x 5 x 15 = 600, conv 2 x 4 x 5 x 3 = 120, out_proj 200."""
    flops = layer_forward_flops(tiny(conv_kernel=3), 0, tokens=4, seq_len=4)
    assert {k: v for k, v in flops.items() if k.startswith("short_conv/")} == {
        "short_conv/in_proj": 600, "short_conv/conv": 120, "short_conv/out_proj": 200}


def test_lfm2_state_cache_by_hand():
    """LFM2-1.2B, batch 2, 1000 tokens, bf16: 10 conv blocks hold conv_states 2048 x 3 whatever
    the length; 6 attention blocks 2 x 8 kv heads x 64 per token."""
    spec = from_hf_config(config("lfm2-1.2b"))
    assert kv_cache_bytes(spec, 2, 1000, 2) == 2 * 2 * (10 * 2048 * 3 + 6 * 2 * 8 * 64 * 1000)
    assert kv_cache_bytes_per_token(spec, 2) == 2 * 6 * 2 * 8 * 64


def test_short_conv_activations_by_hand():
    """No s^2 term and 6h values a token (B, C, x, B * x, the conv output, out_proj's input)
    plus the block's input norm: doubling the sequence doubles the kept bytes."""
    spec = tiny(conv_kernel=3)
    block = Block("short_conv", False, False, False, False)
    one = activation_bytes_per_layer(spec, 1, 64, 2, block=block)
    assert activation_bytes_per_layer(spec, 1, 128, 2, block=block) == 2 * one


@pytest.mark.parametrize("name", MORE_FIXTURES[:2])
def test_planner_gemms_carry_the_counted_flops(name):
    """The planner's GEMMs of a short-conv block carry count's forward FLOPs but the conv's
    (a memory-bound pass there)."""
    spec = from_hf_config(config(name))
    block = block_of(spec, 0)
    assert block.mixer == "short_conv" and not block.moe
    counted = layer_forward_flops(spec, 0, tokens=2 * 1024, seq_len=1024)
    gemm = sum(g.flops for g in layer_kernels(spec, 1, 2, 1024, 2, block=block).gemms)
    assert gemm == sum(v for k, v in counted.items() if not k.endswith("/conv"))


@pytest.mark.parametrize("index", [0, 1])
def test_tp_shards_hold_the_counted_parameters(index):
    """At tp 1 a rank holds the whole block; at tp 2 with sequence parallelism the two ranks
    hold it once plus the replicated part (norms, out_proj bias) once more."""
    from modelplan.plan.shard import _block

    spec = from_hf_config(MORE_VARIANTS[index])
    for i in range(spec.layers):
        block = block_of(spec, i)
        whole = sum(block_params(spec, block).values())
        assert _block(spec, block, 1, False) == (whole, 0)
        local, replicated = _block(spec, block, 2, True)
        assert 2 * local - replicated == whole


@pytest.mark.parametrize("name", MORE_FIXTURES)
def test_cli_count_runs(name):
    result = runner.invoke(app, ["count", str(HF / f"{name}.json"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["params"]["total"] == count_params(from_hf_config(config(name))).total


@pytest.mark.slow
@pytest.mark.parametrize("name", MORE_FIXTURES)
def test_cli_plan_runs_on_8_gpus(name):
    result = runner.invoke(app, ["plan", str(HF / f"{name}.json"), "--gpus", "8", "--json"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("name", "feature"), [("lfm2-1.2b", "layer_types=short_conv"),
                                                ("trinity-mini", "moe.score_correction_param")])
def test_verify_refuses_the_mixer_in_one_line(name, feature):
    result = runner.invoke(app, ["verify", str(HF / f"{name}.json")])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and feature in lines[0] and "Traceback" not in result.output


@pytest.mark.parametrize(("data", "message"), [
    ({**MORE_VARIANTS[1], "layer_types": ["conv", "short_conv", "conv", "conv"]},
     r"layer_types: unsupported \['short_conv'\]"),
    ({**MORE_VARIANTS[1], "layer_types": ["conv"]}, r"layer_types: 1 entries for num_hidden_layers 4"),
    ({k: v for k, v in MORE_VARIANTS[3].items() if k != "layer_types"}, r"layer_types: missing"),
    ({**MORE_VARIANTS[0], "block_multiple_of": 0}, r"block_multiple_of: must be >= 1"),
    ({**MORE_VARIANTS[5], "attention_bias": True}, r"attention_bias: true is not modelled for afmoe"),
    ({**MORE_VARIANTS[5], "global_attn_every_n_layers": 0}, r"global_attn_every_n_layers: must be >= 1"),
])
def test_bad_configs_are_one_line_errors_naming_the_field(data, message):
    with pytest.raises(SpecError, match=message) as exc:
        from_hf_config(data, "config.json")
    assert "\n" not in str(exc.value)


def test_afmoe_gate_and_expert_bias_by_hand():
    """AFMoE variant 5 (h 256, 4 heads x 32): gate_proj 256 x 128 = 32,768 a block; each MoE
    block's router 256 x 8 + the 8-value expert_bias parameter = 2,056."""
    from modelplan.count.blocks import block_of

    spec = from_hf_config(MORE_VARIANTS[5])
    params = block_params(spec, block_of(spec, 0))
    assert params["attention/gate"] == 256 * 128 and params["mlp/router"] == 256 * 8 + 8


@pytest.mark.parametrize("index", [5, 6])
def test_afmoe_tp_shards_hold_the_counted_parameters(index):
    """The router (with the expert_bias parameter) is replicated over tp: 2 ranks at sp hold the
    dense part once plus the replicated part once more (routed experts excluded)."""
    from modelplan.plan.shard import _block

    spec = from_hf_config(MORE_VARIANTS[index])
    for i in range(spec.layers):
        block = block_of(spec, i)
        whole = sum(v for k, v in block_params(spec, block).items() if not k.startswith("mlp/experts"))
        assert _block(spec, block, 1, False)[0] == whole
        local, replicated = _block(spec, block, 2, True)
        assert 2 * local - replicated == whole
