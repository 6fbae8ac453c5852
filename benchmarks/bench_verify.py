"""Speed of `modelplan verify`: a dp x tp x pp = 2 x 2 x 2 verify of a 4-layer model.

Prints the wall time of the whole verify with the numpy oracle and verify's default 3 optimizer
steps, measured memory and trace checks included (target: under 5 s on 2 cores, issue 15), the
time of the sharded steps over 8 simulated ranks, of the single-device reference, and their
ratio; `--oracle torch` times the PyTorch oracle instead (its first call imports torch). Run:
    python benchmarks/bench_verify.py [--repeat N] [--smoke] [--oracle torch]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout uninstalled

from modelplan.execute.verify import verify  # noqa: E402
from modelplan.specs.plan import Plan  # noqa: E402
from modelplan.specs.training import TrainingSpec  # noqa: E402
from modelplan.specs.transformer import TransformerSpec  # noqa: E402

LLAMA3_8B_SHAPE = TransformerSpec(name="llama-3-8b-shape", layers=32, hidden=4096, heads=32, kv_heads=8,
                                  ffn_hidden=14336, vocab=128256, max_positions=8192)
CASES = {
    "2x2x2 1f1b": Plan(dp=2, tp=2, pp=2),
    "2x2x2 interleaved+sp+zero1": Plan(dp=2, tp=2, pp=2, vpp=2, schedule="interleaved", sequence_parallel=True, zero=1),
    "2x2x2 zero3": Plan(dp=2, tp=2, pp=2, zero=3),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one repeat of the first case (CI)")
    parser.add_argument("--oracle", default="numpy", choices=["numpy", "torch"])
    args = parser.parse_args()
    cases = dict(list(CASES.items())[:1]) if args.smoke else CASES
    repeat = 1 if args.smoke else args.repeat
    training = TrainingSpec(global_batch=512, seq_len=8192)
    print(f"{'case':32s} {'layers':>6s} {'verify s':>9s} {'sharded s':>10s} {'reference s':>12s} {'ratio':>7s}  passed")
    for name, plan in cases.items():
        total, sharded, reference = [], [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            # 4 layers: pp * vpp * layers_per_stage
            report = verify(LLAMA3_8B_SHAPE, training, plan, layers_per_stage=4 // (plan.pp * plan.vpp),
                            oracle=args.oracle)
            total.append(time.perf_counter() - t0)
            sharded.append(report.sharded_s)
            reference.append(report.reference_s)
        med = statistics.median
        print(f"{name:32s} {report.model.layers:6d} {med(total):9.3f} {med(sharded):10.3f} {med(reference):12.4f} "
              f"{med(sharded) / med(reference):7.1f}  {report.passed}")
    print(f"oracle {args.oracle}, 3 optimizer steps; target: verify s < 5 on 2 cores")


if __name__ == "__main__":
    main()
