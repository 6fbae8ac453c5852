"""Coverage of the installed transformers' image-classification, zero-shot-image-classification,
CTC and audio-classification model_types by the HF loader: each type's config class defaults
(`AutoConfig.for_model(model_type)`, as benchmarks/hf_coverage.py writes them) with
`architectures` set to the class the mapping names (ViTForImageClassification, CLIPModel,
Wav2Vec2ForCTC, ...) run through `modelplan count` in-process; the outcome is supported / refused
(one-line error) / crashed (a traceback or a multi-line error) / no_config, as hf_coverage.py
classifies it.

    python benchmarks/hf_coverage_vision.py [--list refused|crashed|supported|all] [--json]

Prints the counts per mapping and overall (a type is counted once overall, as supported when any
of its mappings' classes is).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import hf_coverage  # noqa: E402  (the same class-defaults config.json and outcome rules)

MAPPINGS = {
    "image_classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "zero_shot_image_classification": "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "ctc": "MODEL_FOR_CTC_MAPPING_NAMES",
    "audio_classification": "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
}
"""Survey name -> transformers.models.auto.modeling_auto mapping (model_type -> class name)."""


def mappings() -> dict[str, dict[str, str]]:
    """model_type -> class name of each surveyed auto mapping (the first class where a tuple)."""
    from transformers.models.auto import modeling_auto

    out = {}
    for name, attr in MAPPINGS.items():
        table = getattr(modeling_auto, attr)
        out[name] = {t: (c[0] if isinstance(c, (tuple, list)) else c) for t, c in sorted(table.items())}
    return out


def classify(model_type: str, arch: str, folder: Path) -> tuple[str, str]:
    """(outcome, detail) of `modelplan count` on the defaults of `model_type` built as `arch`:
    hf_coverage.classify with its config.json naming `arch` in architectures."""
    base = hf_coverage.default_config

    def named(kind: str) -> dict | None:
        data = base(kind)
        return None if data is None else {**data, "architectures": [arch]}

    hf_coverage.default_config = named
    try:
        return hf_coverage.classify(model_type, folder)
    finally:
        hf_coverage.default_config = base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", choices=["refused", "crashed", "supported", "no_config", "all"], default=None)
    parser.add_argument("--json", action="store_true", help="print every (mapping, type) outcome as JSON")
    args = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    tables = mappings()
    outcomes: dict[str, dict[str, tuple[str, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, table in tables.items():
            outcomes[name] = {t: classify(t, arch, Path(tmp)) for t, arch in table.items()}
    if args.json:
        print(json.dumps({"transformers": transformers.__version__, "mappings": tables, "outcomes": outcomes}, indent=1))
        return
    kinds = ("supported", "refused", "crashed", "no_config")
    rank = {kind: i for i, kind in enumerate(kinds)}
    overall: dict[str, str] = {}
    for per_type in outcomes.values():
        for t, (kind, _) in per_type.items():
            overall[t] = min(overall.get(t, kind), kind, key=rank.__getitem__)
    print(f"transformers {transformers.__version__}")
    for name, per_type in outcomes.items():
        counts = {kind: sum(k == kind for k, _ in per_type.values()) for kind in kinds}
        print(f"{name:>31}: {len(per_type)} types, " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    counts = {kind: sum(k == kind for k in overall.values()) for kind in kinds}
    print(f"{'all':>31}: {len(overall)} types, " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if args.list:
        for name, per_type in outcomes.items():
            for t, (kind, detail) in per_type.items():
                if args.list in ("all", kind):
                    print(f"{kind:>10} {name}/{t} ({tables[name][t]}): {detail[:160]}")


if __name__ == "__main__":
    main()
