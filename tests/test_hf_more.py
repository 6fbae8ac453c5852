"""The model_types added by issue 16: LFM2 / LFM2-MoE (gated short-convolution blocks,
modelplan/specs/hf_lfm2.py, count/short_conv.py, plan/short_conv.py) and AFMoE (gated attention
output, expert_bias parameter, modelplan/specs/hf_afmoe.py) and DeepSeek-V3.2 (the sparse
attention's lightning indexer, modelplan/specs/hf_deepseek32.py, plan/dsa.py) and RecurrentGemma
(Griffin's RG-LRU blocks, modelplan/specs/hf_recurrent_gemma.py, count/rglru.py, plan/rglru.py) and
MiniMax-01 (lightning attention, modelplan/specs/hf_minimax.py, count/lightning.py, plan/lightning.py)
and RWKV-4 (time / channel mixing, modelplan/specs/hf_rwkv.py, count/rwkv.py, plan/rwkv.py). Counts equal
transformers 5.24's own modules on the meta device; FLOPs and state caches equal hand-worked
formulas; tests/test_hf_cli.py runs `count` / `plan` and has `verify` refuse the mixer by name."""

from __future__ import annotations

import pytest

from _hf_more_cases import DSA_FIXTURES, MORE_FIXTURES, MORE_VARIANTS, RWKV_FIXTURES, RWKV_VARIANTS
from _hf_reference import config, hf_components, hf_numel
from modelplan.count.blocks import Block, block_of, block_params
from modelplan.count.flops import layer_forward_flops
from modelplan.count.memory import activation_bytes_per_layer, kv_cache_bytes, kv_cache_bytes_per_token
from modelplan.count.params import count_params
from modelplan.count.short_conv import short_conv_params
from modelplan.errors import SpecError
from modelplan.plan.kernels import layer_kernels
from modelplan.specs.hf import from_hf_config
from modelplan.specs.transformer import TransformerSpec



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
    ("recurrentgemma-2b", 2.7, 1),  # google/recurrentgemma-2b model card: 2.7B parameters
    ("minimax-text-01-hf", 456, 0),  # MiniMax-01 report (arXiv 2501.08313): 456B total, 45.9B activated
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


@pytest.mark.parametrize("index", range(len(MORE_VARIANTS)))
def test_tp_shards_hold_the_counted_parameters(index):
    """plan/shard.py's per-rank elements of every block (routed experts apart): at tp 1 the
    whole block (count's block_params); at tp 2 with sequence parallelism the two ranks hold it
    once plus the replicated part (norms, out_proj biases, routers with AFMoE's expert_bias,
    MLA latents with DeepSeek-V3.2's indexer) once more."""
    from modelplan.plan.shard import _block

    spec = from_hf_config(MORE_VARIANTS[index])
    for i in range(spec.layers):
        block = block_of(spec, i)
        whole = sum(v for k, v in block_params(spec, block).items() if not k.startswith("mlp/experts"))
        assert _block(spec, block, 1, False)[0] == whole
        if block.mixer.endswith("attention") and spec.mla is None and spec.num_kv_heads < 2:
            continue  # MQA: tp 2 replicates the one kv head (GQA's rule, not a partial sum here)
        local, replicated = _block(spec, block, 2, True)
        assert 2 * local - replicated == whole








@pytest.mark.parametrize(("data", "message"), [
    ({**MORE_VARIANTS[1], "layer_types": ["conv", "short_conv", "conv", "conv"]},
     r"layer_types: unsupported \['short_conv'\]"),
    ({**MORE_VARIANTS[1], "layer_types": ["conv"]}, r"layer_types: 1 entries for num_hidden_layers 4"),
    ({k: v for k, v in MORE_VARIANTS[3].items() if k != "layer_types"}, r"layer_types: missing"),
    ({**MORE_VARIANTS[0], "block_multiple_of": 0}, r"block_multiple_of: must be >= 1"),
    ({**MORE_VARIANTS[5], "attention_bias": True}, r"attention_bias: true is not modelled for afmoe"),
    ({**MORE_VARIANTS[5], "global_attn_every_n_layers": 0}, r"global_attn_every_n_layers: must be >= 1"),
    ({**MORE_VARIANTS[7], "q_lora_rank": None}, r"q_lora_rank: null is not supported by deepseek_v32"),
    ({**MORE_VARIANTS[7], "mlp_layer_types": ["dense"]}, r"mlp_layer_types: expected 3 entries"),
    ({**MORE_VARIANTS[11], "layer_types": ["linear_attention", "mamba"] * 2}, r"layer_types: unsupported \['mamba'\]"),
    ({**MORE_VARIANTS[9], "block_types": ["recurrent", "mlp"]}, r"block_types: unsupported \['mlp'\]"),
    ({**MORE_VARIANTS[9], "num_hidden_layers": 400, "block_types": ["recurrent"]}, r"num_hidden_layers: 400 exceeds"),
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


DSA_CASES = [config(n) for n in DSA_FIXTURES] + MORE_VARIANTS[7:9]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", DSA_CASES, ids=DSA_FIXTURES + ["deepseek_v32-7", "deepseek_v32-8"])
def test_deepseek_v32_main_model_equals_transformers(data):
    """The main model (MTP modules apart: DeepseekV32ForCausalLM builds none) equals transformers 5.24."""
    c = count_params(from_hf_config(data))
    assert c.total - c.breakdown.get("mtp", 0) == hf_numel(data)


def test_indexer_parameters_and_flops_by_hand():
    """Variant 7 (h 256, q latent 64, 4 index heads x 32): wq_b 64 x 128 = 8,192, wk 256 x 32 =
    8,192, k_norm 64, weights_proj 256 x 4 = 1,024: 17,472 a block. 10 tokens of a 100-token
    sequence: projections 2 x 10 x 17,408 = 348,160; scores 2 x 10 x 100 x 4 x (32 + 1) = 264,000;
    the main attention scores only the top 16 keys: 2 x 10 x 16 x 4 x (24 + 16) = 51,200."""
    from modelplan.count.blocks import block_of

    spec = from_hf_config(MORE_VARIANTS[7])
    assert block_params(spec, block_of(spec, 0))["attention/indexer"] == 17472
    flops = layer_forward_flops(spec, 0, tokens=10, seq_len=100)
    assert flops["attention/indexer/proj"] == 348160 and flops["attention/indexer/score"] == 264000
    assert flops["attention/score"] == 51200


def test_deepseek_v32_is_v3_plus_61_indexers():
    """DeepSeek-V3.2's main model is DeepSeek-V3's (671B, tests/test_hf.py) plus 61 indexers of
    1536 x 64 x 128 + 7168 x 128 + 2 x 128 + 7168 x 64 = 13,959,424 each (index_n_heads 64,
    index_head_dim 128, DeepSeek-V3.2-Exp config.json)."""
    def main(name):
        return count_params(from_hf_config(config(name))).total
    assert main("deepseek-v3.2") - main("deepseek-v3") == 61 * 13_959_424


def test_dsa_cache_holds_the_index_key():
    """DeepSeek-V3.2 caches per token and block the latent 512, the rope key 64 and the index key
    128 (transformers' DynamicIndexedLayer): 61 x 704 elements, bf16."""
    spec = from_hf_config(config("deepseek-v3.2"))
    assert kv_cache_bytes_per_token(spec, 2) == 2 * 61 * (512 + 64 + 128)


def test_dsa_planner_gemms_carry_the_counted_flops():
    """The planner's GEMMs of a DSA block (fused core apart) carry count's forward FLOPs but the
    main attention's scores, which the fused kernel prices over at most index_topk keys."""
    from modelplan.count.blocks import block_of

    spec = from_hf_config(MORE_VARIANTS[7])
    block = block_of(spec, 0)
    counted = layer_forward_flops(spec, 0, tokens=2 * 256, seq_len=256)
    kernels = layer_kernels(spec, 1, 2, 256, 2, block=block, attention="flash")
    assert sum(g.flops for g in kernels.gemms) == sum(v for k, v in counted.items() if k != "attention/score")
    assert all(f.window == 16 for f in kernels.fused if f.name == "attention/core")




def test_rglru_parameters_and_flops_by_hand():
    """Variant 10 (h 256, w 512, 4 gate blocks of 128, k 3), block 1 (recurrent): linear_y, x
    2 x (256 x 512 + 512) = 263,168; conv 512 x 3 + 512 = 2,048; gates 2 x (4 x 128^2 + 512) =
    132,096; recurrent_param 512; linear_out 512 x 256 + 256 = 131,328. 10 tokens: in 2 x 10 x
    256 x 1024 = 5,242,880; conv 2 x 10 x 512 x 3 = 30,720; gates 2 x 10 x 2 x 4 x 128^2 =
    2,621,440; recurrence 2 x 10 x 512 = 10,240; out 2,621,440."""
    spec = from_hf_config(MORE_VARIANTS[10])
    block = block_of(spec, 1)
    assert block.mixer == "rglru"
    params = {k: v for k, v in block_params(spec, block).items() if k.startswith("rglru/")}
    assert params == {"rglru/in_proj": 263168, "rglru/conv": 2048, "rglru/gates": 132096, "rglru/lru": 512,
                      "rglru/out_proj": 131328}
    flops = {k: v for k, v in layer_forward_flops(spec, 1, tokens=10, seq_len=10).items() if k.startswith("rglru/")}
    assert flops == {"rglru/in_proj": 5242880, "rglru/conv": 30720, "rglru/gates": 2621440, "rglru/lru": 10240,
                     "rglru/out_proj": 2621440}


def test_recurrentgemma_state_cache_by_hand():
    """RecurrentGemma-2B, batch 1, 4096 tokens, bf16: 18 recurrent blocks hold the conv window
    2560 x 3 and the RG-LRU state 2560; 8 attention blocks (MQA, 1 kv head of 256) keep at most
    the 2048-token window."""
    spec = from_hf_config(config("recurrentgemma-2b"))
    assert kv_cache_bytes(spec, 1, 4096, 2) == 2 * (18 * 2560 * 4 + 8 * 2 * 256 * 2048)


@pytest.mark.parametrize("index", [9, 10])
def test_rglru_planner_gemms_and_shards(index):
    """A recurrent block's planner GEMMs carry count's FLOPs but the conv's and the recurrence's
    (memory-bound passes there); its tp shards hold the counted parameters (2 ranks at sp: the
    block once plus the replicated norms and linear_out bias once more)."""
    from modelplan.plan.shard import _block

    spec = from_hf_config(MORE_VARIANTS[index])
    i = next(i for i in range(spec.layers) if block_of(spec, i).mixer == "rglru")
    block = block_of(spec, i)
    counted = layer_forward_flops(spec, i, tokens=2 * 128, seq_len=128)
    gemm = sum(g.flops for g in layer_kernels(spec, 1, 2, 128, 2, block=block).gemms)
    assert gemm == sum(v for k, v in counted.items() if k not in ("rglru/conv", "rglru/lru"))
    whole = sum(block_params(spec, block).values())
    local, replicated = _block(spec, block, 2, True)
    assert _block(spec, block, 1, False) == (whole, 0) and 2 * local - replicated == whole


def test_lightning_parameters_flops_and_state_by_hand():
    """Variant 12 (h 256, 4 heads x 32, block 64), block 0 (lightning): qkv 256 x 384 + gate
    256 x 128 = 131,072, norm 128, out_proj 32,768. 100 tokens of a 100-token sequence: in_proj
    2 x 100 x 256 x 512 = 26,214,400; scan 100 x 4 x (4 x 64 x 32 + 4 x 32^2) = 4,915,200;
    out_proj 6,553,600. State per sequence: 4 x 32 x 32 per lightning block (3 of them) and the
    softmax block's K/V over its 128-token window (2 kv heads x 32 x 2)."""
    spec = from_hf_config(MORE_VARIANTS[12])
    block = block_of(spec, 0)
    assert block.mixer == "lightning"
    params = {k: v for k, v in block_params(spec, block).items() if k.startswith("lightning/")}
    assert params == {"lightning/in_proj": 131072, "lightning/norm": 128, "lightning/out_proj": 32768}
    flops = {k: v for k, v in layer_forward_flops(spec, 0, tokens=100, seq_len=100).items()
             if k.startswith("lightning/")}
    assert flops == {"lightning/in_proj": 26214400, "lightning/scan": 4915200, "lightning/out_proj": 6553600}
    assert kv_cache_bytes(spec, 1, 1000, 2) == 2 * (3 * 4 * 32 * 32 + 2 * 2 * 32 * 128)


@pytest.mark.parametrize("index", [11, 12])
def test_lightning_planner_gemms_and_shards(index):
    """A lightning block's planner GEMMs carry count's forward FLOPs exactly (its block-wise
    matmuls are GEMMs); its tp shards split every parameter with the heads."""
    from modelplan.plan.shard import _block

    spec = from_hf_config(MORE_VARIANTS[index])
    i = next(i for i in range(spec.layers) if block_of(spec, i).mixer == "lightning")
    block = block_of(spec, i)
    counted = layer_forward_flops(spec, i, tokens=2 * 256, seq_len=256)
    kernels = layer_kernels(spec, 1, 2, 256, 2, block=block, moe_layer=block.moe)
    gemm = sum(g.flops for g in kernels.gemms if not g.name.startswith("mlp/"))
    assert gemm == sum(v for k, v in counted.items() if not k.startswith("mlp/"))
    whole = sum(v for k, v in block_params(spec, block).items() if not k.startswith("mlp/experts"))
    local, replicated = _block(spec, block, 2, True)
    assert _block(spec, block, 1, False)[0] == whole and 2 * local - replicated == whole


@pytest.mark.parametrize(("index", "mixer", "expected"), [
    (1, "short_conv", 6 * 256 * 2),  # B, C, x, B * x, conv output, out_proj input: 6h at 2 B
    (10, "rglru", 13 * 512 * 2 + 4 * 512),  # 13w at 2 B + the fp32 scan state (count/rglru.py's list)
    (12, "lightning", 9 * 128 * 2),  # qkv before / after SiLU, gate, core and norm outputs: 9 H d
])
def test_kept_bytes_per_token_by_hand(index, mixer, expected):
    """Each new mixer's kept bytes per token equal the tensors its docstring enumerates."""
    from modelplan.count.mixers import kept_bytes_per_token

    assert kept_bytes_per_token(from_hf_config(MORE_VARIANTS[index]), mixer, 2) == expected


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", [config(n) for n in RWKV_FIXTURES] + RWKV_VARIANTS,
                         ids=RWKV_FIXTURES + ["rwkv-variant"])
def test_rwkv_equals_transformers(data):
    """RWKV-4-169M (169,342,464: the card's 169M) and a variant (A != h, I != 4h, tied head)
    equal transformers 5.24's RwkvForCausalLM."""
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_rwkv_block_by_hand():
    """Variant (h 256, A 192, I 600): time mixing 4 x 256 x 192 + 3 x 256 = 197,376, time_decay
    and time_first 384, channel mixing 2 x 256 x 600 + 256^2 + 2 x 256 = 373,248, two
    LayerNorms 1,024; 10 tokens: 2 x 10 x 4 x 256 x 192 = 3,932,160, WKV 2 x 2 x 10 x 192 =
    7,680, channel 2 x 10 x (2 x 256 x 600 + 256^2) = 7,454,720. State per sequence and block
    2 x 256 + 3 x 192 = 1,088 (3 blocks, bf16)."""
    spec = from_hf_config(RWKV_VARIANTS[0])
    block = block_of(spec, 0)
    assert block_params(spec, block) == {"rwkv/time_mix": 197376, "rwkv/wkv": 384, "rwkv/channel_mix": 373248,
                                         "norm": 1024}
    flops = layer_forward_flops(spec, 0, tokens=10, seq_len=10)
    assert flops == {"rwkv/time_mix": 3932160, "rwkv/wkv": 7680, "rwkv/channel_mix": 7454720}
    assert kv_cache_bytes(spec, 1, 500, 2) == 2 * 3 * 1088


def test_rwkv_planner_and_shards():
    """The planner's GEMMs carry count's FLOPs but the WKV recurrence's; 2 ranks at sp hold the
    block once plus the replicated token-shift mixes and norms once more."""
    from modelplan.plan.shard import _block

    spec = from_hf_config(RWKV_VARIANTS[0])
    block = block_of(spec, 0)
    counted = layer_forward_flops(spec, 0, tokens=2 * 128, seq_len=128)
    gemm = sum(g.flops for g in layer_kernels(spec, 1, 2, 128, 2, block=block).gemms)
    assert gemm == counted["rwkv/time_mix"] + counted["rwkv/channel_mix"]
    whole = sum(block_params(spec, block).values())
    local, replicated = _block(spec, block, 2, True)
    assert _block(spec, block, 1, False) == (whole, 0) and 2 * local - replicated == whole
