"""`--images-per-seq` of `modelplan count` and `modelplan plan`: images each sequence sends through
the model's vision tower (`TrainingSpec.images_per_seq`; default 1 for a model with a tower), which
the FLOPs count and the planner price on the first pipeline stage (`modelplan.plan.vision_tower`).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

ImagesPerSeqOpt = Annotated[Optional[int], typer.Option(
    "--images-per-seq", min=0, max=2**16,
    help="Vision-language models and image-text pairs: images per sequence through the vision tower "
         "(default: 1 with a tower).")]


def check_images(spec, training) -> None:
    """A one-line error for images on a model without a vision tower (`count.vision_step`)."""
    from modelplan.count.vision_step import images_per_sequence

    images_per_sequence(spec, training)
