"""The `inputs` section of `modelplan count` for an image / audio encoder (`TransformerSpec.inputs`):
what one sequence is and its forward FLOPs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.encoder_inputs import conv_flops
from modelplan.count.flops import count_flops
from modelplan.specs.training import TrainingSpec

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def per_input_document(spec: "TransformerSpec", forward: int, seq_len: int, batch: int) -> dict | None:
    """`modelplan count`'s `inputs` section: what one sequence is (an image: its patches; a clip:
    its frames) and its forward FLOPs (the step's forward / batch); for audio also the forward
    FLOPs of one second (sample_rate samples, through the convs at their real lengths)."""
    x = spec.inputs
    if x is None:
        return None
    per_sequence = forward // batch
    if x.modality == "image":
        return {"unit": "image", "image_size": x.image_size, "input_size": x.input_size or [x.image_size] * 2,
                "patches": x.patches, "prefix_tokens": x.prefix_tokens,
                "tokens": x.tokens, "forward_flops_per_image": per_sequence}
    if x.modality == "features":  # filter-bank frames: one second is frames_per_second encoder frames
        second = count_flops(spec, TrainingSpec(global_batch=1, seq_len=x.frames_per_second)).forward
        return {"unit": "audio_features", "frames_per_second": x.frames_per_second,
                "forward_flops_per_sequence": per_sequence, "forward_flops_per_second": second}
    frames = x.frames(x.sample_rate)
    tokens = max(frames // x.squeeze, 1)  # SEW: the blocks' squeezed tokens of one second
    second = count_flops(spec, TrainingSpec(global_batch=1, seq_len=tokens)).forward
    lengths = [x.sample_rate]
    for k, s in zip(x.conv_kernel, x.conv_stride):  # each conv's output length on one second
        lengths.append((lengths[-1] - k) // s + 1)
    second += conv_flops(x, lengths) - conv_flops(x, x.lengths(tokens * x.squeeze))
    return {"unit": "audio", "sample_rate": x.sample_rate, "frames_per_second": frames,
            "samples_per_sequence": x.lengths(seq_len * x.squeeze)[0], "forward_flops_per_sequence": per_sequence,
            "forward_flops_per_second": second}
