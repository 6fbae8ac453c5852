"""Coverage of the installed transformers' causal-LM and image-text-to-text model_types by the
HF loader: each type's config class defaults (`AutoConfig.for_model(model_type)`) are written to a
config.json and run through `modelplan count` in-process; the type is

- supported: exit 0;
- refused: a non-zero exit with a one-line error (unknown / unmodelled type, or a field it
  cannot express);
- crashed: an exception escaped the loader (a traceback: always a bug, whatever the type);
- no_config: transformers itself cannot build the default config (not modelplan's doing).

    python benchmarks/hf_coverage.py [--list refused|crashed|supported|all] [--json]

Prints the counts per mapping and overall (a type in both mappings is counted once overall).
The masked-LM, seq2seq-LM and sequence-classification mappings (`EXTRA`) are surveyed the same
way with `architectures` naming the mapping's class (BertForMaskedLM, ...), each on a line of its
own, outside the overall line (which stays the union of the first two).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def model_types() -> dict[str, list[str]]:
    """The model_types of transformers' causal-LM and image-text-to-text auto mappings."""
    from transformers.models.auto import modeling_auto

    return {"causal_lm": sorted(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
            "image_text_to_text": sorted(modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)}


EXTRA = {"masked_lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "seq2seq_lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
         "sequence_classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"}
"""Further mappings surveyed per head class (name -> transformers.models.auto.modeling_auto table)."""


def extra_classes() -> dict[str, dict[str, str]]:
    """Per EXTRA mapping, model_type -> the class it names (the first where it lists several)."""
    from transformers.models.auto import modeling_auto

    tables = {name: getattr(modeling_auto, table) for name, table in EXTRA.items()}
    return {name: {t: c if isinstance(c, str) else c[0] for t, c in sorted(table.items())} for name, table in tables.items()}


def default_config(model_type: str) -> dict | None:
    """The config class defaults of `model_type` as a config.json dict (None: transformers fails)."""
    from transformers import AutoConfig

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = AutoConfig.for_model(model_type)
        return json.loads(cfg.to_json_string(use_diff=False))
    except Exception:  # noqa: BLE001 - transformers' own failure, reported as no_config
        return None


def classify(model_type: str, folder: Path, architecture: str | None = None) -> tuple[str, str]:
    """(outcome, detail) of `modelplan count` on the default config of `model_type` (with
    `architectures` [architecture] when given)."""
    from typer.testing import CliRunner

    from modelplan.cli import app

    data = default_config(model_type)
    if data is None:
        return "no_config", "AutoConfig.for_model failed"
    if architecture is not None:
        data["architectures"] = [architecture]
    path = folder / f"{model_type}.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["count", str(path), "--json"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return "crashed", f"{type(result.exception).__name__}: {result.exception}"
    if result.exit_code == 0:
        return "supported", str(json.loads(result.stdout)["params"]["total"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    if len(lines) != 1:
        return "crashed", f"{len(lines)}-line error: " + " | ".join(lines[:3])
    return "refused", lines[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", choices=["refused", "crashed", "supported", "no_config", "all"], default=None)
    parser.add_argument("--json", action="store_true", help="print every type's outcome as JSON")
    args = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    mappings = model_types()
    outcomes: dict[str, tuple[str, str]] = {}
    classes = extra_classes()
    extra: dict[str, dict[str, tuple[str, str]]] = {name: {} for name in classes}
    with tempfile.TemporaryDirectory() as tmp:
        for model_type in sorted(set().union(*mappings.values())):
            outcomes[model_type] = classify(model_type, Path(tmp))
        for name, table in classes.items():
            for model_type, architecture in table.items():
                extra[name][model_type] = classify(model_type, Path(tmp), architecture)
    if args.json:
        print(json.dumps({"transformers": transformers.__version__,
                          "mappings": mappings, "outcomes": outcomes, "extra": extra}, indent=1))
        return
    kinds = ("supported", "refused", "crashed", "no_config")
    print(f"transformers {transformers.__version__}")
    lines = {**{name: (types, outcomes) for name, types in mappings.items()}, "all": (sorted(outcomes), outcomes),
             **{name: (sorted(table), table) for name, table in extra.items()}}
    for name, (types, results) in lines.items():
        counts = {kind: sum(results[t][0] == kind for t in types) for kind in kinds}
        print(f"{name:>23}: {len(types)} types, " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if args.list:
        listed = [("", outcomes)] + [(f"{name}:", table) for name, table in extra.items()]
        for prefix, table in listed:
            for model_type, (kind, detail) in table.items():
                if args.list in ("all", kind):
                    print(f"{kind:>10} {prefix}{model_type}: {detail[:200]}")


if __name__ == "__main__":
    main()
