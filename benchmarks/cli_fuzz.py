"""A systematic bad-input sweep of the whole command line (not random: every option, every hostile value).

For every command of the typer app (the click command tree is introspected), every option is given
hostile values of its kind (numbers: negative, zero, huge, non-integer, nan/inf, empty; choices and
names: unknown; paths: missing, a folder, empty, binary, malformed TOML/JSON), one at a time on an
otherwise valid command line. Then HF config.json files broken field by field, inconsistent parallel
flags and unwritable --output paths. Each run (in-process, typer.testing.CliRunner with
catch_exceptions=True, a per-case time limit) is classed:

- ok: exit 0;
- clean: exit != 0, no 'Traceback', a short message (<= 3 lines) that names the option or field;
- unclear: exit != 0, no traceback, but the message is long or does not name what was broken;
- crash: an exception escaped (result.exception not SystemExit) or the backstop's internal error
  (exit 70) or 'Traceback' in the output;
- hang: the case ran past its time limit.

    python benchmarks/cli_fuzz.py [--per-option N] [--limit-s S] [--show CLASS ...]

Counts per class are printed; --show prints the cases of the named classes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# A valid command line per command: the sweep breaks one option at a time on top of it.
BASE: dict[str, list[str]] = {
    "count": ["count", "gpt2"],
    "presets": ["presets"],
    "comm": ["comm", "all_reduce", "--size", "1M", "--ranks", "8", "--cluster", "dgx-h100"],
    "calibrate": ["calibrate", "--backend", "sim", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0"],
    "plan": ["plan", "gpt2", "--gpus", "8", "--batch", "64", "--seq", "256"],
    "verify": ["verify", "gpt2", "--max-ranks", "2", "--dp", "2", "--global-batch", "4", "--seq", "16"],
    "export": ["export", "{plan}", "--to", "megatron"],
    "compare": ["compare", "{plan}", "{plan}"],
    "budget": ["budget", "--flops", "1e23", "--gpus", "64"],
    "serve": ["serve", "llama-3-8b", "--gpus", "1", "--context", "4096"],

    "launch": ["launch", "{plan}", "--to", "megatron", "--gpus-per-node", "2"],
}
SKIP_OPTIONS = {"--help", "--install-completion", "--show-completion"}
NUMBERS = ["-1", "0", "9" * 30, "1.5", "abc", "nan", "inf", "-inf", ""]
WORDS = ["nope-unknown", "", "\x00", "nan"]
FILES = ["missing", "folder", "empty", "binary", "bad_toml", "bad_json"]
EXIT_INTERNAL = 70
CLASSES = ("ok", "clean", "unclear", "crash", "hang", "half-written")


@dataclass
class Result:
    cls: str
    argv: list[str]
    code: int
    text: str
    broken: str  # the option or field the case broke (the message should name it)


class Hang(BaseException):
    """The per-case time limit (a BaseException: no `except Exception` swallows it)."""


def _on_alarm(signum, frame):
    raise Hang()


def make_files(tmp: Path) -> dict[str, str]:
    """Hostile files by kind, plus a valid plan document; their paths."""
    (tmp / "folder").mkdir()
    (tmp / "empty.json").write_bytes(b"")
    (tmp / "binary.json").write_bytes(bytes(range(256)))
    (tmp / "bad_toml.toml").write_text("layers = [1, 2\nhidden = \n")
    (tmp / "bad_json.json").write_text('{"layers": 2, "hidden":')
    paths = {"missing": str(tmp / "missing.json"), "folder": str(tmp / "folder"),
             "empty": str(tmp / "empty.json"), "binary": str(tmp / "binary.json"),
             "bad_toml": str(tmp / "bad_toml.toml"), "bad_json": str(tmp / "bad_json.json")}
    from modelplan.comm.clusters import load_cluster
    from modelplan.plan.document import dumps_plan_document, plan_document
    from modelplan.plan.estimate import estimate_plan
    from modelplan.specs.load import model_from_dict
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    cluster = load_cluster("dgx-h100")
    model = model_from_dict({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128,
                             "vocab": 128, "max_positions": 256})
    training = TrainingSpec(global_batch=8, seq_len=64)
    doc = plan_document(model, training, estimate_plan(model, training, Plan(dp=2), cluster), cluster)
    (tmp / "plan.json").write_text(dumps_plan_document(doc))
    paths["plan"] = str(tmp / "plan.json")
    ro = tmp / "readonly"
    ro.mkdir()
    ro.chmod(0o555)
    (tmp / "afile").write_text("x")
    paths["readonly"], paths["afile"] = str(ro), str(tmp / "afile")
    return paths


def _kind(param) -> str:
    """int, float, path or str: the option's annotation (typer's TypeDescriptor, or click's type)."""
    desc = getattr(param, "type_descriptor", None)
    ann = getattr(desc, "annotation", None) if desc is not None else None
    text = str(ann if ann is not None else getattr(getattr(param, "type", None), "name", ""))
    for kind in ("int", "float", "path", "file"):
        if kind in text.lower():
            return kind
    return "str"


def option_cases(command, files: dict[str, str], per_option: int) -> list[tuple[list[str], str]]:
    """(argv, broken option) for every option of every command with hostile values of its type."""
    cases = []
    for name, sub in sorted(command.commands.items()):
        base = [a.format(**files) for a in BASE.get(name, [name])]
        for param in sub.params:
            if param.param_type_name != "option" or param.is_flag or param.opts[0] in SKIP_OPTIONS:
                continue
            opt = max(param.opts, key=len)
            kind = _kind(param)
            if kind in ("path", "file") or "file" in opt or opt in (
                    "--cluster", "--extends", "--output", "--svg", "--hardware"):
                values = [files[k] for k in FILES]
            elif kind in ("int", "float"):
                values = NUMBERS
            else:
                values = NUMBERS[:2] + WORDS + NUMBERS[4:7]
            for value in values[:per_option]:
                argv = list(base)
                if opt in argv:  # replace the base's value
                    argv[argv.index(opt) + 1] = value
                else:
                    short = [o for o in param.opts if o in argv]
                    if short:
                        argv[argv.index(short[0]) + 1] = value
                    else:
                        argv += [opt, value]
                if name == "comm" and opt in ("--min-size", "--max-size", "--step-factor"):
                    del argv[argv.index("--size"):argv.index("--size") + 2]  # a sweep, not the one size
                cases.append((argv, "|".join(param.opts)))
        for param in sub.params:  # the model/plan argument itself
            if param.param_type_name == "argument" and name in ("count", "plan", "verify", "serve", "export"):
                pos = 1
                for value in [*(files[k] for k in FILES), "nope-unknown-preset", ""]:
                    argv = list(base)
                    argv[pos] = value
                    cases.append((argv, f"{param.name}|model|preset|{value}"))  # naming the value names it
                break
    return cases


LLAMA = json.loads((ROOT / "tests" / "data" / "hf" / "llama-2-7b.json").read_text())
MIXTRAL = json.loads((ROOT / "tests" / "data" / "hf" / "mixtral-8x7b-v0.1.json").read_text())
HF_BREAKS: list[tuple[str, dict, str]] = [
    # (label, changes to the llama config (None deletes), the field the message should name)
    *[(f"missing {k}", {k: "DELETE"}, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                   "vocab_size", "intermediate_size")],
    *[(f"{k}={v!r}", {k: v}, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                          "vocab_size", "intermediate_size", "num_key_value_heads",
                                          "max_position_embeddings")
      for v in (None, -1, 0, "4096", 1.5, True, [1])],
    ("heads not dividing hidden", {"num_attention_heads": 30}, "num_attention_heads"),
    ("kv_heads > heads", {"num_key_value_heads": 64}, "num_key_value_heads"),
    ("kv_heads not dividing heads", {"num_key_value_heads": 5}, "num_key_value_heads"),
    ("layer_types wrong length", {"layer_types": ["full_attention"] * 3}, "layer_types"),
    ("layer_types unknown", {"layer_types": ["bogus"] * 32}, "layer_types"),
    ("rope_scaling unknown", {"rope_scaling": {"type": "bogus", "factor": 2.0}}, "rope_scaling"),
    ("rope_scaling not a dict", {"rope_scaling": "linear"}, "rope_scaling"),
    ("quantization_config", {"quantization_config": {"quant_method": "gptq", "bits": 4}}, "quantization"),
    ("torch_dtype odd", {"torch_dtype": "float7"}, "torch_dtype"),
    ("torch_dtype int", {"torch_dtype": 3}, "torch_dtype"),
    ("head_dim 0", {"head_dim": 0}, "head_dim"),
    ("tie_word_embeddings str", {"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
    ("model_type unknown", {"model_type": "bogus", "architectures": ["BogusForCausalLM"]}, "model_type"),
    ("model_type int", {"model_type": 7}, "model_type"),
    ("architectures str", {"architectures": "LlamaForCausalLM"}, "architectures"),
    ("not a dict", "LIST", "config"),
]
MOE_BREAKS = [
    ("experts 0", {"num_local_experts": 0}, "num_local_experts"),
    ("top_k > experts", {"num_experts_per_tok": 9}, "num_experts_per_tok"),
    ("top_k 0", {"num_experts_per_tok": 0}, "num_experts_per_tok"),
    ("experts str", {"num_local_experts": "8"}, "num_local_experts"),
]


def hf_cases(tmp: Path) -> list[tuple[list[str], str]]:
    cases = []
    breaks = [(*b, LLAMA) for b in HF_BREAKS] + [(*b, MIXTRAL) for b in MOE_BREAKS]
    for i, (_label, change, field_name, base) in enumerate(breaks):
        if change == "LIST":
            data: object = [base]
        else:
            data = dict(base)
            for k, v in change.items():
                if v == "DELETE":
                    data.pop(k, None)
                else:
                    data[k] = v
        path = tmp / f"hf{i}" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(data))
        for cmd in (["count", str(path)], ["plan", str(path), "--gpus", "8", "--batch", "64", "--seq", "256"]):
            cases.append((cmd, field_name))
    return cases


PARALLEL = [
    (["plan", "gpt2", "--gpus", "8", "--tp", "5"], "tp"),
    (["plan", "gpt2", "--gpus", "6", "--tp", "4"], "gpus"),
    (["plan", "gpt2", "--gpus", "8", "--tp", "2", "--pp", "3"], "pp"),
    (["plan", "gpt2", "--gpus", "64", "--pp", "64"], "pp"),
    (["plan", "gpt2", "--gpus", "8", "--ep", "2"], "ep"),
    (["plan", "gpt2", "--gpus", "8", "--cp", "2", "--seq", "255"], "cp"),
    (["plan", "gpt2", "--gpus", "8", "--batch", "8", "--micro-batch", "16"], "micro"),
    (["plan", "gpt2", "--gpus", "8", "--dp", "3"], "dp"),
    (["plan", "gpt2", "--gpus", "8", "--vpp", "3", "--pp", "2"], "vpp"),
    (["verify", "gpt2", "--tp", "5", "--max-ranks", "8"], "tp"),
    (["verify", "gpt2", "--pp", "64", "--max-ranks", "64"], "pp"),
    (["verify", "gpt2", "--ep", "2", "--max-ranks", "2"], "ep"),
    (["verify", "gpt2", "--dp", "2", "--global-batch", "3", "--max-ranks", "2"], "global"),
    (["verify", "gpt2", "--dp", "2", "--micro-batch", "8", "--global-batch", "4", "--max-ranks", "2"], "micro"),
    (["serve", "llama-3-8b", "--gpus", "2", "--context", "4096", "--tp", "3"], "tp"),
    (["serve", "llama-3-8b", "--gpus", "2", "--context", "4096", "--tp", "4"], "tp"),
]


FIELD_VALUES: list[object] = [None, -1, 0, 10**30, 1.5, "4096", True, [1], {"a": 1}, float("nan"), float("inf")]
"""What a config field is set to, one at a time: a wrong type, a negative, zero or huge size, NaN."""


def _numeric_paths(data: dict, depth: int = 2, prefix: tuple = ()) -> list[tuple]:
    """Key paths of every number (and nested object) down to `depth` levels: the fields a user edits."""
    out = []
    for key, value in data.items():
        if isinstance(value, bool) or key.startswith("_"):
            continue
        if isinstance(value, int | float):
            out.append(prefix + (key,))
        elif isinstance(value, dict) and depth > 1:
            out += _numeric_paths(value, depth - 1, prefix + (key,))
    return out


def _set(data: dict, path: tuple, value: object) -> dict:
    """A deep copy of `data` with `path` set to `value` (`DELETE`: removed)."""
    data = json.loads(json.dumps(data))
    node = data
    for key in path[:-1]:
        node = node[key]
    if value == "DELETE":
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return data


def config_cases(tmp: Path, per_file: int) -> list[tuple[list[str], str]]:
    """Every HF config.json under tests/data/hf with each number (top level and one nested object
    down) set to each of FIELD_VALUES or deleted, read by `count`; plus the file itself empty,
    a folder named config.json, not JSON, not an object, and unreadable (/proc/self/mem: EIO even
    for root)."""
    cases: list[tuple[list[str], str]] = []
    folder = tmp / "configs"
    folder.mkdir()
    n = 0
    for src in sorted((ROOT / "tests" / "data" / "hf").glob("*.json")):
        data = json.loads(src.read_text())
        if not isinstance(data, dict):
            continue
        variants = [(path, value) for path in _numeric_paths(data) for value in [*FIELD_VALUES, "DELETE"]]
        step = max(1, len(variants) // per_file) if per_file else 1
        for path, value in variants[::step]:
            n += 1
            out = folder / f"c{n}.json"
            out.write_text(json.dumps(_set(data, path, value)))  # NaN and Infinity as Python's json writes them
            cases.append((["count", str(out)], "|".join(str(k) for k in path)))
    (folder / "empty.json").write_text("")
    (folder / "dir.json").mkdir()
    (folder / "text.json").write_text("not json")
    (folder / "list.json").write_text("[1, 2]")
    (folder / "deep.json").write_text("[" * 100_000)
    for name in ("empty.json", "dir.json", "text.json", "list.json", "deep.json"):
        for cmd in ("count", "plan", "verify"):
            extra = ["--gpus", "8"] if cmd == "plan" else []
            cases.append(([cmd, str(folder / name), *extra], name))
    cases.append((["count", "/proc/self/mem"], "mem"))
    return cases


TOML_VALUES = ["-1", "0", "1" + "0" * 30, "1.5", "nan", "inf", '"12"', "true", "[1]", "{a = 1}"]
"""TOML literals a preset's number is replaced by (TOML itself has nan and inf)."""


def toml_cases(tmp: Path) -> list[tuple[list[str], str]]:
    """Model and cluster presets (TOML) with each numeric line's value replaced by each of
    TOML_VALUES, or the line removed, read by `count` (models) and `comm` / `plan` (clusters);
    plus TOML that does not parse."""
    cases: list[tuple[list[str], str]] = []
    folder = tmp / "toml"
    folder.mkdir()
    line_re = re.compile(r"^(\w+)\s*=\s*(-?[0-9][0-9_.e+-]*)\s*(#.*)?$")
    sources = [("models", "gpt2"), ("models", "mixtral-8x7b"), ("clusters", "dgx-h100")]
    n = 0
    for kind, name in sources:
        lines = (ROOT / "presets" / kind / f"{name}.toml").read_text().splitlines()
        for i, line in enumerate(lines):
            m = line_re.match(line)
            if not m:
                continue
            for value in [*TOML_VALUES, None]:
                n += 1
                new = list(lines)
                if value is None:
                    del new[i]
                else:
                    new[i] = f"{m.group(1)} = {value}"
                out = folder / f"t{n}.toml"
                out.write_text("\n".join(new) + "\n")
                if kind == "models":
                    cases.append((["count", str(out)], f"{m.group(1)}|{out.name}"))
                else:
                    cases.append((["comm", "all_reduce", "--size", "1M", "--ranks", "16", "--cluster", str(out)],
                                  f"{m.group(1)}|{out.name}"))
                    cases.append((["plan", "gpt2", "--gpus", "16", "--batch", "64", "--seq", "256", "--cluster",
                                   str(out)], f"{m.group(1)}|{out.name}"))
    (folder / "broken.toml").write_text("layers = [1, 2\nhidden = \n")
    (folder / "dup.toml").write_text("layers = 2\nlayers = 3\n")
    for name in ("broken.toml", "dup.toml"):
        cases.append((["count", str(folder / name)], name))
        cases.append((["plan", "gpt2", "--gpus", "8", "--cluster", str(folder / name)], name))
        cases.append((["calibrate", "--backend", "sim", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0", "--extends",
                       str(folder / name)], name))
    return cases


def output_cases(files: dict[str, str]) -> list[tuple[list[str], str]]:
    bad = [os.path.join(files["readonly"], "out.json"), files["folder"], os.path.join(files["afile"], "out.json")]
    cases = []
    for path in bad:
        cases += [
            (["plan", "gpt2", "--gpus", "8", "-o", path], "-o"),
            (["plan", "gpt2", "--gpus", "8", "--svg", path], "--svg"),
            (["export", files["plan"], "--to", "megatron", "-o", path], "-o"),
            (["calibrate", "--backend", "sim", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0", "-o", path], "-o"),
            (["verify", "gpt2", "--max-ranks", "2", "--dp", "2", "--global-batch", "4", "--seq", "16",
              "--svg", path], "--svg"),
        ]
    return cases


def names_it(text: str, broken: str, argv: list[str] | None) -> bool:
    """The message names the broken option or field (any of its names `a|b`, with or without
    dashes, - or _), or quotes the file it could not read."""
    low = text.lower()
    for name in broken.split("|"):
        key = name.lstrip("-").lower()
        variants = {key, key.replace("-", "_"), key.replace("_", "-"), key.replace("-", " "), key.replace("_", " ")}
        if any(len(v) > 1 and v in low for v in variants) or (name.startswith("-") and f"{name} " in text):
            return True
    return any(os.sep in a and Path(a).name in text for a in argv or ())


def leftovers(tmp: Path) -> list[str]:
    """Temporary files a write left behind (an atomic write removes its temp file on failure)."""
    return [str(p) for p in tmp.rglob("*.tmp")]


def classify(runner, command, argv: list[str], broken: str, limit_s: float, files_named: bool) -> Result:
    """Run one case; `files_named`: quoting the unreadable file counts as naming what is broken."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        from modelplan.cli.app import run

        # run() is what the console script calls: usage errors become one `error:` line.
        with runner.isolation(env={"MODELPLAN_TRACEBACK": "1"}) as (out, err, _x):
            exc = None
            try:
                code = run(list(argv), command)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except Exception as e:  # noqa: BLE001 - the sweep records what escaped
                code, exc = -1, e
            sys.stdout.flush()
            sys.stderr.flush()
            text = out.getvalue().decode(errors="replace") + err.getvalue().decode(errors="replace")
    except Hang:
        return Result("hang", argv, -1, "", broken)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if exc is not None or code == EXIT_INTERNAL or "Traceback" in text:
        tail = text.strip().splitlines()[-1:] if text.strip() else [repr(exc)]
        return Result("crash", argv, code, (tail[0] if tail else repr(exc))[:300], broken)
    if code == 0:
        return Result("ok", argv, code, "", broken)
    errs = [ln for ln in text.splitlines() if ln.startswith("error:")]
    msg = errs[-1] if errs else text.strip()[-300:]
    clear = len(errs) == 1 and names_it(msg, broken, argv if files_named else None) if code == 2 else names_it(text, broken, argv if files_named else None)
    return Result("clean" if clear else "unclear", argv, code, msg[:300], broken)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-option", type=int, default=6, help="hostile values per option")
    ap.add_argument("--limit-s", type=float, default=20.0, help="per-case time limit")
    ap.add_argument("--show", nargs="*", default=["crash", "hang", "unclear", "half-written"],
                    help="classes whose cases are printed (ok too, to review what was accepted)")
    ap.add_argument("--only", default="", help="only the cases whose argv contains this string")
    ap.add_argument("--per-file", type=int, default=0,
                    help="config.json mutations per HF config (0: every field x every value)")
    ap.add_argument("--groups", default="", help="comma list of the groups to run (default: all)")
    args = ap.parse_args()

    import typer
    from typer.testing import CliRunner

    from modelplan.cli import app

    app.load()
    command = typer.main.get_command(app)
    runner = CliRunner()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        files = make_files(tmp)
        groups = {"options": option_cases(command, files, args.per_option), "hf": hf_cases(tmp),
                  "parallel": PARALLEL, "output": output_cases(files),
                  "configs": config_cases(tmp, args.per_file), "toml": toml_cases(tmp)}
        if args.groups:
            groups = {k: v for k, v in groups.items() if k in args.groups.split(",")}
        counts: dict[str, Counter] = {}
        shown = []
        for group, cases in groups.items():
            counts[group] = Counter()
            for argv, broken in cases:
                if args.only and args.only not in " ".join(argv):
                    continue
                res = classify(runner, command, argv, broken, args.limit_s, group not in ("hf", "configs"))
                left = leftovers(tmp)
                if left:
                    res = Result("half-written", argv, res.code, f"left {left}", broken)
                    for p in left:
                        os.unlink(p)
                for key in ("missing",):  # an --output case may have created it: missing again
                    if os.path.isfile(files[key]):
                        os.unlink(files[key])
                counts[group][res.cls] += 1
                if res.cls in args.show:
                    shown.append((group, res))
        os.chmod(files["readonly"], 0o755)
    for group, res in shown:
        print(f"[{res.cls}] {group}: modelplan {' '.join(res.argv)[:200]}\n    broken={res.broken} "
              f"exit={res.code}: {res.text[:240]}")
    total = Counter()
    for group, c in counts.items():
        total.update(c)
        print(f"{group:<9} " + "  ".join(f"{k}={c.get(k, 0)}" for k in CLASSES))
    print(f"{'total':<9} " + "  ".join(f"{k}={total.get(k, 0)}" for k in CLASSES)
          + f"  ({sum(total.values())} cases, {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
