"""A vision tower's share of one training step: images per sequence, whether the tower trains, and
its FLOPs over the step's images (`count.vision` per image, times the images the batch carries).

- Images: `TrainingSpec.images_per_seq` per sequence (None: 1 for a model with a tower: a VLM's
  image in its sequence; an image-text pair's batch of B pairs is B images and B texts).
- Trained tower: forward + backward, the backward 2 x forward (input and weight gradient of every
  matmul, the count convention of `count.flops`); recompute 'full' re-runs the tower's blocks'
  forward, 'selective' their attention scores (QK^T, AV), as for the text blocks, except on
  Megatron (`tower_recompute`).
- Frozen tower: a fine-tune with adapters (LoRA / QLoRA) trains adapters inside the text blocks
  only (`plan/finetune.py` refuses adapters outside them), so the tower and projector are frozen.
  Their input is pixels (no gradient), so autograd builds no graph through them and runs no
  backward there (PyTorch autograd mechanics, "Setting requires_grad": a subgraph none of whose
  inputs or parameters require grad is excluded from the backward): forward only, nothing kept
  for a backward, nothing recomputed. This is also Megatron-core's `LLaVAModel.freeze(...,
  freeze_vision_model=True)`: requires_grad False on the vision model's parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.vision import vision_activation_bytes, vision_forward_flops
from modelplan.errors import SpecError

if TYPE_CHECKING:
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec


def images_per_sequence(spec: "TransformerSpec", training: "TrainingSpec") -> int:
    """Images one sequence carries (`TrainingSpec.images_per_seq`; None: 1 with a tower, 0
    without); a one-line error for images on a model without a vision tower."""
    n = training.images_per_seq
    has_tower = getattr(spec, "vision", None) is not None
    if n is None:
        return 1 if has_tower else 0
    if n > 0 and not has_tower:
        raise SpecError(f"images_per_seq ({n}): {getattr(spec, 'name', 'the model')} has no vision tower "
                        "(only a composite with a vision_config runs images)")
    return n


def tower_frozen(training: "TrainingSpec") -> bool:
    """The tower and projector do not train: an adapter fine-tune (module docstring)."""
    ft = training.finetune
    return ft is not None and ft.uses_adapters


def tower_recompute(recompute: str, framework: str) -> str:
    """The recompute the tower runs under the step's: the same, except on Megatron, whose
    examples/multimodal/model.py clears the vision config's recompute unless --recompute-vision
    ("Toggle --recompute* for the vision and language model separately"): none there."""
    return "none" if framework == "megatron" else recompute


def tower_recompute_flops(flops: dict[str, int], recompute: str) -> int:
    """Forward FLOPs the recompute re-runs for one image (`flops`: `vision_forward_flops`'s leaves):
    full, every tower block (not the patch embedding, pooling head or projector, which sit outside
    the blocks as the text model's embedding and head do); selective, the blocks' attention scores
    (Korthikanti et al. 2022, sec. 5)."""
    if recompute == "full":
        return sum(v for k, v in flops.items() if k.startswith("tower/layers/"))
    if recompute == "selective":
        return flops.get("tower/layers/attention/score", 0)
    return 0


def vision_step_flops(spec: "TransformerSpec", training: "TrainingSpec") -> tuple[dict[str, int], int, int]:
    """(forward leaves keyed relative to `vision/`, extra model FLOPs beyond 3 x forward, recompute
    FLOPs) of the tower over the step's global_batch x images_per_seq images. The extra is
    -2 x forward for a frozen tower (forward only); 0 when it trains."""
    images = training.global_batch * images_per_sequence(spec, training)
    if images == 0:
        return {}, 0, 0
    per_image = vision_forward_flops(spec.vision, spec.hidden)
    leaves = {key: images * value for key, value in per_image.items()}
    if tower_frozen(training):
        return leaves, -2 * sum(leaves.values()), 0
    return leaves, 0, images * tower_recompute_flops(per_image, tower_recompute(training.recompute, training.framework))


def tower_activation_bytes(spec: "TransformerSpec", training: "TrainingSpec", images: int, recompute: str) -> int:
    """Bytes the tower keeps for the backward of `images` images: `count.vision`'s per-image bytes
    (no recompute; 'selective' saves nothing more there: the fused attention keeps no scores);
    under 'full' each block keeps only its input (t x h), plus the pixels; 0 when frozen."""
    vision = spec.vision
    if images == 0 or vision is None or tower_frozen(training):
        return 0
    d = training.dtype_bytes
    if recompute == "full":
        pixels = vision.patches * vision.channels * vision.temporal_patch * vision.patch_size ** 2
        return images * d * (vision.layers * vision.tokens * vision.hidden + pixels)
    return images * vision_activation_bytes(vision, spec.hidden, d)
