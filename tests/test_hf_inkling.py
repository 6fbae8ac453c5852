"""inkling_text, inkling2_text and inkling2_loop_text (modelplan/specs/hf_inkling.py): short
convolutions on the keys, values and both residual branches and a relative-logit bias; Inkling 2's
attention residuals, sinks, dynamic k/v taps and clip scales; Inkling 2 Loop's looped blocks
(specs/conv_relative.py). Expected totals are
sum(p.numel()) of transformers 5.24's InklingForCausalLM built from each small config (on CPU) and
from InklingTextConfig's defaults (meta device); leaves and FLOPs against hand-worked formulas from
modeling_inkling.py; `count` / `plan --gpus 8` run and `verify` refuses the new feature by name."""

from __future__ import annotations

import pytest

from _hf_n17_checks import (assert_count_plan_verify, assert_dense_blocks_shard, assert_one_line_error,
                            assert_total_on_cpu, class_defaults, ours)
from _hf_reference import hf_components, hf_model
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import block_of, block_params
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

_SMALL = {"model_type": "inkling_text", "architectures": ["InklingForCausalLM"], "num_hidden_layers": 6,
          "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 32, "swa_num_attention_heads": 4, "swa_num_key_value_heads": 1, "swa_head_dim": 16,
          "vocab_size": 512, "moe_intermediate_size": 32, "n_routed_experts": 8, "num_experts_per_tok": 2,
          "n_shared_experts": 2, "sliding_window_size": 64, "rel_extent": 100, "d_rel": 8}

CASES = {
    # default pattern: blocks 0-4 sliding, block 5 full; block 0 dense, the rest MoE
    "inkling": {**_SMALL, "mlp_layer_types": ["dense"] + ["sparse"] * 5},
    # checkpoint spellings: sconv_kernel_size, local_layer_ids, dense_mlp_idx, dense_intermediate_size
    # (then intermediate_size is the experts' width), one shared expert
    "inkling-checkpoint": {**_SMALL, "num_hidden_layers": 4, "sconv_kernel_size": 3, "local_layer_ids": [1, 2],
                           "dense_mlp_idx": 2, "intermediate_size": 48, "dense_intermediate_size": 80,
                           "n_shared_experts": 1},
    # every block dense and full (no router, no sliding sizes)
    "inkling-dense": {**_SMALL, "num_hidden_layers": 2, "layer_types": ["hybrid", "hybrid"],
                      "mlp_layer_types": ["dense", "dense"]},
}

_SMALL2 = {**{k: v for k, v in _SMALL.items() if k not in ("intermediate_size", "n_shared_experts")},
           "model_type": "inkling2_text", "architectures": ["Inkling2ForCausalLM"], "unpadded_vocab_size": 500}

CASES2 = {
    # default pattern (block 5 full), a block state every 2 blocks, head 500 rows over a 512-row table
    "inkling2": {**_SMALL2, "n_layers_per_attn_res_block": 2},
    # checkpoint spellings (num_local_experts / intermediate_size win over the n_routed_experts /
    # moe_intermediate_size also given, as in transformers), block 0 full (no pooled attention input), unpadded head
    "inkling2-first-full": {**_SMALL2, "num_hidden_layers": 5, "hidden_size": 64, "num_attention_heads": 2,
                            "num_key_value_heads": 1, "swa_num_attention_heads": 4, "swa_num_key_value_heads": 2,
                            "vocab_size": 300, "unpadded_vocab_size": 300, "intermediate_size": 40,
                            "num_local_experts": 4, "num_experts_per_tok": 1, "sliding_window": 32, "d_rel": 4,
                            "n_layers_per_attn_res_block": 3, "sconv_kernel_size": 3,
                            "layer_types": ["hybrid", "hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"]},
    # Inkling 2 Loop: blocks 2..5 run 3 passes, message gates of rank 16
    "inkling2_loop": {**_SMALL2, "model_type": "inkling2_loop_text", "architectures": ["Inkling2LoopForCausalLM"],
                      "num_hidden_layers": 8, "n_layers_per_attn_res_block": 2, "loop_layer_index_start": 2,
                      "loop_layer_index_end": 6, "loop_num_passes": 3, "loop_gate_rank": 16},
}


def hf_components2(data: dict) -> dict[str, int]:
    """_hf_reference.hf_components with Inkling 2's final_input (the final norm's pooled input) moved
    from the blocks to the head, where modelplan keys it (head/input_pool)."""
    out = hf_components(data)
    moved = sum(p.numel() for name, p in hf_model(data).named_parameters() if name.startswith("model.final_input."))
    return {**out, "layers": out["layers"] - moved, "head": out["head"] + moved}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_total_equals_transformers_on_cpu(name):
    """modelplan's total = sum(p.numel()) of InklingForCausalLM built on CPU."""
    assert_total_on_cpu(CASES[name])


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_components_equal_transformers(name):
    """embedding (with embed_norm) / layers / final_norm / head equal transformers' by name."""
    assert ours(CASES[name]) == hf_components(CASES[name])


@pytest.mark.torch
@pytest.mark.slow
def test_class_defaults_equal_transformers():
    """InklingTextConfig's defaults alone (66 blocks, 256 experts) give transformers' own count."""
    data = class_defaults("inkling_text")
    assert ours(data) == hf_components(data)


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES2))
def test_inkling2_total_and_components_equal_transformers(name):
    """Inkling2ForCausalLM: the total on CPU, and its parameters by embedding / layers / final_norm / head."""
    assert_total_on_cpu(CASES2[name])
    assert ours(CASES2[name]) == hf_components2(CASES2[name])


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["inkling2_text", "inkling2_loop_text"])
def test_inkling2_class_defaults_equal_transformers(model_type):
    """Inkling2TextConfig's defaults (48 blocks, 384 experts) and Inkling2LoopTextConfig's (24 blocks,
    blocks 6..17 looped 3 times) give transformers' own count."""
    data = class_defaults(model_type)
    assert ours(data) == hf_components2(data)


_TOWER = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "patch_size": 4, "posemb_grid_size": 6,
          "spatial_merge_size": 3, "projection_hidden_dim": 96, "projector_bias": True, "mlp_ratio": 2.5}


def _composite(model_type: str, text: dict, vision: dict | None) -> dict:
    """The config.json transformers writes for an Inkling 2 composite of these sub-configs."""
    from _hf_reference import transformers_module
    import json

    kwargs = {"text_config": text} | ({"vision_config": {**vision, "text_hidden_size": text["hidden_size"]}}
                                     if vision else {})
    cfg = transformers_module().AutoConfig.for_model(model_type, **kwargs)
    return json.loads(cfg.to_json_string(use_diff=False))


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "text"), [("inkling2", "inkling2"), ("inkling2_loop", "inkling2_loop")])
def test_composite_equals_transformers(model_type, text):
    """Inkling2(Loop)ForConditionalGeneration on the meta device: the text model and the small tower
    (class token and its position row, pre-LayerNorm, layer scales, biased merger), and the vision
    part alone."""
    from _hf_reference import transformers_module
    import torch

    sub = {k: v for k, v in CASES2[text].items() if k not in ("architectures", "model_type")}
    data = _composite(model_type, sub, _TOWER)
    cls = {"inkling2": "Inkling2ForConditionalGeneration", "inkling2_loop": "Inkling2LoopForConditionalGeneration"}
    with torch.device("meta"):
        model = getattr(transformers_module(), cls[model_type])._from_config(
            transformers_module().AutoConfig.for_model(model_type, **{k: data[k] for k in ("text_config", "vision_config")}))
    counted = count_params(from_hf_config(data))
    assert counted.total == sum(p.numel() for p in model.parameters())
    assert counted.breakdown["vision"] == sum(p.numel() for n, p in model.named_parameters() if "vision_tower" in n)


def test_composite_tower_by_hand():
    """Tower h 64, patch 4, 6 x 6 grid: patch 3 x 16 x 64, class 64, table (36 + 1) x 64, pre-norm 2 x 64;
    merger linear_1 (64 x 9) x 96 + 96, linear_2 96 x 128 + 128 (Inkling2VisionEmbeddings, Inkling2VisionMerger)."""
    sub = {k: v for k, v in CASES2["inkling2"].items() if k not in ("architectures", "model_type")}
    b = count_params(from_hf_config({"model_type": "inkling2", "text_config": {**sub, "model_type": "inkling2_text"},
                                     "vision_config": _TOWER})).breakdown
    assert (b["vision/tower/patch"], b["vision/tower/class"], b["vision/tower/position"]) == (48 * 64, 64, 37 * 64)
    assert b["vision/projector"] == 64 * 9 * 96 + 96 + 96 * 128 + 128


def test_loop_by_hand():
    """A looped block holds four message gates, 2h r + 2 r h each (h 128, r 16), and its 4 message
    queries (4 x 128); its forward FLOPs are 3 passes of the block plus, in passes 2 and 3, the gates'
    GEMMs 2 t (2h r + 2 r h) x 4 and message_input's 4 queries over the average sources (8 blocks, a
    state every 2: 1, 2, 2, 3, 3, 4, 4, 5 -> 24 // 8 = 3), 2 x 2 t 4 3 h."""
    t = 128
    spec = from_hf_config(CASES2["inkling2_loop"])
    looped, plain = block_of(spec, 3), block_of(spec, 7)
    assert looped.looped and not plain.looped and looped._replace(looped=False) == plain
    params = block_params(spec, looped)
    assert params["message_gates"] == 4 * (2 * 128 * 16 + 2 * 16 * 128)
    assert params["pools"] - block_params(spec, plain)["pools"] == 4 * 128
    flops, once = block_forward_flops(spec, looped, t, t), block_forward_flops(spec, plain, t, t)
    assert flops["mlp/experts"] == 3 * once["mlp/experts"]
    assert flops["message_gates"] == 2 * (4 * 2 * t * 4 * 128 * 16 + 4 * t * 4 * 3 * 128)


def test_inkling2_leaves_by_hand():
    """h 128: sliding block 1 pools its attention input and MLP input (2 x 128), block 0 only its MLP
    input (128); full block 5 pools q, k, v inputs and its MLP input (4 x 128) and norms k, v inputs
    apart (2 x 128); its dynamic taps weight_proj 2 x 128 x (2 kv heads x 4) beside the static 2 x 64 x 4;
    sink_proj 128 x 4; q scale 4 x 32, relative-state scale 4 x 8 (Inkling2FullDecoderLayer)."""
    spec = from_hf_config(CASES2["inkling2"])
    first, sliding, full = (block_params(spec, block_of(spec, i)) for i in (0, 1, 5))
    assert (first["pools"], sliding["pools"], full["pools"], full["attention/input_norms"]) == (
        128, 2 * 128, 4 * 128, 2 * 128)
    assert full["attention/kv_conv"] == 2 * 64 * 4 + 2 * 128 * 2 * 4
    assert (full["attention/sink_proj"], full["attention/q_scale"], full["attention/relative/scale"]) == (
        128 * 4, 4 * 32, 4 * 8)
    assert count_params(spec).breakdown["head/input_pool"] == 128


def test_inkling2_pool_flops_by_hand():
    """6 blocks, a block state every 2: blocks 0..5 see 1, 2, 2, 3, 3, 4 sources (states so far + the
    partial one), 15 // 6 = 2 on average; a full block's 4 queries score and mix them: 2 x 2 t 4 2 h."""
    t = 128
    spec = from_hf_config(CASES2["inkling2"])
    assert block_forward_flops(spec, block_of(spec, 5), t, t)["pools"] == 4 * t * 4 * 2 * 128


def test_conv_and_relative_leaves_by_hand():
    """Sliding block 0 (4 heads, 1 kv head of 16, dense): k/v convs 2 x 16 x 4, r_proj 128 x 4 x 8,
    bank 8 x 64 (the window), branch convs 2 x 128 x 4, global_scale 1; full MoE block 5 (2 kv heads
    of 32): k/v convs 2 x 64 x 4, bank 8 x 100, router rows for the 2 shared experts 2 x 128."""
    spec = from_hf_config(CASES["inkling"])
    sliding, full = block_params(spec, block_of(spec, 0)), block_params(spec, block_of(spec, 5))
    assert (sliding["attention/kv_conv"], sliding["attention/relative/proj"], sliding["attention/relative/bank"],
            sliding["branch_conv"], sliding["mlp/global_scale"]) == (2 * 16 * 4, 128 * 4 * 8, 8 * 64, 2 * 128 * 4, 1)
    assert (full["attention/kv_conv"], full["attention/relative/bank"], full["mlp/router_extra"]) == (
        2 * 64 * 4, 8 * 100, 2 * 128)


def test_flops_by_hand():
    """t = 128 tokens, full block 5: depthwise convs 2 t c L (k, v: c 64; branches: c 128 each),
    r_proj 2 t h (heads d_rel), the bank over every distance 2 t heads d_rel extent."""
    t = 128
    spec = from_hf_config(CASES["inkling"])
    flops = block_forward_flops(spec, block_of(spec, 5), t, t)
    assert flops["attention/kv_conv"] == 2 * t * 2 * 64 * 4
    assert flops["branch_conv"] == 2 * t * 2 * 128 * 4
    assert flops["attention/relative/proj"] == 2 * t * 128 * 4 * 8
    assert flops["attention/relative/bank"] == 2 * t * 4 * 8 * 100


def test_dense_blocks_shard():
    """plan/shard.py's dense blocks hold count's block parameters (replicated extras at tp 2)."""
    assert_dense_blocks_shard(from_hf_config(CASES["inkling-dense"]))


@pytest.mark.parametrize("name", [*CASES, *CASES2])
def test_count_plan_and_verify_refusal(name, tmp_path):
    """count and plan --gpus 8 run; verify names the feature it cannot execute."""
    assert_count_plan_verify(tmp_path, {**CASES, **CASES2}[name], "extras.conv_relative")


@pytest.mark.parametrize(("data", "field"), [
    ({**_SMALL, "layer_types": ["hybrid", "linear"] * 3}, "layer_types"),
    ({**_SMALL, "mlp_layer_types": ["sparse"] * 5}, "mlp_layer_types"),
    ({**_SMALL, "n_shared_experts": 0}, "n_shared_experts"),
    ({**_SMALL2, "unpadded_vocab_size": 600}, "unpadded_vocab_size"),
    ({**_SMALL2, "scoring_func": "softmax"}, "scoring_func"),
    ({**CASES2["inkling2_loop"], "loop_layer_index_end": 10}, "loop_layer_index_start / loop_layer_index_end"),
    ({**CASES2["inkling2_loop"], "loop_layer_index_start": 3}, "loop_layer_index_start / loop_layer_index_end"),
    ({"model_type": "inkling2", "text_config": {**_SMALL2, "model_type": "inkling2_text"},
      "vision_config": {"text_hidden_size": 64}}, "vision_config.text_hidden_size"),
])
def test_bad_fields_one_line(data, field):
    """A layer type, MLP list or shared-expert count transformers cannot build: one line naming it."""
    assert_one_line_error(data, f"{field}:")


def test_composite_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 run on an Inkling 2 composite (text model and tower)."""
    from _hf_n17_checks import assert_count_plan

    sub = {k: v for k, v in CASES2["inkling2"].items() if k not in ("architectures", "model_type")}
    assert_count_plan(tmp_path, {"model_type": "inkling2", "architectures": ["Inkling2ForConditionalGeneration"],
                                 "text_config": {**sub, "model_type": "inkling2_text"}, "vision_config": _TOWER})


def test_inference_cache_by_hand():
    """One sequence of 64 tokens, 2 bytes: each of the 2 full blocks caches K and V (2 x 64 x 64) and
    its four conv states, the last 4 inputs of k, v (64 each) and both branches (128 each)
    (InklingShortConvolution, number_of_conv_states 4); Inkling 2 Loop's full block 5 sits in the looped
    range, so each further token adds its K and V once per pass, 3 x 2 x 64 values."""
    from modelplan.count.memory import kv_cache_bytes, kv_cache_bytes_per_token

    spec = from_hf_config(CASES["inkling-dense"])
    assert kv_cache_bytes(spec, 1, 64, 2) == 2 * 2 * (2 * 64 * 64 + (64 + 64 + 2 * 128) * 4)
    assert kv_cache_bytes_per_token(from_hf_config(CASES2["inkling2_loop"]), 2) == 2 * 3 * 2 * 64


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_forward_flops_equal_flop_counter(name):
    """One eager forward of InklingForCausalLM (batch 2, 12 tokens, under every window) counts our
    forward FLOPs (blocks and head) under torch.utils.flop_counter.FlopCounterMode, plus what HF's
    eager causal_conv1d_fn computes beyond them: it pads by K - 1 on both sides and slices, so each
    sequence's convs run K - 1 more outputs a channel, 2 K FLOPs each (our count is the s outputs
    the causal conv needs, as the fused kernel computes)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import hf_class, hf_config
    from modelplan.count.conv_relative import conv_cache_elements
    from modelplan.count.flops import head_forward_flops, layer_forward_flops
    from modelplan.specs.attention_shape import for_block

    b, s, data = 2, 12, {**CASES[name], "sliding_window_size": 16}
    cfg = hf_config(data)
    cfg._attn_implementation, cfg._experts_implementation = "eager", "eager"
    torch.manual_seed(0)
    model = hf_class(data)._from_config(cfg).eval()
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(input_ids=torch.randint(0, 300, (b, s)))
    spec = from_hf_config(data)
    ours = sum(sum(layer_forward_flops(spec, i, b * s, s).values()) for i in range(spec.layers))
    ours += sum(head_forward_flops(spec, b * s, s).values())
    k = spec.extras.conv_relative.conv_kernel
    padded = sum(2 * b * (k - 1) * conv_cache_elements(for_block(spec, block_of(spec, i)), block_of(spec, i))
                 for i in range(spec.layers))  # conv_cache_elements: the conv channels x K
    assert sum(counter.get_flop_counts()["Global"].values()) == ours + padded
