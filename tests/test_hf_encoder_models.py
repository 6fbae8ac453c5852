"""Standalone image and audio encoders (modelplan/specs/hf_vision_models.py, hf_audio.py; the
input front-ends of count/encoder_inputs.py): total parameters equal sum(p.numel()) of
transformers 5.24's own module (the class `architectures` names, built on the meta device) for a
small config per head class and for each type's config class defaults; forward FLOPs of one
image / one clip equal FlopCounterMode on that module; `count` / `plan --gpus 8` run; bad fields
are one-line errors naming them."""

from __future__ import annotations

import json

import pytest

from _hf_encoder_cases import (AUDIO_CASES, DEFAULT_CLASSES, IMAGE_CASES, PAIR_CASES, PAIR_CLASSIFIERS, RESNET_CASES,
                               hf_forward_flops)
from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults, runner
from _hf_reference import hf_numel
from modelplan.cli import app
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.count.vision import vision_forward_flops
from modelplan.errors import SpecError
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

IMAGES = IMAGE_CASES + PAIR_CLASSIFIERS
CASES = IMAGES + PAIR_CASES + AUDIO_CASES + RESNET_CASES
IDS = [f"{d['architectures'][0]}-{i}" for i, d in enumerate(CASES)]


def _total(data: dict) -> int:
    return count_params(from_hf_config(data, "config.json")).total


def _forward(data: dict, seq_len: int) -> int:
    """modelplan's forward FLOPs of one sequence (an image, a clip of seq_len frames, a text; a
    pair's text tower alone: no image, images_per_seq 0)."""
    return count_flops(from_hf_config(data), TrainingSpec(global_batch=1, seq_len=seq_len, images_per_seq=0)).forward


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_configs_equal_transformers(data):
    """Each small config counts exactly as transformers builds the class it names."""
    assert _total(data) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(DEFAULT_CLASSES))
def test_class_defaults_equal_transformers(model_type):
    """Each type's config class defaults (AutoConfig.for_model) count exactly as its base model."""
    data = {**class_defaults(model_type), "architectures": [DEFAULT_CLASSES[model_type]]}
    assert _total(data) == hf_numel(data)


def test_published_sizes():
    """Published totals: torchvision's vit_b_16 (ViT-B/16, 1000 classes: ViTForImageClassification's
    modules) 86,567,656 and resnet50 25,557,032 (torchvision.models docs, num_params); wav2vec 2.0
    BASE 95 M (Baevski et al. 2020, sec. 4.2; the pretrained encoder, Wav2Vec2Model), to 1 %."""
    labels = {"num_labels": 1000}
    assert _total({"model_type": "vit", "architectures": ["ViTForImageClassification"], **labels}) == 86_567_656
    assert _total({"model_type": "resnet", "architectures": ["ResNetForImageClassification"], **labels}) == 25_557_032
    assert abs(_total({"model_type": "wav2vec2"}) - 95e6) < 0.01 * 95e6


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", IMAGES, ids=IDS[:len(IMAGES)])
def test_image_forward_flops_equal_flop_counter(data):
    """Forward FLOPs of one image (patch conv, blocks, pooler / classifiers / pooling head) equal
    FlopCounterMode on transformers' module."""
    tokens = from_hf_config(data).inputs.tokens
    assert _forward(data, tokens) == hf_forward_flops(data, tokens)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", PAIR_CASES, ids=[d["model_type"] for d in PAIR_CASES])
def test_pair_towers_flops_equal_flop_counter(data):
    """An image-text pair: count.vision's image FLOPs equal get_image_features (tower + projection),
    the text tower's forward of 9 tokens equals get_text_features."""
    spec = from_hf_config(data)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == hf_forward_flops(data, 0, "image")
    assert _forward(data, 9) == hf_forward_flops(data, 9, "text")


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", AUDIO_CASES, ids=[d["architectures"][0] for d in AUDIO_CASES])
def test_audio_forward_flops_equal_flop_counter(data):
    """Forward FLOPs of the shortest clip giving 7 frames (feature convs, projection, positional
    conv, blocks, head) equal FlopCounterMode on transformers' module."""
    assert _forward(data, 7) == hf_forward_flops(data, 7)


@pytest.mark.torch
@pytest.mark.slow
def test_audio_flops_per_second_equal_flop_counter():
    """count's forward FLOPs of one second (16,000 samples: 799 frames of the small convs) equal
    FlopCounterMode on transformers' Wav2Vec2ForCTC over 16,000 samples."""
    from modelplan.count.encoder_input_report import per_input_document

    data = AUDIO_CASES[1]
    doc = per_input_document(from_hf_config(data), 0, 7, 1)
    assert doc["frames_per_second"] == 799
    assert doc["forward_flops_per_second"] == hf_forward_flops(data, 0, samples=16000)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", RESNET_CASES, ids=[f"resnet-{i}" for i in range(len(RESNET_CASES))])
def test_resnet_conv_and_linear_flops_equal_flop_counter(data):
    """A ResNet as the network stack: its convolutions' FLOPs on one 224 x 224 image equal
    FlopCounterMode's aten.convolution on transformers' module, and the classifier's its aten.addmm
    plus one FLOP per bias element (the network convention counts the bias add)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import hf_class, hf_config

    flops = count_flops(from_hf_config(data), TrainingSpec(global_batch=1, seq_len=1)).breakdown
    model = hf_class(data)._from_config(hf_config(data)).eval()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(pixel_values=torch.randn(1, 3, 224, 224))
    ops = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    assert sum(v for k, v in flops.items() if k.endswith("convolution")) == ops["aten.convolution"]
    labels = data["num_labels"] if data["architectures"][0].endswith("Classification") else 0
    assert flops.get("classifier", 0) == ops.get("aten.addmm", 0) + labels


def test_clip_lengths_invert_the_feature_encoder():
    """The shortest input for n frames gives n frames, one sample fewer gives n - 1 (the default
    convs: 400 samples = 25 ms is one frame, 320 more per frame: wav2vec 2.0 paper sec. 2)."""
    audio = from_hf_config({"model_type": "wav2vec2"}).inputs
    samples = audio.lengths(49)[0]
    assert samples == 400 + 48 * 320
    assert audio.frames(samples) == 49 and audio.frames(samples - 1) == 48
    assert audio.frames(16000) == 49


@pytest.mark.parametrize("data", CASES[::3], ids=IDS[::3])
def test_count_and_plan_run(data, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` succeed on the config.json."""
    assert_count_plan(tmp_path, data)


def test_count_prints_per_image_units(tmp_path):
    """`count` on a ViT prices one image a sequence (197 tokens = 196 patches + cls) and says so."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "vit", "architectures": ["ViTForImageClassification"]}))
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code == 0, result.output
    assert "196 patches" in result.output and "197" in result.output
    doc = json.loads(runner.invoke(app, ["count", str(path), "--json"]).stdout)
    assert doc["inputs"]["tokens"] == 197 and doc["training"]["seq_len"] == 197


def test_count_prints_per_second_of_audio(tmp_path):
    """`count` on wav2vec2 says how many frames a second of 16 kHz audio is (49)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "wav2vec2", "architectures": ["Wav2Vec2ForCTC"]}))
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code == 0, result.output
    assert "49 frames" in result.output


@pytest.mark.parametrize("engine", ["megatron", "deepspeed", "torchtitan"])
def test_engine_exports_refuse_image_encoders(engine, tmp_path):
    """An image encoder's plan exports as json; an engine's launch config (token models only) is a
    one-line refusal naming the inputs."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "vit"}))
    plan = runner.invoke(app, ["plan", str(path), "--gpus", "8", "--json"])
    assert plan.exit_code == 0, plan.output
    (tmp_path / "plan.json").write_text(plan.stdout)
    result = runner.invoke(app, ["export", str(tmp_path / "plan.json"), "--to", engine])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and "reads images or audio (inputs)" in lines[0], result.output
    assert runner.invoke(app, ["export", str(tmp_path / "plan.json"), "--to", "json"]).exit_code == 0


def test_pairs_print_one_pooled_embedding_per_image(tmp_path):
    """CLIP's visual_projection and SigLIP's pooling head give one embedding per image, not a text
    position per patch (CLIPModel.get_image_features / SiglipModel.get_image_features)."""
    for model_type in ("clip", "siglip"):
        path = tmp_path / f"{model_type}.json"
        path.write_text(json.dumps({"model_type": model_type}))
        result = runner.invoke(app, ["count", str(path)])
        assert result.exit_code == 0 and "-> 1 pooled embedding" in result.output, result.output


def test_image_seq_len_must_be_one_image():
    """An image is exactly its tokens: another seq_len is a one-line error saying the right one."""
    spec = from_hf_config({"model_type": "vit"})
    with pytest.raises(SpecError, match=r"seq_len \(2048\) must be 197"):
        count_flops(spec, TrainingSpec(global_batch=1, seq_len=2048))


@pytest.mark.parametrize(("data", "message"), [
    ({"model_type": "vit", "architectures": ["ViTForMaskedImageModeling"]}, "architectures: 'ViTForMaskedImageModeling' not"),
    ({"model_type": "vit", "patch_size": 300}, "patch_size: 300 exceeds image_size 224"),
    ({"model_type": "vit", "hidden_size": "big"}, "hidden_size"),
    ({"model_type": "deit", "architectures": ["DeiTForImageClassification"], "num_labels": 0}, "num_labels: 0"),
    ({"model_type": "siglip2_vision_model", "num_patches": 15}, "num_patches: must be a square"),
    ({"model_type": "dinov3_vit", "query_bias": False}, "key_bias: query_bias False / key_bias False / value_bias True"),
    ({"model_type": "clip", "text_config": [1]}, "text_config: expected an object"),
    ({"model_type": "wav2vec2", "feat_extract_norm": "batch"}, "feat_extract_norm: unsupported 'batch'"),
    ({"model_type": "wav2vec2", "add_adapter": True}, "add_adapter: true is not modelled"),
    ({"model_type": "wav2vec2", "num_conv_pos_embedding_groups": 5}, "num_conv_pos_embedding_groups: 5 must divide"),
    ({"model_type": "hubert", "conv_pos_batch_norm": True}, "conv_pos_batch_norm"),
    ({"model_type": "wav2vec2", "conv_kernel": [10, 3]}, "conv_kernel"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A field the mappers cannot read is a one-line SpecError naming it."""
    assert_one_line_error(data, message)
