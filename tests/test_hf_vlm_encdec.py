"""The vision-language composites of modelplan/specs/hf_vlm_encdec.py (Florence-2, VisionEncoderDecoder
with ViT / Swin / Donut-Swin encoders), hf_vlm_bert.py (BLIP, GIT), hf_pix2struct.py, hf_kosmos.py (KOSMOS-2, KOSMOS-2.5) and hf_ocr_more.py (GOT-OCR 2.0,
PP-Chart2Table, PP-FormulaNet, Unlimited-OCR).

Independent source: transformers 5.24's own modules built from the same config: sum(p.numel()) on
the meta device for the total, the trainable and the tower + projector group (a small config and
each type's config class defaults); FlopCounterMode on CPU for a tower's forward per image and for
a decoder's forward cross-attending to the image tokens. `count` / `plan --gpus 8` run; bad fields
are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import hf_class, hf_config, hf_model
from modelplan.count.params import count_params
from modelplan.count.vision import image_tokens, vision_forward_flops
from modelplan.specs.hf import from_hf_config

_BART = {"model_type": "bart", "d_model": 32, "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 48, "decoder_ffn_dim": 48, "vocab_size": 300,
         "max_position_embeddings": 64}
_DAVIT = {"depths": [1, 2], "patch_size": [7, 3], "patch_stride": [4, 2], "patch_padding": [3, 1],
          "patch_prenorm": [False, True], "embed_dim": [16, 32], "num_heads": [2, 4], "num_groups": [2, 4],
          "window_size": 5, "projection_dim": 32, "qkv_bias": False, "image_size": 104}
"""Two DaViT stages; 104 px -> a 26 x 26 then 13 x 13 grid, padded to 30 / 15 for 5 x 5 windows."""

_VIT = {"hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 64,
        "patch_size": 16}
"""A 4 x 4-patch ViT (+ a class token: 17 tokens)."""
_BERT = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
         "max_position_embeddings": 64}

CASES = {
    "florence2": {"model_type": "florence2", "architectures": ["Florence2ForConditionalGeneration"],
                  "text_config": _BART, "vision_config": _DAVIT},
    "blip": {"model_type": "blip", "architectures": ["BlipForConditionalGeneration"], "text_config": _BERT,
             "vision_config": _VIT},
    "git": {"model_type": "git", "architectures": ["GitForCausalLM"], **_BERT, "num_image_with_embedding": 2,
            "vision_config": _VIT},
}
_TROCR = {"model_type": "trocr", "d_model": 32, "decoder_layers": 2, "decoder_attention_heads": 4, "decoder_ffn_dim": 48,
          "vocab_size": 300, "max_position_embeddings": 64}
_DECODERS = {
    "trocr": _TROCR,  # TrOCR: widths differ -> enc_to_dec_proj
    "trocr-cross": {**_TROCR, "cross_attention_hidden_size": 24},  # k / v read the 24-wide encoder output
    "mbart": {**{k: v for k, v in _BART.items() if k != "model_type"}, "model_type": "mbart"},  # Donut's decoder
    "gpt2": {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "vocab_size": 300, "n_positions": 64,
             "add_cross_attention": True, "is_decoder": True},  # ViT-GPT2 captioning
    "bert": {**_BERT, "hidden_size": 24, "model_type": "bert", "add_cross_attention": True, "is_decoder": True},
}
CASES.update({f"vision-encoder-decoder/{name}": {
    "model_type": "vision-encoder-decoder", "architectures": ["VisionEncoderDecoderModel"],
    "encoder": {**_VIT, "model_type": "vit"}, "decoder": decoder} for name, decoder in _DECODERS.items()})
_SWINS = {
    # Donut: a 90 x 70 px page -> a 23 x 18 patch grid (padded), 5 x 5 windows padded, odd sides merged
    "donut-swin": {"model_type": "donut-swin", "image_size": [90, 70], "patch_size": 4, "embed_dim": 8,
                   "depths": [2, 2, 1], "num_heads": [2, 2, 4], "window_size": 5},
    # Swin with absolute positions: 16 x 16 then 8 x 8 grids in 3 x 3 windows (padded to 18 and 9)
    "swin": {"model_type": "swin", "image_size": 64, "patch_size": 4, "embed_dim": 8, "depths": [2, 1],
             "num_heads": [2, 2], "window_size": 3, "use_absolute_embeddings": True},
    # the last stage's 7 x 7 grid is one window, unshifted (set_shift_and_window_size; a smaller grid
    # makes transformers 5.24's relative-position bias mismatch the window and fail)
    "swin-one-window": {"model_type": "swin", "image_size": 56, "patch_size": 4, "embed_dim": 8, "depths": [1, 2],
                        "num_heads": [2, 2], "window_size": 7},
}
CASES.update({f"vision-encoder-decoder/{name}": {
    "model_type": "vision-encoder-decoder", "architectures": ["VisionEncoderDecoderModel"], "encoder": encoder,
    "decoder": _DECODERS["mbart"]} for name, encoder in _SWINS.items()})
"""Small configs, one per type (the name: the module transformers builds)."""

CASES["pix2struct"] = {
    "model_type": "pix2struct", "architectures": ["Pix2StructForConditionalGeneration"], "max_patches": 40,
    "text_config": {"hidden_size": 32, "d_kv": 8, "d_ff": 48, "num_layers": 2, "num_heads": 4, "vocab_size": 300},
    "vision_config": {"hidden_size": 32, "patch_embed_hidden_size": 48, "d_ff": 40, "d_kv": 6, "num_hidden_layers": 2,
                      "num_attention_heads": 3, "seq_len": 64}}
"""Pix2Struct on 40 flattened patches of 48 values; its encoder's heads x d_kv (18) narrower than its width."""
CASES["kosmos-2"] = {
    "model_type": "kosmos-2", "architectures": ["Kosmos2ForConditionalGeneration"], "latent_query_num": 8,
    "text_config": {"embed_dim": 32, "layers": 2, "ffn_dim": 48, "attention_heads": 4, "vocab_size": 300,
                    "max_position_embeddings": 64}, "vision_config": _VIT}

CASES["kosmos-2.5"] = {
    "model_type": "kosmos-2.5", "architectures": ["Kosmos2_5ForConditionalGeneration"], "latent_query_num": 8,
    "max_patches": 40, "text_config": CASES["kosmos-2"]["text_config"],
    "vision_config": {"hidden_size": 24, "patch_embed_hidden_size": 48, "intermediate_size": 40, "head_dim": 6,
                      "num_hidden_layers": 2, "num_attention_heads": 3, "max_num_patches": 64}}
_QWEN2 = {"model_type": "qwen2", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300}
_SAM = {"hidden_size": 24, "output_channels": 16, "num_hidden_layers": 3, "num_attention_heads": 2, "image_size": 80,
        "patch_size": 8, "window_size": 3, "global_attn_indexes": [1], "mlp_dim": 40}
"""A 10 x 10-patch SAM: two blocks in 3 x 3 windows (padded to 12 x 12), one global block."""
for _name in ("got_ocr2", "pp_chart2table"):
    CASES[_name] = {"model_type": _name, "architectures": ["GotOcr2ForConditionalGeneration"], "text_config": _QWEN2,
                    "vision_config": _SAM}
CASES["got_ocr2-untied"] = {**CASES["got_ocr2"], "tie_word_embeddings": False}  # the composite's flag decides
CASES["unlimited_ocr"] = {
    "model_type": "unlimited_ocr", "architectures": ["UnlimitedOcrForConditionalGeneration"],
    "text_config": {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4,
                    "num_key_value_heads": 4, "vocab_size": 300, "n_routed_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 16, "n_shared_experts": 1, "mlp_layer_types": ["dense", "sparse", "sparse"],
                    "layer_types": ["reference_sliding_attention", "full_attention", "reference_sliding_attention"]},
    "vision_config": {"sam_config": {**_SAM, "image_size": 128, "downsample_channels": [20, 32]},
                      "encoder_config": {"hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2,
                                         "num_attention_heads": 2, "image_size": 56, "patch_size": 14}}}
"""Unlimited-OCR: a 16 x 16 SAM grid -> 4 x 4 after its proj convs -> a CLIP on 17 tokens; MoE from block 1."""
CASES["pp_formulanet"] = {
    "model_type": "pp_formulanet", "architectures": ["PPFormulaNetForConditionalGeneration"],
    "text_config": {"d_model": 32, "decoder_layers": 2, "decoder_attention_heads": 4, "decoder_ffn_dim": 48,
                    "vocab_size": 300, "max_position_embeddings": 64},
    "vision_config": {**_SAM, "post_conv_in_channels": 16, "post_conv_mid_channels": 20, "post_conv_out_channels": 28,
                      "decoder_hidden_size": 32}}

TOWER = {"florence2": ("vision_tower.", "multi_modal_projector."), "blip": ("vision_model.",),
         "git": ("image_encoder.", "visual_projection.", "img_temporal_embedding"),
         "vision-encoder-decoder": ("^encoder.", "^enc_to_dec_proj."), "pix2struct": ("^encoder.",),
         "kosmos-2": ("vision_model.", "image_to_text_projection."),
         "kosmos-2.5": ("vision_model.", "image_to_text_projection."),
         "got_ocr2": ("vision_tower.", "multi_modal_projector."), "pp_formulanet": ("^model.encoder.",),
         "unlimited_ocr": ("vision_tower.", "multi_modal_projector.", "view_separator", "image_newline"), "pp_chart2table": ("vision_tower.", "multi_modal_projector.")}
"""Name parts of each type's tower + projector parameters in transformers' module (^: a name's start)."""

IMAGE_FEATURES = {
    "florence2": lambda model, pixels: model.model.get_image_features(pixel_values=pixels),
    "blip": lambda model, pixels: model.vision_model(pixel_values=pixels),
    "git": lambda model, pixels: model.git.visual_projection(model.git.image_encoder(pixels).last_hidden_state),
    "vision-encoder-decoder": lambda model, pixels: getattr(model, "enc_to_dec_proj", lambda x: x)(
        model.encoder(pixel_values=pixels).last_hidden_state),
    "got_ocr2": lambda model, pixels: model.model.get_image_features(pixel_values=pixels),
    "pp_formulanet": lambda model, pixels: model.model.encoder(pixel_values=pixels),
    "unlimited_ocr": lambda model, pixels: model.model.multi_modal_projector(
        model.model.vision_tower(pixel_values=pixels).last_hidden_state),
    "pp_chart2table": lambda model, pixels: model.model.get_image_features(pixel_values=pixels),
    "kosmos-2": lambda model, pixels: model.image_to_text_projection(
        model.vision_model.model.post_layernorm(model.vision_model(pixel_values=pixels)[0])),
}
"""transformers' tower + projector on one image, per type."""


def hf_counts(data: dict) -> tuple[int, int, int]:
    """(total, requires_grad, tower + projector) of transformers' module on the meta device."""
    prefixes = TOWER[data["model_type"]]
    total = trainable = tower = 0
    for name, p in hf_model(data).named_parameters():
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
        tower += p.numel() if any(name.startswith(x[1:]) if x[0] == "^" else f".{x}" in f".{name}"
                                  for x in prefixes) else 0
    return total, trainable, tower


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
@pytest.mark.parametrize("model_type", sorted({data["model_type"] for data in CASES.values()}))
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults (the full-size model) count exactly on the meta device."""
    arch = next(data["architectures"] for data in CASES.values() if data["model_type"] == model_type)
    data = {**class_defaults(model_type), "architectures": arch}
    assert mine(data) == hf_counts(data)


def hf_eager(data: dict):
    """transformers' module of `data` on CPU in eval mode, eager attention on it and its sub-configs; seed 0."""
    import torch

    cfg = hf_config(data)
    vision = getattr(cfg, "vision_config", None)
    for sub in (cfg, getattr(cfg, "text_config", None), vision, getattr(vision, "sam_config", None),
                getattr(vision, "encoder_config", None)):
        if sub is not None:
            sub._attn_implementation = "eager"
            sub._experts_implementation = "eager"
    torch.manual_seed(0)
    return hf_class(data)._from_config(cfg).eval()


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
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1)).forward == counter.get_total_flops()


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
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1)).forward == counter.get_total_flops()


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
    assert count_flops(spec, TrainingSpec(seq_len=16, global_batch=1)).forward == decoder.get_total_flops()


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
    assert count_flops(spec, TrainingSpec(seq_len=16, global_batch=1)).forward == text.get_total_flops()


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
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1)).forward == counter.get_total_flops()


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
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1)).forward == counter.get_total_flops()


@pytest.mark.torch
def test_unlimited_ocr_text_flops_equal_flop_counter():
    """Unlimited-OCR's MoE text model (a dense block, two sparse ones: router, top-2 of 4 experts, a
    shared expert) over one 16-token sequence: count_flops' forward equals FlopCounterMode on
    transformers' model with eager experts (each token through its 2 experts)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from modelplan.count.flops import count_flops
    from modelplan.specs.training import TrainingSpec

    data = CASES["unlimited_ocr"]
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        hf_eager(data)(input_ids=torch.randint(0, 300, (1, 16)), use_cache=False)
    assert count_flops(from_hf_config(data), TrainingSpec(seq_len=16, global_batch=1)).forward == counter.get_total_flops()


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
