"""The encoder-decoders of modelplan/specs/hf_n18encdec.py (BART, mBART, Marian, Pegasus,
Blenderbot, Blenderbot-Small, PLBart, MVP, Whisper) on the one block stack.

Independent sources: transformers 5.24's own modules, built from the same config in the test
(sum(p.numel()) for the total, the requires_grad ones for trainable, FlopCounterMode for one
forward + backward), and a cross-attention block's FLOPs worked by hand from Vaswani et al. 2017
sec. 3.2.3 (queries from the decoder, keys and values from the encoder output)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.count.blocks import block_of
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.plan.estimate import TransformerEvaluator
from modelplan.plan.shard import unit_shards
from modelplan.comm.clusters import load_cluster
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

runner = CliRunner()

SMALL = dict(d_model=16, encoder_layers=2, decoder_layers=3, encoder_attention_heads=2, decoder_attention_heads=2,
             encoder_ffn_dim=24, decoder_ffn_dim=24, vocab_size=100, max_position_embeddings=64, pad_token_id=1,
             bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, dropout=0.0)
"""Encoder and decoder of different depths, small enough to build and run on CPU."""

WHISPER = {**{k: v for k, v in SMALL.items() if k != "max_position_embeddings"},
           "max_source_positions": 12, "max_target_positions": 20, "num_mel_bins": 8,
           "suppress_tokens": [], "begin_suppress_tokens": []}

CLASSES = {"bart": "Bart", "mbart": "MBart", "marian": "Marian", "pegasus": "Pegasus", "blenderbot": "Blenderbot",
           "blenderbot-small": "BlenderbotSmall", "plbart": "PLBart", "mvp": "Mvp", "whisper": "Whisper"}
"""model_type -> transformers class prefix."""


def small_config(model_type: str, head: str = "ForConditionalGeneration", **overrides) -> dict:
    """The config.json transformers writes for a small config of `model_type`, naming `head`."""
    from _hf_reference import transformers_module

    sizes = WHISPER if model_type == "whisper" else SMALL
    cfg = transformers_module().AutoConfig.for_model(model_type, **{**sizes, **overrides})
    arch = "MarianMTModel" if model_type == "marian" and head == "ForConditionalGeneration" \
        else CLASSES[model_type] + head
    return {**json.loads(cfg.to_json_string(use_diff=False)), "architectures": [arch]}


def hf_params(data: dict) -> tuple[int, int]:
    """(sum of p.numel(), of the requires_grad ones) of the transformers model, built on CPU."""
    from _hf_reference import hf_config, hf_class

    model = hf_class(data)._from_config(hf_config(data))
    params = list(model.parameters())
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


CASES = [(t, h) for t in CLASSES for h in ("ForConditionalGeneration", "Model", "ForCausalLM")]
"""The encoder-decoder, the bare one, and the decoder alone (its blocks keep unused encoder_attn weights)."""


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "head"), CASES, ids=[f"{t}-{h}" for t, h in CASES])
def test_total_and_trainable_equal_transformers(model_type, head):
    """Both position tables (BART's + 2 rows), each stack's embedding / final norms, the tied
    `shared` table once, cross-attention in every decoder block; fixed sinusoid tables (Marian,
    Pegasus, Whisper's encoder) are parameters with requires_grad False."""
    data = small_config(model_type, head)
    c = count_params(from_hf_config(data))
    assert (c.total, c.trainable) == hf_params(data)


TROCR = [{}, {"use_learned_position_embeddings": False}, {"cross_attention_hidden_size": 12},
         {"layernorm_embedding": False, "scale_embedding": True}]
"""TrOCR's decoder: learned (+ 2 rows) or sinusoid positions (a plain tensor), encoder_attn k/v
reading a narrower encoder, no embedding norm."""


@pytest.mark.torch
@pytest.mark.parametrize("overrides", TROCR)
def test_trocr_decoder_equals_transformers(overrides):
    from _hf_reference import transformers_module

    cfg = transformers_module().AutoConfig.for_model("trocr", **SMALL, **overrides)
    data = {**json.loads(cfg.to_json_string(use_diff=False)), "architectures": ["TrOCRForCausalLM"]}
    c = count_params(from_hf_config(data))
    assert (c.total, c.trainable) == hf_params(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(CLASSES))
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults (bart-large's sizes for BartConfig, whisper-tiny's for
    WhisperConfig) count exactly to the module built on the meta device."""
    from _hf_n17_checks import class_defaults
    from _hf_reference import hf_numel

    head = "MTModel" if model_type == "marian" else "ForConditionalGeneration"
    data = {**class_defaults(model_type), "architectures": [CLASSES[model_type] + head]}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["bart", "mbart", "marian", "pegasus", "blenderbot-small"])
def test_training_flops_equal_flop_counter(model_type):
    """One forward + backward with its own loss on 12 source and 7 target tokens counts exactly
    our model FLOPs (3 x forward; post- and pre-LN, learned and sinusoid tables)."""
    from _hf_reference import hf_training_flop_counts

    data = small_config(model_type)
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=2, seq_len=12, decoder_seq_len=7)).model
    assert ours == sum(hf_training_flop_counts(data, 2, 12, 7).values())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["bart", "trocr"])
def test_decoder_alone_runs_no_cross_attention(model_type):
    """BartForCausalLM / TrOCRForCausalLM without encoder states: FlopCounterMode counts exactly
    our FLOPs of a decoder whose encoder_attn weights never run."""
    from _hf_reference import hf_training_flop_counts, transformers_module

    cfg = transformers_module().AutoConfig.for_model(model_type, **SMALL, use_cache=False)
    data = {**json.loads(cfg.to_json_string(use_diff=False)), "architectures": [CLASSES.get(model_type, "TrOCR")
                                                                               + "ForCausalLM"]}
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=2, seq_len=12)).model
    assert ours == sum(hf_training_flop_counts(data, 2, 12).values())


@pytest.mark.torch
@pytest.mark.slow
def test_whisper_flops_equal_flop_counter_but_conv1_input_grad():
    """Whisper on 24 mel frames (12 encoder positions) and 7 target tokens: FlopCounterMode counts
    every matmul and both convolutions as we do, except conv1's input gradient, which autograd
    skips (the mel features need none) and the 3 x forward convention counts: one conv1 forward,
    2 x (2 x 12 frames x batch 2) x mel 8 x h 16 x kernel 3."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import hf_config, hf_class

    data = small_config("whisper")
    cfg = hf_config(data)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = hf_class(data)._from_config(cfg)
    counter = FlopCounterMode(display=False)
    with counter:
        model(input_features=torch.randn(2, 8, 24), labels=torch.randint(3, 100, (2, 7))).loss.backward()
    measured = sum(counter.get_flop_counts()["Global"].values())
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=2, seq_len=12, decoder_seq_len=7)).model
    assert ours - measured == 2 * (2 * 12 * 2) * 8 * 16 * 3


def test_cross_attention_block_flops_by_hand():
    """A BART decoder block, h 16, 2 heads of 16 / 2 = 8, ffn 24, batch 2 x 5 target tokens over
    2 x 7 source tokens; 2 FLOPs per multiply-add, QK^T and AV 2 x 2 t s_k h each (Vaswani et al.
    2017 sec. 3.2.2-3.2.3):
      self-attention  q,k,v 2*10*16*48 = 15,360; scores 4*10*5*16 = 3,200; out 2*10*16*16 = 5,120
      cross-attention q 2*10*16*16 = 5,120; k,v on the encoder output 2*14*16*32 = 14,336;
                      scores 4*10*7*16 = 4,480; out 5,120
      MLP             fc1 2*10*16*24 = 7,680; fc2 7,680
    """
    spec = from_hf_config({"model_type": "bart", "d_model": 16, "encoder_layers": 1, "decoder_layers": 1,
                           "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 24,
                           "decoder_ffn_dim": 24, "vocab_size": 100, "max_position_embeddings": 64})
    block = block_of(spec, 1)  # the decoder block
    flops = block_forward_flops(spec, block, 2 * 5, 5, 2 * 7, 7)
    assert {k: v for k, v in flops.items() if k.startswith("cross_attention/")} == {
        "cross_attention/q": 5_120, "cross_attention/kv": 14_336, "cross_attention/score": 4_480,
        "cross_attention/out": 5_120}
    assert sum(flops.values()) == 15_360 + 3_200 + 5_120 + 5_120 + 14_336 + 4_480 + 5_120 + 7_680 + 7_680


@pytest.mark.torch
@pytest.mark.parametrize(("model_type", "head"), [("bart", "ForConditionalGeneration"), ("whisper", "ForConditionalGeneration"),
                                                  ("marian", "ForConditionalGeneration"), ("bart", "ForCausalLM")])
def test_planner_holds_every_block_of_both_stacks(model_type, head):
    """pp 1, tp 1: the planner's per-rank units sum to transformers' parameter count (the
    decoder's blocks with their cross-attention included)."""
    data = small_config(model_type, head)
    spec = from_hf_config(data)
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == hf_params(data)[0]


def test_pipeline_split_is_refused_in_one_line_and_pp1_plans(tmp_path):
    """pp > 1 is one line naming pp (the decoder stages' encoder input is not priced); dp / ZeRO
    plans are found."""
    data = {"model_type": "bart", "d_model": 256, "encoder_layers": 4, "decoder_layers": 4,
            "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 1024,
            "decoder_ffn_dim": 1024, "vocab_size": 1000, "max_position_embeddings": 512}
    spec = from_hf_config(data)
    ev = TransformerEvaluator(spec, TrainingSpec(global_batch=16, seq_len=128), load_cluster("dgx-h100"))
    problems = ev.problems(Plan(pp=2, dp=4, micro_batch=1), world_size=8)
    assert any(p.message.startswith("pp (2) > 1: pipeline stages of an encoder-decoder") for p in problems)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    forced = runner.invoke(app, ["plan", str(path), "--gpus", "8", "--batch", "16", "--seq", "128", "--pp", "2"])
    assert forced.exit_code != 0 and "pp (2) > 1" in forced.output and "Traceback" not in forced.output
    found = runner.invoke(app, ["plan", str(path), "--gpus", "8", "--batch", "16", "--seq", "128", "--json"])
    assert found.exit_code == 0, found.output


def _one_line(data: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message) as exc:
        from_hf_config(data, "config.json")
    assert "\n" not in str(exc.value)


BASE = {"model_type": "bart", "d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 24, "decoder_ffn_dim": 24, "vocab_size": 100,
        "max_position_embeddings": 64}


@pytest.mark.parametrize(("overrides", "message"), [
    ({"architectures": ["BartForTokenClassification"]}, r"architectures: 'BartForTokenClassification' not modelled"),  # no such class
    ({"architectures": ["BartForMultipleChoice"]}, r"'BartForMultipleChoice' not modelled"),
    ({"decoder_attention_heads": 4}, r"encoder_attention_heads \(2\) != decoder_attention_heads \(4\)"),
    ({"decoder_ffn_dim": 32}, r"encoder_ffn_dim \(24\) != decoder_ffn_dim \(32\)"),
    ({"model_type": "mvp", "use_prompt": True}, r"use_prompt: true is not modelled"),
    ({"model_type": "marian", "share_encoder_decoder_embeddings": False}, r"share_encoder_decoder_embeddings"),
    ({"d_model": None}, r"d_model"),
    ({"decoder_layers": 10**12}, r"decoder_layers \(1000000000000\) must be <= 10,000"),
])
def test_unmodelled_options_are_one_line_errors(overrides, message):
    _one_line({**BASE, **overrides}, message)


def test_position_tables_cap_source_and_target_lengths(tmp_path):
    """seq beyond the encoder table and --decoder-seq beyond the decoder's: one line each."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BASE))
    result = runner.invoke(app, ["count", str(path), "--seq", "65"])
    assert result.exit_code != 0 and "seq_len (65) exceeds the 64 positions" in result.output
    result = runner.invoke(app, ["count", str(path), "--seq", "64", "--decoder-seq", "65"])
    assert result.exit_code != 0 and "decoder_seq_len (65) exceeds max_positions (64)" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_planner_gemms_of_both_stacks_equal_the_counted_flops():
    """The planner's GEMMs of an encoder block and of a decoder block (self-attention,
    cross-attention over as many encoder tokens, MLP) sum to count's block FLOPs, which
    test_training_flops_equal_flop_counter checks against FlopCounterMode."""
    from modelplan.count.flops import layer_forward_flops
    from modelplan.plan.kernels import layer_kernels

    spec = from_hf_config({**BASE, "d_model": 64, "encoder_attention_heads": 4, "decoder_attention_heads": 4})
    s = 32
    for index in (0, 1):  # encoder, decoder
        counted = sum(layer_forward_flops(spec, index, tokens=2 * s, seq_len=s).values())
        kernels = layer_kernels(spec, 1, 2, s, 2, block=block_of(spec, index), memory_len=s, attention="eager")
        assert sum(g.flops for g in kernels.gemms) == counted


T5G_TEXT = dict(vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=2,
                num_key_value_heads=1, head_dim=16, sliding_window=16, query_pre_attn_scalar=16,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"])
T5G_VISION = dict(hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)


def t5gemma2_config(arch: str = "T5Gemma2ForConditionalGeneration", vision: bool = True) -> dict:
    """A small T5Gemma 2 (3 encoder, 2 decoder blocks of Gemma 3's sliding / full pattern, a
    one-block SigLIP tower) as transformers writes it."""
    from _hf_reference import transformers_module

    encoder = {"text_config": T5G_TEXT, "mm_tokens_per_image": 4, **({"vision_config": T5G_VISION} if vision else {})}
    decoder = {**T5G_TEXT, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "sliding_attention"]}
    cfg = transformers_module().AutoConfig.for_model(
        "t5gemma2", encoder=encoder, decoder=decoder, vocab_size=100, pad_token_id=0, eos_token_id=1, bos_token_id=2,
        image_token_index=99, eoi_token_index=98, boi_token_index=97)
    return {**json.loads(cfg.to_json_string(use_diff=False)), "architectures": [arch]}


@pytest.mark.torch
@pytest.mark.parametrize("arch", ["T5Gemma2ForConditionalGeneration", "T5Gemma2Model"])
def test_t5gemma2_equals_transformers(arch):
    """Gemma 3 blocks in both stacks, the merged decoder attention holding no weights of its own,
    the eoi vector, the SigLIP tower and projector; the planner's units hold the same total."""
    from _hf_reference import hf_numel

    data = t5gemma2_config(arch)
    spec = from_hf_config(data)
    assert count_params(spec).total == hf_numel(data)
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.slow
def test_t5gemma2_flops_equal_flop_counter():
    """Text only, 12 source and 7 target tokens (inside the sliding window): every decoder query
    scores its 7 own keys and the 12 encoder keys in one softmax, k/v projected from the encoder
    output in every decoder block; FlopCounterMode counts exactly our model FLOPs."""
    from _hf_reference import hf_training_flop_counts

    data = t5gemma2_config()
    training = TrainingSpec(global_batch=2, seq_len=12, decoder_seq_len=7, images_per_seq=0)  # input_ids only: no image
    ours = count_flops(from_hf_config(data), training).model
    assert ours == sum(hf_training_flop_counts(data, 2, 12, 7).values())
