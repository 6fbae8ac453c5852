"""The vision-language composites of modelplan/specs/hf_vlm_encdec.py (Florence-2, VisionEncoderDecoder
with ViT / Swin / Donut-Swin encoders), hf_vlm_bert.py (BLIP, GIT), hf_pix2struct.py, hf_kosmos.py
(KOSMOS-2, KOSMOS-2.5) and hf_ocr_more.py (GOT-OCR 2.0, PP-Chart2Table, PP-FormulaNet, Unlimited-OCR,
DeepSeek-OCR 2);
the small configs are in tests/_hf_vlm_encdec_cases.py.

Independent source: transformers 5.24's own modules built from the same config: sum(p.numel()) on
the meta device for the total, the trainable and the tower + projector group (a small config and
each type's config class defaults); FlopCounterMode on CPU for a tower's forward per image and for
a decoder's forward cross-attending to the image tokens. `count` / `plan --gpus 8` run; bad fields
are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_count_refused, assert_one_line_error, class_defaults
from _hf_vlm_encdec_cases import (_BART, _DAVIT, _DECODERS, _SAM, _SWINS, _TROCR, CASES, IMAGE_FEATURES, hf_counts,
                                   hf_eager)
from modelplan.count.params import count_params
from modelplan.count.vision import image_tokens, vision_forward_flops
from modelplan.specs.hf import from_hf_config


def mine(data: dict) -> tuple[int, int, int]:
    counts = count_params(from_hf_config(data, "config.json"))
    return counts.total, counts.trainable, counts.breakdown.get("vision", 0)


@pytest.mark.torch
@pytest.mark.parametrize("model_type", sorted(CASES))
def test_small_config_equals_transformers(model_type):
    """A small config counts exactly: total, trainable and the tower + projector."""
    assert mine(CASES[model_type]) == hf_counts(CASES[model_type])


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted({data["model_type"] for data in CASES.values()} - {"deepseek_ocr2"}))
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults (the full-size model) count exactly on the meta device."""
    arch = next(data["architectures"] for data in CASES.values() if data["model_type"] == model_type)
    data = {**class_defaults(model_type), "architectures": arch}
    assert mine(data) == hf_counts(data)


def hf_image_flops(data: dict, image: int) -> int:
    """FLOPs FlopCounterMode counts for one image through transformers' tower and projector
    (eager attention, CPU, float32; a forward only, so nothing is counted twice)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model = hf_eager(data)
    counter = FlopCounterMode(display=False)
    side = (data.get("encoder") or {}).get("image_size", image)  # Donut: [height, width]
    height, width = side if isinstance(side, list) else (side, side)
    with counter:  # no torch.no_grad: FlopCounterMode's module hooks need Kosmos-2's expanded latents to carry grad
        IMAGE_FEATURES[data["model_type"]](model, torch.randn(1, 3, height, width))
    return counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.parametrize("model_type", sorted(set(CASES) - {"pix2struct", "kosmos-2.5"}))
def test_forward_flops_per_image_equal_flop_counter(model_type):
    """count.vision's forward FLOPs of one image equal FlopCounterMode on transformers' tower and
    projector (DaViT: conv embeddings, depthwise convs, padded window and channel attention; Swin:
    padded windows, patch merging; SAM: windowed and global blocks with decomposed relative positions,
    the conv neck and GOT's stride-2 conv projector)."""
    spec = from_hf_config(CASES[model_type])
    flops = sum(vision_forward_flops(spec.vision, spec.hidden).values())  # (ViTModel's pooler included)
    assert flops == hf_image_flops(CASES[model_type], spec.vision.image_size)


@pytest.mark.torch
def test_blip_text_decoder_flops_equal_flop_counter():
    """BLIP's text decoder cross-attends in every block to the 17 image tokens: count_flops' forward
    of one 16-token sequence (blocks with their cross-attention, MLM head) equals FlopCounterMode on
    transformers' BlipTextLMHeadModel given 17 encoder states of the vision width."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from modelplan.count.flops import count_flops
    from modelplan.specs.training import TrainingSpec

    data = CASES["blip"]
    model = hf_eager(data)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.text_decoder(input_ids=torch.randint(0, 300, (1, 16)), encoder_hidden_states=torch.randn(1, 17, 24))
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1, images_per_seq=0)).forward == counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(_DECODERS))
def test_vision_encoder_decoder_decoder_flops_equal_flop_counter(name):
    """Each decoder's forward over one 16-token sequence cross-attending to the 17 encoder tokens
    (count_flops: blocks, their cross-attention, head) equals FlopCounterMode on transformers'
    decoder given the (projected) encoder states."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from modelplan.count.flops import count_flops
    from modelplan.specs.training import TrainingSpec

    data = CASES[f"vision-encoder-decoder/{name}"]
    model = hf_eager(data)
    width = 24 if name in ("trocr-cross", "bert") else 32  # what reaches the cross-attention
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.decoder(input_ids=torch.randint(0, 300, (1, 16)), encoder_hidden_states=torch.randn(1, 17, width),
                      use_cache=False)
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1, images_per_seq=0)).forward == counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(_SWINS))
def test_cross_memory_is_the_encoder_output(name):
    """The decoder cross-attends to every token the encoder outputs (transformers' last_hidden_state rows)."""
    import torch

    data = CASES[f"vision-encoder-decoder/{name}"]
    side = data["encoder"]["image_size"]
    height, width = side if isinstance(side, list) else (side, side)
    with torch.no_grad():
        states = hf_eager(data).encoder(pixel_values=torch.randn(1, 3, height, width)).last_hidden_state
    assert from_hf_config(data).seq2seq.cross_memory == states.shape[1]


@pytest.mark.torch
def test_pix2struct_flops_equal_flop_counter():
    """Pix2Struct's encoder on its max_patches (40) flattened patches, and its decoder over one 16-token
    sequence cross-attending to them (count_flops: blocks, cross-attention, head), each equal
    FlopCounterMode on transformers' module."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from modelplan.count.flops import count_flops
    from modelplan.specs.training import TrainingSpec

    data, spec = CASES["pix2struct"], from_hf_config(CASES["pix2struct"])
    model = hf_eager(data)
    patches = torch.zeros(1, 40, 2 + 48)  # row index, column index, then the patch's pixels
    patches[:, :, 2:] = torch.randn(1, 40, 48)
    encoder, decoder = FlopCounterMode(display=False), FlopCounterMode(display=False)
    with torch.no_grad():
        with encoder:
            states = model.encoder(flattened_patches=patches).last_hidden_state
        with decoder:
            model.decoder(input_ids=torch.randint(0, 300, (1, 16)), encoder_hidden_states=states, use_cache=False)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == encoder.get_total_flops()
    assert count_flops(spec, TrainingSpec(seq_len=16, global_batch=1, images_per_seq=0)).forward == decoder.get_total_flops()


@pytest.mark.torch
def test_kosmos2_5_flops_equal_flop_counter():
    """Kosmos-2.5's encoder on its max_patches (40) flattened patches and latent projection (8
    queries), and its decoder (ffn_layernorm only) over one 16-token sequence, each equal
    FlopCounterMode on transformers' modules."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from modelplan.count.flops import count_flops
    from modelplan.specs.training import TrainingSpec

    data, spec = CASES["kosmos-2.5"], from_hf_config(CASES["kosmos-2.5"])
    model = hf_eager(data)
    patches = torch.zeros(1, 40, 2 + 48)
    patches[:, :, 2:] = torch.randn(1, 40, 48)
    tower, text = FlopCounterMode(display=False), FlopCounterMode(display=False)
    with tower:
        model.image_to_text_projection(model.vision_model(flattened_patches=patches)[0])
    with torch.no_grad(), text:
        model.text_model(input_ids=torch.randint(0, 300, (1, 16)), use_cache=False)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == tower.get_total_flops()
    assert count_flops(spec, TrainingSpec(seq_len=16, global_batch=1, images_per_seq=0)).forward == text.get_total_flops()


@pytest.mark.torch
def test_kosmos2_text_flops_equal_flop_counter():
    """Kosmos-2's decoder (inner attention and FFN LayerNorms, sinusoid positions) over one 16-token
    sequence: count_flops' forward equals FlopCounterMode on transformers' Kosmos2TextForCausalLM."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from modelplan.count.flops import count_flops
    from modelplan.specs.training import TrainingSpec

    data = CASES["kosmos-2"]
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        hf_eager(data).text_model(input_ids=torch.randint(0, 300, (1, 16)), use_cache=False)
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1, images_per_seq=0)).forward == counter.get_total_flops()


def test_kosmos2_image_tokens_are_the_latents():
    """A Kosmos-2 image fills latent_query_num (8) text positions (Kosmos2ImageToTextProjection)."""
    assert image_tokens(from_hf_config(CASES["kosmos-2"]).vision) == 8


@pytest.mark.torch
def test_pp_formulanet_decoder_flops_equal_flop_counter():
    """PP-FormulaNet's mBART decoder over one 16-token sequence cross-attending to the 9 projected
    image tokens, and its lm_head: count_flops' forward equals FlopCounterMode on transformers'."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from modelplan.count.flops import count_flops
    from modelplan.specs.training import TrainingSpec

    data = CASES["pp_formulanet"]
    model = hf_eager(data)
    counter = FlopCounterMode(display=False)
    with torch.no_grad():
        states = model.model.encoder(pixel_values=torch.randn(1, 3, 80, 80)).pooler_output  # (1, 9, 32)
        with counter:
            out = model.model.decoder(input_ids=torch.randint(0, 300, (1, 16)), encoder_hidden_states=states,
                                      use_cache=False)
            model.lm_head(out.last_hidden_state)
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1, images_per_seq=0)).forward == counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.slow
def test_deepseek_ocr2_full_size_equals_transformers():
    """DeepSeek-OCR 2 at full size: DeepseekOcr2Config's defaults with the two keys they leave
    unbuildable or unusable set (mlp_layer_types: one dense block then sparse ones; 6 routed experts a
    token) and an encoder as wide as the SAM's 896 output channels (Qwen2-0.5B's sizes)."""
    data = class_defaults("deepseek_ocr2")
    data["architectures"] = ["DeepseekOcr2ForConditionalGeneration"]
    data["text_config"].update(mlp_layer_types=["dense"] + ["sparse"] * 31, num_experts_per_tok=6)
    data["vision_config"]["encoder_config"].update(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                                   num_attention_heads=14, num_key_value_heads=2,
                                                   layer_types=["full_attention"] * 24)
    assert mine(data) == hf_counts(data)


@pytest.mark.torch
@pytest.mark.parametrize("model_type", ["unlimited_ocr", "deepseek_ocr2"])
def test_ocr_moe_text_flops_equal_flop_counter(model_type):
    """The OCR composites' MoE text model (a dense block, two sparse ones: router, top-2 of 4 experts,
    a shared expert) over one 16-token sequence: count_flops' forward equals FlopCounterMode on
    transformers' model with eager experts (each token through its 2 experts)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from modelplan.count.flops import count_flops
    from modelplan.specs.training import TrainingSpec

    data = CASES[model_type]
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        hf_eager(data)(input_ids=torch.randint(0, 300, (1, 16)), use_cache=False)
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1, images_per_seq=0)).forward == counter.get_total_flops()


def test_got_ocr2_image_tokens():
    """A GOT-OCR 2.0 image fills (grid / 4)^2 text positions: two stride-2 convs on the 10 x 10 grid
    leave 3 x 3 = 9 (GotOcr2MultiModalProjector)."""
    assert image_tokens(from_hf_config(CASES["got_ocr2"]).vision) == 9


def test_florence2_image_tokens():
    """A Florence-2 image fills its grid's tokens plus the prepended mean (Florence2MultiModalProjector:
    cat of the spatial mean and the grid): 104 px / 8 = 13 x 13 + 1 = 170."""
    assert image_tokens(from_hf_config(CASES["florence2"]).vision) == 13 * 13 + 1


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_count_and_plan_run(model_type, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` succeed on the config.json."""
    assert_count_plan(tmp_path, CASES[model_type])


@pytest.mark.parametrize(("data", "message"), [
    ({**CASES["florence2"], "vision_config": {**_DAVIT, "num_heads": [2]}}, r"vision_config.num_heads: expected a list of 2"),
    ({**CASES["florence2"], "vision_config": {**_DAVIT, "num_groups": [3, 4]}}, r"num_groups \(3\) must divide embed_dim"),
    ({**CASES["florence2"], "vision_config": {**_DAVIT, "image_size": 1700}}, r"max_position_embeddings \(50\)"),
    ({**CASES["florence2"], "text_config": {**_BART, "model_type": "llama"}}, r"'llama' is not a text encoder-decoder"),
    ({**CASES["blip"], "architectures": ["BlipForQuestionAnswering"]}, r"architectures: 'BlipForQuestionAnswering' not"),
    ({**CASES["git"], "num_image_with_embedding": "two"}, r"num_image_with_embedding"),
    ({**CASES["vision-encoder-decoder/gpt2"], "encoder": {"model_type": "beit"}}, r"encoder.model_type: unsupported 'beit'"),
    ({**CASES["vision-encoder-decoder/gpt2"], "decoder": {"model_type": "llama"}}, r"decoder.model_type: unsupported 'llama'"),
    ({**CASES["vision-encoder-decoder/gpt2"], "decoder": {**_DECODERS["gpt2"], "add_cross_attention": False}},
     r"decoder.add_cross_attention: false"),
    ({**CASES["kosmos-2"], "text_config": {**CASES["kosmos-2"]["text_config"], "add_cross_attention": True}},
     r"text_config.add_cross_attention: true is not modelled"),
    ({**CASES["got_ocr2"], "vision_config": {**_SAM, "global_attn_indexes": [3]}}, r"global_attn_indexes: \[3\] must be"),
    ({"model_type": "deepseek_ocr2"}, r"text_config.mlp_layer_types: missing"),
    ({**CASES["unlimited_ocr"], "text_config": {**CASES["unlimited_ocr"]["text_config"],
                                                "layer_types": ["sliding_attention"] * 3}}, r"text_config.layer_types: 3"),
    ({**CASES["pp_formulanet"], "vision_config": {**CASES["pp_formulanet"]["vision_config"], "decoder_hidden_size": 30}},
     r"decoder_hidden_size \(30\) must equal text_config.d_model \(32\)"),
    ({**CASES["pix2struct"], "text_config": {**CASES["pix2struct"]["text_config"], "d_kv": 6}},
     r"text_config.d_kv: num_heads x d_kv \(4 x 6\) must equal hidden_size \(32\)"),
    ({**CASES["pix2struct"], "vision_config": {**CASES["pix2struct"]["vision_config"], "hidden_size": 24}},
     r"vision_config.hidden_size \(24\) must equal text_config.hidden_size \(32\)"),
    ({**CASES["vision-encoder-decoder/trocr"], "decoder": {**_TROCR, "cross_attention_hidden_size": 16}},
     r"cross_attention_hidden_size \(16\) must equal the encoder's hidden_size \(24\)"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A field the mappers cannot read is a one-line SpecError naming it."""
    assert_one_line_error(data, message)


@pytest.mark.parametrize(("model_type", "reason"), [("udop", "relative_bias_args"), ("reformer", "LSH")])
def test_refused_types_name_the_mechanism(model_type, reason, tmp_path):
    """A refused type exits non-zero with a one-line reason naming what is not modelled."""
    assert_count_refused(tmp_path, {"model_type": model_type}, reason)


def test_count_reports_the_cross_attended_tokens(tmp_path):
    """`count --json` gives a VisionEncoderDecoder's image as the 17 ViT tokens its decoder
    cross-attends to (16 patches + the class token), not as text positions."""
    import json

    from typer.testing import CliRunner

    from modelplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(CASES["vision-encoder-decoder/gpt2"]))
    result = CliRunner().invoke(app, ["count", str(path), "--json"])
    vision = json.loads(result.output)["vision"]
    assert (vision["tokens_per_image"], vision["tokens_read_by"]) == (17, "cross_attention")


def test_cross_attention_to_the_image_keeps_its_activations():
    """A decoder block whose encoder_attn reads the image keeps, per Korthikanti et al. 2022 sec. 4.1
    applied to the cross-attention sub-layer (no dropout, fused attention, no recompute): its norm
    input and its input (2 d h a token), Q and the out-proj input (2 d q) per text token, and K and
    V over the M image tokens once per sequence (2 d kv M): BLIP's decoder (h = q = kv = 32, d = 2,
    M = 17) with 16-token sequences keeps 16 (4 x 2 x 32) + 2 x 2 x 32 x 17 more bytes a block."""
    from modelplan.count.memory import activation_bytes_per_layer

    spec = from_hf_config(CASES["blip"])
    alone = spec.model_copy(update={"seq2seq": spec.seq2seq.model_copy(update={"cross_memory": None})})
    args = dict(micro_batch=1, seq_len=16, dtype_bytes=2, attention="flash")
    grown = activation_bytes_per_layer(spec, **args) - activation_bytes_per_layer(alone, **args)
    assert grown == 16 * 4 * 2 * 32 + 2 * 2 * 32 * 17


def test_verify_refuses_the_decoders_cross_attention(tmp_path):
    """`verify` exits non-zero in one line naming seq2seq.idle_cross_attention: the numpy executor
    does not hold or run a decoder's encoder_attn (it would drop those weights)."""
    import json

    from typer.testing import CliRunner

    from modelplan.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(CASES["vision-encoder-decoder/gpt2"]))
    result = CliRunner().invoke(app, ["verify", str(path)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and "seq2seq.idle_cross_attention" in lines[0], result.output


def test_kv_cache_holds_the_image_keys_and_values():
    """An inference cache of a decoder cross-attending to the image also holds K and V of its 17
    image tokens in every block (HF EncoderDecoderCache's cross-attention cache): BLIP's 2 blocks
    of kv width 32 at 2 bytes add 2 x 2 x 32 x 17 x 2 bytes a sequence."""
    from modelplan.count.memory import kv_cache_bytes

    spec = from_hf_config(CASES["blip"])
    alone = spec.model_copy(update={"seq2seq": spec.seq2seq.model_copy(update={"cross_memory": None})})
    assert kv_cache_bytes(spec, 1, 16, 2) - kv_cache_bytes(alone, 1, 16, 2) == 2 * 2 * 32 * 17 * 2
