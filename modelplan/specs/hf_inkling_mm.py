"""HF config mapper of the Inkling multimodal model (transformers 5.24 modeling_inkling.py,
InklingForConditionalGeneration): the inkling_text model (hf_inkling.py, its untied head), the
hierarchical-MLP vision encoder (InklingVisionModel) as the layers of a `VisionSpec.tower`, and
the dMel audio embeddings (InklingAudioModel: one table of n_mel_bins x mel_vocab_size rows of the
text width, summed over the bins of a frame, and an RMSNorm), counted as `vector` entries.

The HMLP encoder (`plan_out_scales`) grows a patch of temporal_patch_size x patch_size^2 pixels
from single pixels: its scales are (1, 1, 1, C), then per spatial prime factor of patch_size
(largest first) the cumulative side h with ceil(h^2 C / 64) x 64 channels, then per temporal
factor t with ceil(P^2 C t) x 64 channels (as transformers 5.24 computes it); each of the
n_layers + 1 points of a linspace over log(T P^2 C) takes the scale whose log(t h^2) is nearest
(argmin with n_layers >= the scales, else the optimal one-to-one assignment,
scipy.optimize.linear_sum_assignment), the first and last forced to the first and last scale.
Layer i folds the (t, h, h) ratio of its two scales into depth and runs a bias-free Linear to the
end scale's channels (the text width for the last), then RMSNorm and GELU (but the last); a final
RMSNorm. An image is priced as (DEFAULT_IMAGE_SIZE // patch_size)^2 patches, each position of a
scale a row."""

from __future__ import annotations

import math
from itertools import permutations
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_vision import DEFAULT_IMAGE_SIZE, _linear, _norm

_VISION = {"patch_size": 40, "temporal_patch_size": 2, "num_channels": 3, "n_layers": 24}
_AUDIO = {"n_mel_bins": 80, "mel_vocab_size": 256}
"""InklingVisionConfig / InklingAudioConfig defaults (transformers 5.24)."""

MAX_ASSIGNMENT = 9
"""Most scales searched exhaustively for the one-to-one assignment (n_layers < scales);
beyond it the config is refused rather than searched for minutes."""


def _prime_factors(n: int) -> list[int]:
    """modeling_inkling.prime_factors: ascending, with multiplicity."""
    out = []
    while n % 2 == 0:
        out.append(2)
        n //= 2
    p = 3
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 2
    return out + ([n] if n > 1 else [])


def _cumprod(values: list[int]) -> list[int]:
    out, acc = [], 1
    for v in values:
        acc *= v
        out.append(acc)
    return out


def plan_out_scales(v: HFConfig, temporal: int, patch: int, layers: int, channels: int) -> list[tuple[int, int, int]]:
    """(t, h, channels) of each of the layers + 1 scales (modeling_inkling.plan_out_scales)."""
    h = _cumprod(_prime_factors(patch)[::-1])
    t = _cumprod(_prime_factors(temporal)[::-1])
    scales = [(1, 1, channels)] + [(1, s, math.ceil(s * s * channels / 64) * 64) for s in h]
    scales += [(s, h[-1], h[-1] ** 2 * channels * s * 64) for s in t]  # torch.ceil(h[-1]^2 C t) x 64
    logs = [math.log(a * b * b) for a, b, _ in scales]
    top = math.log(patch * patch * temporal * channels)
    ideal = [top * i / layers for i in range(layers + 1)]
    cost = [[abs(x - y) for y in logs] for x in ideal]
    if layers >= len(scales):
        idx = [min(range(len(scales)), key=row.__getitem__) for row in cost]
    elif len(scales) <= MAX_ASSIGNMENT:  # the optimal one-to-one assignment of rows to scales
        idx = list(min(permutations(range(len(scales)), layers + 1),
                       key=lambda cols: sum(cost[r][col] for r, col in enumerate(cols))))
    else:
        raise SpecError(f"{v.source}: vision_config.n_layers: {layers} layers over {len(scales)} scales "
                        f"(more than {MAX_ASSIGNMENT}) is not modelled")
    idx[0], idx[-1] = 0, len(scales) - 1
    return [scales[i] for i in idx]


def hmlp_tower(v: HFConfig, text_hidden: int) -> dict:
    """InklingVisionModel as VisionSpec fields (module docstring)."""
    temporal, patch, channels = v.size("temporal_patch_size"), v.size("patch_size"), v.size("num_channels")
    if temporal < 2 or patch < 2:  # plan_out_scales then builds float or empty scales: transformers cannot build it
        raise SpecError(f"{v.source}: vision_config: temporal_patch_size ({temporal}) and patch_size ({patch}) must be "
                        f">= 2 (transformers 5.24 cannot build the encoder otherwise)")
    layers = v.size("n_layers")
    scales = plan_out_scales(v, temporal, patch, layers, channels)
    patches = (DEFAULT_IMAGE_SIZE // patch) ** 2
    tower = []
    for i, ((t0, h0, c0), (t1, h1, c1)) in enumerate(zip(scales[:-1], scales[1:])):
        if t1 % t0 or h1 % h0:
            raise SpecError(f"{v.source}: vision_config: scale {i} ({t0}, {h0}) does not divide scale {i + 1} "
                            f"({t1}, {h1})")
        last = i == layers - 1
        rows = patches * (temporal // t1) * (patch // h1) ** 2  # positions of the end scale in one image
        out = text_hidden if last else c1
        tower.append({**_linear(f"encoder_layers/{i}/projection", c0 * (t1 // t0) * (h1 // h0) ** 2, out, False),
                      "rows": rows})
        if not last:
            tower.append({**_norm(f"encoder_layers/{i}/layer_norm", out, "rmsnorm"), "rows": rows})
    tower.append({**_norm("final_norm", text_hidden, "rmsnorm"), "rows": patches})
    side = DEFAULT_IMAGE_SIZE // patch * patch
    return dict(layers=0, hidden=text_hidden, heads=1, ffn_hidden=1, patch_size=patch, image_size=side,
                channels=channels, tower=tower, connector=[])


def _inkling_mm(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """InklingForConditionalGeneration (module docstring)."""
    fields, _ = _text(c, text_mappers, "inkling_text")
    _, v = _sub(c, "vision_config", "inkling_vision")
    data = {**_VISION, **v.data}
    if "num_hidden_layers" in v.data and "n_layers" not in v.data:  # InklingVisionConfig.attribute_map
        data["n_layers"] = v.data["num_hidden_layers"]
    tower = hmlp_tower(HFConfig(data, v.source, v.path), fields["hidden"])
    _, a = _sub(c, "audio_config", "inkling_audio")
    a = HFConfig({**_AUDIO, **a.data}, a.source, a.path)
    h = fields["hidden"]
    tower["tower"] += [_vec("audio_tower/embed_audio_tokens", h, a.size("n_mel_bins") * a.size("mel_vocab_size")),
                       _vec("audio_tower/norm", h)]
    fields["vision"] = tower
    return fields


INKLING_MM_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"inkling_mm_model": _inkling_mm}
