"""The vision tower in a training step (modelplan/count/vision_step.py, modelplan/plan/vision_tower.py):
the plan's model FLOPs are the text part plus images x 3 x the tower's forward (trained) or 1 x
(frozen under an adapter fine-tune), both measured by torch's FlopCounterMode on transformers' own
modules (text: one forward + backward on input_ids; tower: get_image_features on one image); the
first stage keeps the tower's activations; `--images-per-seq` is validated in one line."""

from __future__ import annotations

import pytest

from _hf_encoder_cases import PAIR_CASES, hf_forward_flops
from _hf_n17_checks import runner
from _hf_reference import hf_training_flops
from _hf_vision_cases import VISION_VARIANTS
from modelplan.cli import app
from modelplan.comm.clusters import load_cluster
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.count.vision import vision_activation_bytes, vision_forward_flops, vision_params
from modelplan.errors import SpecError
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.vision_tower import tower_block_spec, tower_seconds
from modelplan.specs.finetune import FinetuneSpec
from modelplan.specs.hf import from_hf_config
from modelplan.specs.load import load_model
from modelplan.specs.training import TrainingSpec

LLAVA = next(d for d in VISION_VARIANTS if d["model_type"] == "llava" and d["text_config"]["model_type"] == "llama")
"""A tiny LLaVA: two Llama blocks, a two-block CLIP tower of 56 x 56 images, the two-layer projector."""
A100 = load_cluster("dgx-a100")
BATCH, SEQ = 2, 24


def _evaluate(data: dict, point: PlanPoint, **training):
    spec = from_hf_config(data)
    return Evaluator(spec, TrainingSpec(global_batch=BATCH, seq_len=SEQ, **training), A100).evaluate(point)


def hf_tower_forward(data: dict) -> int:
    """FlopCounterMode on transformers' get_image_features for one image (tower + projector)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import hf_eager_composite

    cfg, model = hf_eager_composite(data)
    v = cfg.vision_config
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.model.get_image_features(pixel_values=torch.randn(1, 3, v.image_size, v.image_size))
    return counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("images", [1, 3])
def test_plan_flops_are_text_plus_three_tower_forwards(images):
    """Plan model FLOPs = FlopCounterMode's text-only training step + B x images x 3 x its tower
    forward (backward 2 x forward: input and weight gradients, PaLM App. B)."""
    text = hf_training_flops(LLAVA, BATCH, SEQ)
    tower = hf_tower_forward(LLAVA)
    ev = _evaluate(LLAVA, PlanPoint(tp=1, pp=1, dp=1, micro_batch=1), images_per_seq=images)
    assert ev.model_flops == text + BATCH * images * 3 * tower


@pytest.mark.torch
@pytest.mark.slow
def test_frozen_tower_costs_one_forward():
    """Under LoRA the tower is frozen and its input is pixels: autograd runs no backward through it
    (PyTorch autograd, requires_grad), so each image adds exactly one FlopCounterMode forward."""
    lora = FinetuneSpec(method="lora")
    point = PlanPoint(tp=1, pp=1, dp=1, micro_batch=1)
    with_images = _evaluate(LLAVA, point, images_per_seq=2, finetune=lora).model_flops
    without = _evaluate(LLAVA, point, images_per_seq=0, finetune=lora).model_flops
    assert with_images - without == BATCH * 2 * hf_tower_forward(LLAVA)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", PAIR_CASES[:2], ids=[d["model_type"] for d in PAIR_CASES[:2]])
def test_pair_batch_is_images_and_texts(data):
    """An image-text pair: a batch of B pairs is B images and B texts, so count's training FLOPs
    are 3 x (B texts through get_text_features + B images through get_image_features)."""
    spec = from_hf_config(data)
    counted = count_flops(spec, TrainingSpec(global_batch=BATCH, seq_len=9)).model
    assert counted == 3 * BATCH * (hf_forward_flops(data, 9, "text") + hf_forward_flops(data, 0, "image"))


def test_first_stage_keeps_the_tower_activations():
    """pp 2, 1F1B: stage 0 holds pp = 2 micro-batches in flight (warm-up of pipeline rank 0), each
    keeping micro_batch x images x count.vision's activation bytes per image; the last stage
    (no tower) is unchanged."""
    spec = from_hf_config(LLAVA)
    point = PlanPoint(tp=1, pp=2, dp=1, micro_batch=1)
    one = _evaluate(LLAVA, point, images_per_seq=1)
    none = _evaluate(LLAVA, point, images_per_seq=0)
    per_image = vision_activation_bytes(spec.vision, spec.hidden, 2)  # bf16
    assert one.memory_first.activations - none.memory_first.activations == 2 * 1 * per_image
    assert one.memory_last.activations == none.memory_last.activations


def test_frozen_tower_keeps_nothing_and_runs_no_backward():
    """A frozen tower: no backward seconds, no activations kept for one."""
    spec = from_hf_config(LLAVA)
    training = TrainingSpec(global_batch=BATCH, seq_len=SEQ, finetune=FinetuneSpec(method="lora"))
    ev = Evaluator(spec, training, A100)
    fwd_s, bwd_s = tower_seconds(ev.spec, training, ev.roofline, 1, "none", ev.software)
    assert fwd_s > 0 and bwd_s == 0
    point = PlanPoint(tp=1, pp=2, dp=1, micro_batch=1)
    lora = FinetuneSpec(method="lora")
    assert (_evaluate(LLAVA, point, images_per_seq=4, finetune=lora).memory_first.activations
            == _evaluate(LLAVA, point, images_per_seq=0, finetune=lora).memory_first.activations)


def test_full_recompute_adds_less_than_a_forward():
    """Full recompute re-runs the tower's blocks (not its patch conv or projector): the backward
    grows by less than one whole forward; no images, no seconds."""
    spec = from_hf_config(LLAVA)
    ev = Evaluator(spec, TrainingSpec(global_batch=BATCH, seq_len=SEQ, framework="fsdp"), A100)
    f1, b1 = tower_seconds(ev.spec, ev.training, ev.roofline, 1, "none", ev.software)
    _, full = tower_seconds(ev.spec, ev.training, ev.roofline, 1, "full", ev.software)
    assert b1 < full < b1 + f1
    none = ev.training.model_copy(update={"images_per_seq": 0})
    assert tower_seconds(ev.spec, none, ev.roofline, 4, "none", ev.software) == (0.0, 0.0)


def test_tower_block_spec_holds_the_tower_blocks():
    """The encoder stack the tower's time is priced on has exactly the tower blocks' parameters
    (count.vision's `tower/layers`, pinned to transformers' numel in tests/test_hf_vision.py)."""
    spec = from_hf_config(LLAVA)
    blocks = count_params(tower_block_spec(spec)).breakdown["layers"]
    assert blocks == vision_params(spec.vision, spec.hidden)["tower/layers"]


def test_step_flops_per_image_in_count():
    """count's training FLOPs grow by 3 x the per-image forward it reports (`vision` section) per image."""
    spec = from_hf_config(LLAVA)
    per_image = sum(vision_forward_flops(spec.vision, spec.hidden).values())
    two = count_flops(spec, TrainingSpec(global_batch=BATCH, seq_len=SEQ, images_per_seq=2)).model
    zero = count_flops(spec, TrainingSpec(global_batch=BATCH, seq_len=SEQ, images_per_seq=0)).model
    assert two - zero == 3 * BATCH * 2 * per_image


def test_images_on_a_text_model_are_refused():
    """images_per_seq > 0 on a model without a vision tower is a SpecError naming the field."""
    with pytest.raises(SpecError, match=r"images_per_seq \(2\).*no vision tower"):
        count_flops(load_model("gpt2"), TrainingSpec(images_per_seq=2, seq_len=128))


@pytest.mark.parametrize(("args", "message"), [
    (["plan", "gpt2", "--gpus", "8", "--images-per-seq", "2"], "no vision tower"),
    (["count", "gpt2", "--images-per-seq", "1"], "no vision tower"),
])
def test_cli_images_errors_are_one_line(args, message):
    """The CLI prints one line naming --images-per-seq's field and exits non-zero, no traceback."""
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_cli_negative_images_are_refused():
    """--images-per-seq -1 is refused by the option's range (non-zero exit)."""
    result = runner.invoke(app, ["plan", "gpt2", "--gpus", "8", "--images-per-seq", "-1"])
    assert result.exit_code != 0 and "Traceback" not in result.output


@pytest.mark.parametrize(("framework", "recomputed"), [("fsdp", True), ("megatron", False)])
def test_full_recompute_reruns_the_tower_blocks_except_on_megatron(framework, recomputed):
    """Hardware - model FLOPs under full recompute grow per image by the tower blocks' forward
    (not the patch conv or projector) where the engine recomputes the tower (transformers'
    gradient_checkpointing_enable reaches the vision encoder); Megatron-LM's
    examples/multimodal/model.py clears the vision recompute unless --recompute-vision: nothing."""
    spec = from_hf_config(LLAVA)
    leaves = vision_forward_flops(spec.vision, spec.hidden)
    blocks = sum(v for k, v in leaves.items() if k.startswith("tower/layers/"))

    def extra(images: int) -> int:
        c = count_flops(spec, TrainingSpec(global_batch=BATCH, seq_len=SEQ, images_per_seq=images, recompute="full",
                                           framework=framework))
        return c.hardware - c.model

    assert extra(1) - extra(0) == (BATCH * blocks if recomputed else 0)
