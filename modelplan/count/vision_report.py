"""The `vision` section of `modelplan count`: per-image figures of a model's vision tower."""

from __future__ import annotations

from modelplan.count.params import with_parents
from modelplan.count.vision import image_tokens, vision_activation_bytes, vision_forward_flops

VISION_CONVENTION = (
    "one image of image_size x image_size pixels through the vision tower and projector: matmul "
    "FLOPs only, 2 per multiply-add, the patch conv as a matmul, every query seeing every token of "
    "its image (its window in windowed blocks); training = 3 x forward (tower trained); "
    "activations kept without recompute, fused attention; the step's flops above include "
    "images_per_seq images per sequence (count.vision_step)"
)


def vision_document(spec, dtype_bytes: int, images_per_seq: int = 1) -> dict | None:
    """Per-image figures of a model's vision tower for `modelplan count` (None without one)."""
    vision = spec.vision
    if vision is None:
        return None
    flops = with_parents(vision_forward_flops(vision, spec.hidden), ())
    forward = sum(value for key, value in flops.items() if "/" not in key)
    s2s = spec.seq2seq
    memory = s2s.cross_memory if s2s is not None else None  # BLIP, VisionEncoderDecoder: read by cross-attention
    return {
        "images_per_seq": images_per_seq,  # images each sequence sends through the tower (TrainingSpec)
        "input_unit": vision.input_unit or "image",  # an audio tower's clip (VisionSpec.input_unit)
        "image_size": vision.image_size,
        "patches_per_image": vision.patches,
        "tokens_per_image": memory or image_tokens(vision),
        "tokens_read_by": "cross_attention" if memory else "text_positions",
        "forward_flops_per_image": forward,
        "training_flops_per_image": 3 * forward,  # backward = 2 x forward (count.flops convention)
        "activation_bytes_per_image": vision_activation_bytes(vision, spec.hidden, dtype_bytes),
        "flops_breakdown": flops,
        "convention": VISION_CONVENTION,
    }
