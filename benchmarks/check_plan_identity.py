"""`modelplan plan --json` of this tree against another commit's, case by case: a speed change
must not change a prediction.

Each case (dense, GQA, MoE, MLA + MTP, long sequence with context parallelism, the wider
schedules, other engines, a LoRA fine-tune, networks, an infeasible problem) runs in both trees,
the older commit extracted with `git archive` into a temporary folder (nothing written to the
repository); each tree answers from one Python process with PYTHONPATH set to it (typer's
CliRunner). Outputs are compared byte for byte after dropping the search's wall time
(`search.wall_s`, a clock reading); with --plans-only the search's bookkeeping (evaluated,
bounded, rejected counts and examples) is left out too and only the plans, the problem and the
candidate count are compared. Exit 0 when every case is identical, 1 otherwise.

    python benchmarks/check_plan_identity.py [--commit main] [--plans-only] [--case SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_search_regression import extract_commit  # noqa: E402

CASES = [
    "megatron-gpt-1t --gpus 3072 --cluster dgx-a100 --batch 3072",
    "llama-3-70b --gpus 64",
    "llama-3-8b --gpus 8 --framework torchtitan",
    "llama-3-405b --gpus 1024 --batch 2048 --seq 8192",
    "gpt3-175b --gpus 1024 --cluster dgx-a100 --batch 1536 --schedule 1f1b,interleaved,zb-h1,zb-v,dualpipe",
    "llama-2-70b --gpus 256 --cluster dgx-a100 --schedule gpipe,zb-h1 --framework deepspeed",
    "llama-3-8b --gpus 64 --seq 65536 --batch 64",
    "mixtral-8x7b --gpus 64",
    "qwen3-235b-a22b --gpus 256 --batch 512 --seq 4096",
    "deepseek-v3 --gpus 512 --batch 1024 --seq 4096",
    "olmoe-1b-7b --gpus 16 --recompute none,full --zero 1",
    "llama-3-8b --gpus 8 --finetune lora",
    "gpt2 --gpus 4 --cluster dgx-a100 --precision fp8",
    "llama-3-70b --gpus 16 --recompute none --seq 32768 --cp 1 --batch 16 --no-offload-activations "
    "--offload-optimizer none",
    "resnet-50 --gpus 8",
    "mlp --gpus 4",
    "lstm-lm --gpus 4",
]
"""`modelplan plan` arguments (`--json` added)."""

WORKER = r'''
import json, sys
from typer.testing import CliRunner
from modelplan.cli import app

runner = CliRunner()
for line in sys.stdin:
    args = json.loads(line)
    result = runner.invoke(app, ["plan", *args, "--json"])
    print(json.dumps({"rc": result.exit_code, "out": result.output}), flush=True)
'''


def normalized(answer: dict, plans_only: bool) -> str:
    """The answer with its wall time (and with `plans_only` the search bookkeeping) dropped."""
    try:
        doc = json.loads(answer["out"])
    except json.JSONDecodeError:
        return f"rc {answer['rc']}\n{answer['out']}"  # an error line: compared as printed
    search = doc.get("search", {})
    search.pop("wall_s", None)
    if plans_only:
        for key in ("evaluated", "bounded", "rejected", "examples"):
            search.pop(key, None)
    return f"rc {answer['rc']}\n" + json.dumps(doc, indent=1, sort_keys=True)


def answers(tree: Path, cases: list[str]) -> list[dict]:
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-c", WORKER], cwd=tree, env=env, text=True, capture_output=True,
                          input="".join(json.dumps(c.split()) + "\n" for c in cases), check=False)
    if proc.returncode:
        raise SystemExit(f"error: the worker in {tree} exited with {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return [json.loads(line) for line in proc.stdout.splitlines()]


def first_difference(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}: {x.strip()[:100]!r} vs {y.strip()[:100]!r}"
    return "one output is longer"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="main", help="the commit to compare with (default main)")
    parser.add_argument("--plans-only", action="store_true", help="compare plans, problem and candidate count "
                        "only, not the search's evaluated / bounded / rejected bookkeeping")
    parser.add_argument("--case", default="", help="only the cases whose arguments contain this")
    args = parser.parse_args()
    cases = [c for c in CASES if args.case in c]
    with tempfile.TemporaryDirectory(prefix="plan-identity-") as tmp:
        old_tree = extract_commit(args.commit, Path(tmp))
        if old_tree is None:
            return 2
        old, new = answers(old_tree, cases), answers(ROOT, cases)
    same = 0
    for case, a, b in zip(cases, old, new):
        x, y = normalized(a, args.plans_only), normalized(b, args.plans_only)
        if x == y:
            same += 1
            print(f"  same       {case}")
        else:
            print(f"  DIFFERENT  {case}: {first_difference(x, y)}")
    print(f"{same} of {len(cases)} cases identical to {args.commit} "
          f"({'plans, problem and candidates' if args.plans_only else 'whole JSON but wall_s'})")
    return 0 if same == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
