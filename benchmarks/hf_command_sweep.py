"""Every command on every HF model_type `count` supports: the class-default config.json that
benchmarks/hf_coverage.py (causal-LM, image-text-to-text; with --extra the masked-LM, seq2seq and
classification mappings) and benchmarks/hf_coverage_vision.py (--vision) write, and a shrunk copy
(every layer count above 2 set to 2, per-layer lists cut to match), run in-process through Typer's
CliRunner:

    count --json (default and shrunk), plan --gpus 8 (written with -o), plan --gpus 64 --cluster
    dgx-h100, plan --gpus 8 --recompute full, export --to <each target> of the 8-GPU plan,
    verify --tp 2 --pp 2 on the shrunk copy.

Each run is ok (exit 0, --json output parses, no nan / inf printed), refused (non-zero exit, one line on stderr, no traceback) or CRASH (an
exception escaped, the backstop's exit 70 "internal error", a traceback or a multi-line error).
A type whose default `count` is not supported is skipped (hf_coverage.py surveys those).

    python benchmarks/hf_command_sweep.py [--extra] [--vision] [--wide] [--only T1,T2] [--limit N] [--json]

--wide adds the settings in WIDE (fp8, eager attention, long sequences, other frameworks, cp, ep,
vpp, LoRA / QLoRA, serve, verify with cp / zero 3 / ep), `launch` and `compare`. --mutate runs
instead `count` and `plan` on bad values written into each config's own keys (MUTATIONS).

Prints the counts per command and every crash's type, command and exception line.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import hf_coverage  # noqa: E402  (the class-defaults config.json writer)

EXPORT_TARGETS = ("megatron", "deepspeed", "torchtitan", "ddp", "json")
"""`modelplan export --to` targets (modelplan/cli/export.py's help)."""

LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
              "num_encoder_layers", "num_decoder_layers", "text_num_hidden_layers", "vision_num_hidden_layers")
"""Keys holding a layer count, set to 2 in the shrunk copy where above 2."""

SHRUNK_LAYERS = 2
"""Layers of the shrunk copy: the fewest a pp = 2 verify can split."""


def shrink(data: dict) -> dict | None:
    """A copy of a config.json dict with every layer count above SHRUNK_LAYERS set to it and the
    lists as long as that count (layer_types, ...) cut to match, in every nested sub-config;
    None where nothing could be shrunk."""
    out = copy.deepcopy(data)
    changed = False

    def walk(node: dict) -> None:
        nonlocal changed
        counts = {k: v for k, v in node.items() if k in LAYER_KEYS and isinstance(v, int) and v > SHRUNK_LAYERS}
        for key, value in counts.items():
            node[key] = SHRUNK_LAYERS
            changed = True
        lengths = set(counts.values())
        for key, value in list(node.items()):
            if isinstance(value, list) and len(value) in lengths and key not in ("architectures",):
                node[key] = value[:SHRUNK_LAYERS]
            elif isinstance(value, dict):
                walk(value)

    walk(out)
    return out if changed else None


NOT_A_NUMBER = re.compile(r"\b(nan|NaN|-?inf|-?Infinity)\b")
"""A number the output must never hold (a division by zero or an overflow passed through)."""


def run(args: list[str]) -> tuple[str, str]:
    """(outcome, detail) of one in-process `modelplan` command line."""
    from typer.testing import CliRunner

    from modelplan.cli import app

    result = CliRunner().invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return "CRASH", f"{type(result.exception).__name__}: {str(result.exception)[:200]}"
    err = [line for line in result.stderr.splitlines() if line.strip()]
    text = result.stdout + result.stderr
    if "Traceback (most recent call last)" in text:
        return "CRASH", "traceback: " + (err[-1] if err else "")
    if result.exit_code == 0:
        if "--json" in args:
            try:
                json.loads(result.stdout)
            except ValueError as exc:
                return "CRASH", f"exit 0 but --json printed no JSON document: {exc}"
        bad = NOT_A_NUMBER.search(result.stdout)
        if bad:
            return "CRASH", f"exit 0 but the output holds {bad.group(0)!r}: {result.stdout[max(bad.start() - 80, 0):bad.end()]!r}"
        return "ok", ""
    if result.exit_code == 70 or (err and "internal error" in err[0]):
        return "CRASH", err[0] if err else f"exit {result.exit_code}"
    if err and err[0].startswith("Usage:"):
        return "usage", err[-1]  # click's own usage error: the sweep's command line is wrong
    if len(err) != 1:
        return "CRASH", f"{len(err)}-line error (exit {result.exit_code}): " + " | ".join(err[:3])
    return "refused", err[0]


WIDE = {
    "plan 16 fp8 eager seq 32k": ["plan", "--gpus", "16", "--precision", "fp8", "--attention", "eager", "--seq", "32768"],
    "plan 8 deepspeed zero 3": ["plan", "--gpus", "8", "--framework", "deepspeed", "--zero", "3"],
    "plan 8 torchtitan cp 2": ["plan", "--gpus", "8", "--framework", "torchtitan", "--cp", "2"],
    "plan 8 fsdp": ["plan", "--gpus", "8", "--framework", "fsdp"],
    "plan 16 ep 2 vpp 2": ["plan", "--gpus", "16", "--ep", "2", "--vpp", "2", "--pp", "2"],
    "plan 8 lora": ["plan", "--gpus", "8", "--finetune", "lora"],
    "plan 8 qlora": ["plan", "--gpus", "8", "--finetune", "qlora"],
    "serve": ["serve", "--context", "8192", "--json"],
    "serve tp 8 fp8 int4": ["serve", "--context", "131072", "--tp", "8", "--weights", "int4", "--kv-cache", "fp8"],
    "verify cp 2 zero 3": ["verify", "--cp", "2", "--dp", "2", "--zero", "3", "--steps", "1"],
    "verify ep 2": ["verify", "--ep", "2", "--steps", "1"],
}
"""--wide: further settings per type (the model path goes after the command name)."""


MUTATIONS = {"hidden_size": (0, -64, "big", None), "num_attention_heads": (0, 3), "num_key_value_heads": (0, 7),
             "intermediate_size": (0, -1), "num_hidden_layers": (0,), "vocab_size": (0, 1.5), "head_dim": (0, 7),
             "num_experts": (0,), "num_local_experts": (0,), "num_experts_per_tok": (0, 10**6),
             "max_position_embeddings": (0,), "rope_theta": (0, "x"), "tie_word_embeddings": ("maybe",)}
"""--mutate: bad values written into a config's own keys (top level, else text_config); `count --json`
and `plan --gpus 8` must refuse them in one line (or accept them) and never crash."""


def mutants(data: dict) -> list[tuple[str, dict]]:
    """(label, config.json) per MUTATIONS value of a key the config holds."""
    out = []
    for key, values in MUTATIONS.items():
        where = data if key in data else data.get("text_config") if isinstance(data.get("text_config"), dict) else None
        if where is None or key not in where:
            continue
        for value in values:
            bad = copy.deepcopy(data)
            (bad if where is data else bad["text_config"])[key] = value
            out.append((f"{key}={value!r}", bad))
    return out


def mutate(name: str, data: dict, folder: Path) -> dict[str, tuple[str, str]]:
    """`count --json` and `plan --gpus 8` on every mutant of one config."""
    outcomes = {}
    for label, bad in mutants(data):
        path = folder / f"{name}.mutant.json"
        path.write_text(json.dumps(bad))
        outcomes[f"count {label}"] = run(["count", str(path), "--json"])
        if outcomes[f"count {label}"][0] == "ok":
            outcomes[f"plan 8 {label}"] = run(["plan", str(path), "--gpus", "8"])
    return outcomes


def sweep(name: str, data: dict, folder: Path, wide: bool = False) -> dict[str, tuple[str, str]]:
    """Every command's outcome on one config (name: the file stem; data: its config.json)."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    outcomes = {"count": run(["count", str(path), "--json"])}
    if outcomes["count"][0] != "ok":
        return outcomes
    small = shrink(data)
    small_path = folder / f"{name}.small.json"
    if small is not None:
        small_path.write_text(json.dumps(small))
        outcomes["count shrunk"] = run(["count", str(small_path), "--json"])
    plan_path = folder / f"{name}.plan.json"
    plan_path.unlink(missing_ok=True)
    outcomes["plan 8"] = run(["plan", str(path), "--gpus", "8", "-o", str(plan_path)])
    outcomes["plan 64 dgx-h100"] = run(["plan", str(path), "--gpus", "64", "--cluster", "dgx-h100"])
    outcomes["plan 8 recompute full"] = run(["plan", str(path), "--gpus", "8", "--recompute", "full"])
    if plan_path.exists():
        for target in EXPORT_TARGETS:
            outcomes[f"export {target}"] = run(["export", str(plan_path), "--to", target])
    target = small_path if small is not None and outcomes["count shrunk"][0] == "ok" else path
    outcomes["verify tp2 pp2"] = run(["verify", str(target), "--tp", "2", "--pp", "2", "--steps", "1"])
    if wide:
        for command, extra in WIDE.items():
            head, *rest = extra
            model = str(small_path if head == "verify" and small is not None else path)
            outcomes[command] = run([head, model, *rest])
        if plan_path.exists():
            outcomes["launch megatron"] = run(["launch", str(plan_path), "--to", "megatron"])
            outcomes["compare"] = run(["compare", str(plan_path), str(plan_path)])
    return outcomes


def configs(extra: bool, vision: bool) -> list[tuple[str, str | None]]:
    """(model_type, architecture or None) of every surveyed mapping entry."""
    entries: list[tuple[str, str | None]] = [(t, None) for t in sorted(set().union(*hf_coverage.model_types().values()))]
    if extra:
        for table in hf_coverage.extra_classes().values():
            entries += sorted(table.items())
    if vision:
        import hf_coverage_vision

        for table in hf_coverage_vision.mappings().values():
            entries += sorted(table.items())
    return list(dict.fromkeys(entries))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", action="store_true", help="also the masked-LM, seq2seq, classification mappings")
    parser.add_argument("--vision", action="store_true", help="also hf_coverage_vision.py's mappings")
    parser.add_argument("--wide", action="store_true", help="also WIDE's settings, launch and compare")
    parser.add_argument("--mutate", action="store_true", help="only MUTATIONS' bad values (count, plan)")
    parser.add_argument("--only", default="", help="comma list of model_types")
    parser.add_argument("--limit", type=int, default=0, help="the first N entries only")
    parser.add_argument("--json", action="store_true", help="print every outcome as JSON")
    args = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    entries = configs(args.extra, args.vision)
    if args.only:
        wanted = set(args.only.split(","))
        entries = [e for e in entries if e[0] in wanted]
    if args.limit:
        entries = entries[: args.limit]
    results: dict[str, dict[str, tuple[str, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model_type, arch in entries:
            data = hf_coverage.default_config(model_type)
            if data is None:
                continue
            label = model_type if arch is None else f"{model_type}/{arch}"
            if arch is not None:
                data["architectures"] = [arch]
            stem = label.replace("/", "__")
            if not args.mutate:
                results[label] = sweep(stem, data, Path(tmp), args.wide)
                continue
            path = Path(tmp) / f"{stem}.json"
            path.write_text(json.dumps(data))
            results[label] = {"count": run(["count", str(path), "--json"])}
            if results[label]["count"][0] == "ok":
                results[label].update(mutate(stem, data, Path(tmp)))
    if args.json:
        print(json.dumps({"transformers": transformers.__version__, "results": results}, indent=1))
        return
    swept = {label: out for label, out in results.items() if out["count"][0] == "ok"}
    print(f"transformers {transformers.__version__}: {len(results)} configs, {len(swept)} supported by count")
    per_command: dict[str, Counter] = {}
    for out in swept.values():
        for command, (kind, _) in out.items():
            per_command.setdefault(command, Counter())[kind] += 1
    for command, counts in per_command.items():
        if args.mutate and command != "count":
            continue
        print(f"{command:>22}: " + ", ".join(f"{k} {counts[k]}" for k in ("ok", "refused", "CRASH", "usage") if k != "usage" or counts[k]))
    if args.mutate:
        kinds = Counter(k for out in swept.values() for c, (k, _) in out.items() if c != "count")
        print(f"{'mutants':>22}: " + ", ".join(f"{k} {kinds[k]}" for k in ("ok", "refused", "CRASH")))
    crashes = [(label, command, detail) for label, out in swept.items() for command, (kind, detail) in out.items()
               if kind == "CRASH"]
    print(f"{len(crashes)} crashes")
    for label, command, detail in crashes:
        print(f"CRASH {label}: {command}: {detail}")


if __name__ == "__main__":
    main()
