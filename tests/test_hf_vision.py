"""Vision-language composites read whole (modelplan/specs/hf_vision.py, modelplan/count/vision.py):
each published fixture and variant counts exactly to transformers 5.24's own module built on the
meta device (total, and the vision tower + projector alone); a tower's forward FLOPs per image
equal what torch's FlopCounterMode counts running transformers' tower and projector on one image;
the tower's weights sit on the first pipeline stage; `verify` runs (tests/test_hf_cli.py runs
`count` and `plan`); bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_reference import config, hf_eager_composite, hf_total_and_part
from _hf_vision_cases import TEXT, VISION_FIXTURES, VISION_PARAM_PREFIXES, VISION_VARIANTS, composite
from modelplan.count.params import count_params
from modelplan.count.vision import vision_forward_flops
from modelplan.errors import SpecError
from modelplan.specs.hf import from_hf_config

IDS = [f"{d['model_type']}-{i}" for i, d in enumerate(VISION_VARIANTS)]


def _counts(data: dict):
    return count_params(from_hf_config(data, "config.json"))


def hf_total_and_vision(data: dict) -> tuple[int, int]:
    """sum(p.numel()) of transformers' composite, and of its tower + projector parameters."""
    return hf_total_and_part(data, VISION_PARAM_PREFIXES)


def _mine(data: dict) -> tuple[int, int]:
    c = _counts(data)
    return c.total, c.breakdown.get("vision", 0)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("name", VISION_FIXTURES)
def test_published_composites_equal_transformers(name):
    """Published configs: total and vision group equal transformers' composite (meta device)."""
    data = config(name)
    assert _mine(data) == hf_total_and_vision(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", VISION_VARIANTS, ids=IDS)
def test_variants_equal_transformers(data):
    """Variants switching each option the vision mappers read count exactly, total and tower."""
    assert _mine(data) == hf_total_and_vision(data)


@pytest.mark.parametrize(("name", "billions", "digits"), [
    ("qwen2.5-vl-7b-instruct", 8.29, 2),  # Hub safetensors metadata, Qwen/Qwen2.5-VL-7B-Instruct: 8.29B
    ("qwen2.5-vl-3b-instruct", 3.75, 2),  # Hub safetensors metadata, Qwen/Qwen2.5-VL-3B-Instruct: 3.75B
    ("qwen2-vl-7b-instruct", 8.29, 2),  # Hub safetensors metadata, Qwen/Qwen2-VL-7B-Instruct: 8.29B
    ("qwen3-vl-8b-instruct", 8.77, 2),  # Hub safetensors metadata, Qwen/Qwen3-VL-8B-Instruct: 8.77B
    ("llava-1.5-7b-hf", 7.06, 2),  # Hub safetensors metadata, llava-hf/llava-1.5-7b-hf: 7.06B
    ("llava-v1.6-mistral-7b-hf", 7.57, 2),  # Hub safetensors metadata, llava-hf/llava-v1.6-mistral-7b-hf: 7.57B
    ("qwen3-vl-30b-a3b-instruct", 31.1, 1),  # Hub safetensors metadata, Qwen/Qwen3-VL-30B-A3B-Instruct: 31.1B
    ("llama-4-scout-17b-16e-instruct", 109, 0),  # Meta Llama 4 model card: Scout 109B total parameters
])
def test_published_totals_rounded(name, billions, digits):
    """The fixtures count to their publishers' totals (independent of transformers) to the stated
    precision (within one unit of the last digit: cards round or truncate)."""
    assert abs(_counts(config(name)).total / 1e9 - billions) < 10 ** -digits


def hf_image_flops(data: dict, image: int) -> int:
    """FLOPs FlopCounterMode counts for one image through transformers' tower and projector
    (eager attention, CPU, float32, no grad)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    cfg, model = hf_eager_composite(data)
    v, kind = cfg.vision_config, data["model_type"]
    counter = FlopCounterMode(display=False)
    with torch.no_grad():
        if kind.startswith(("qwen", "glm4v")):  # flattened patches (n, C t p p) and their (t, h, w) grid
            p, grid = v.patch_size, image // v.patch_size
            pixels = torch.randn(grid * grid, 3 * v.temporal_patch_size * p * p)
            with counter:
                model.model.get_image_features(pixel_values=pixels, image_grid_thw=torch.tensor([[1, grid, grid]]))
        elif kind == "llama4":  # the projector runs outside get_image_features
            with counter:
                out = model.get_image_features(pixel_values=torch.randn(1, 3, image, image)).last_hidden_state
                model.multi_modal_projector(out.reshape(-1, out.shape[-1]))
        else:
            pixels = torch.randn(1, 3, image, image)
            if kind in ("idefics3", "smolvlm"):
                pixels = pixels[:, None]  # (batch, images, C, H, W)
            with counter:
                model.model.get_image_features(pixel_values=pixels)
    return counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", [d for d in VISION_VARIANTS if d["model_type"] != "llava_next"],
                         ids=[i for i, d in zip(IDS, VISION_VARIANTS) if d["model_type"] != "llava_next"])
def test_forward_flops_per_image_equal_flop_counter(data):
    """count.vision's forward FLOPs of one image equal FlopCounterMode on transformers' tower and
    projector (patch conv, attention incl. Qwen2.5-VL's windows, MLPs, mergers, deepstack,
    pixel-shuffle adapters)."""
    spec = from_hf_config(data)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == hf_image_flops(data, spec.vision.image_size)


def test_window_attention_changes_flops_not_params():
    """Qwen2.5-VL's window attention (8 x 8-patch windows: 64 keys per query) lowers the score FLOPs
    only: all-full-attention blocks count 2 * 2 * t^2 * h more per windowed block."""
    base = VISION_VARIANTS[2]
    full = {**base, "vision_config": {**base["vision_config"], "fullatt_block_indexes": [0, 1, 2]}}
    a, b = from_hf_config(base).vision, from_hf_config(full).vision
    t, h = a.tokens, a.hidden  # 224 px / 14 = 16 x 16 patches; windows of 112 / 14 = 8 x 8 patches
    extra = 2 * 2 * t * (t - 64) * h * 2  # two windowed blocks turned full
    assert sum(vision_forward_flops(b, 256).values()) - sum(vision_forward_flops(a, 256).values()) == extra
    assert _counts(base).total == _counts(full).total


def test_tower_weights_are_on_the_first_pipeline_stage():
    """The `vision` unit (its count: the vision group) is the first stage's first unit; the first
    rank holds exactly that many more weights than the same model without a tower."""
    from modelplan.plan.shard import rank_elements, unit_shards
    from modelplan.plan.stages import stage_units
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    spec = from_hf_config(config("qwen2.5-vl-3b-instruct"))
    bare = spec.model_copy(update={"vision": None})
    plan, training = Plan(pp=4), TrainingSpec(global_batch=8, seq_len=128)
    assert stage_units(spec, 4)[0][0] == "vision" and all("vision" not in s for s in stage_units(spec, 4)[1:])
    assert unit_shards(spec, plan)["vision"].numel == count_params(spec).breakdown["vision"]
    with_tower, without = rank_elements(spec, plan, training), rank_elements(bare, plan, training)
    assert with_tower[0].weights - without[0].weights == count_params(spec).breakdown["vision"]
    assert [r.weights for r in with_tower[1:]] == [r.weights for r in without[1:]]


def test_text_model_alone_counts_as_its_own_model_type():
    """The composite less its vision group is the text_config counted alone (the text-only path:
    a text_config saved with model_type qwen3_vl_text)."""
    data = config("qwen3-vl-8b-instruct")
    whole = _counts(data)
    text = _counts({**data["text_config"], "architectures": ["Qwen3VLForConditionalGeneration"],
                    "tie_word_embeddings": False})
    assert whole.total - whole.breakdown["vision"] == text.total


def test_text_only_hint_names_the_text_model_type():
    """A refused composite whose text model is supported says which model_type counts it alone."""
    with pytest.raises(SpecError, match=r"'dots3_note': its vision and audio towers .* not modelled; .* model_type 'dots3_note_text'"):
        from_hf_config({"model_type": "dots3_note"}, "config.json")


@pytest.mark.parametrize(("data", "message"), [
    (composite("internvl", "InternVLForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
               vision_config={"image_size": [448, 224]}), "vision_config.image_size: only square sizes"),
    (composite("internvl", "InternVLForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
               vision_config={"use_mask_token": True}), "vision_config.use_mask_token: true is not supported"),
    (composite("internvl", "InternVLForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
               vision_config={"norm_type": "batch_norm"}), "vision_config.norm_type: unsupported 'batch_norm'"),
    (composite("llava", "LlavaForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
               vision_config={"model_type": "dinov2"}), "vision_config.model_type: unsupported 'dinov2'"),
    (composite("llava", "LlavaForConditionalGeneration", text_config={**TEXT, "model_type": "no_such_type"}),
     "text_config.model_type: unsupported 'no_such_type'"),
    (composite("llava", "LlavaForConditionalGeneration", text_config={**TEXT, "model_type": "t5", "d_ff": 64,
                                                                         "d_model": 32, "num_heads": 2}),
     "text_config.model_type: 't5' is not a decoder"),
    (composite("llava", "LlavaForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
               vision_feature_layer="last"), "vision_feature_layer: expected an integer"),
    (composite("llama4", "Llama4ForConditionalGeneration", text_config=TEXT,
               vision_config={"pixel_shuffle_ratio": 0.3}), "vision_config.pixel_shuffle_ratio: 1 / ratio^2"),
    (composite("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", **TEXT,
               vision_config={"depth": 2.5}), "vision_config.depth: expected an integer"),
    (composite("qwen3_vl", "Qwen3VLForConditionalGeneration", text_config=TEXT,
               vision_config={"deepstack_visual_indexes": "8"}), "vision_config.deepstack_visual_indexes: expected a list"),
])
def test_bad_vision_fields_are_one_line_errors(data, message):
    with pytest.raises(SpecError) as exc:
        from_hf_config(data, "config.json")
    assert f"config.json: {message}" in str(exc.value) and "\n" not in str(exc.value)






def test_verify_runs_the_text_step_and_names_the_tower():
    """A composite verifies as its text model (a text-only step runs no tower: transformers skips
    it without pixel_values) and verify says the tower was left out, as for Gemma 3."""
    from modelplan.execute.verify import verify
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    report = verify(from_hf_config(config("qwen2.5-vl-3b-instruct")), TrainingSpec(global_batch=4, seq_len=8),
                    Plan(tp=2, pp=2))
    assert not [r.name for r in report.rows if not r.passed]
    assert any("vision tower" in note for note in report.notes)
