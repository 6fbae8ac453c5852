"""benchmarks/check_cli_parity.py on the rows the CLI used to refuse or price differently: the
CLI with the run's published settings gives the bench's own figure (two code paths: typer's
`modelplan plan` search with every axis fixed, and the bench's direct `estimate_split` of the
run's Plan)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import check_cli_parity  # noqa: E402

RUNS = {r["id"]: r for r in check_cli_parity.bench.load_runs()}


@pytest.mark.parametrize("run_id", [
    "mbridge2511_qwen3_235b_a22b_h100_fp8",  # tp 2, dp 16, ep 32, etp 1: refused before --etp
    "torchtitan_llama3_8b_a100_sacop",  # fused_norm: +7.1 % before --fused-norm
    "ibm_fsdp_llama2_7b_a100",  # HSDP 8: -1.1 % while --fsdp-shard-size 8 also tried plain sharding
    "flagperf_llama2_7b_deepspeed_zero3_a800_seq4096_mbs1_gbs8",  # elementwise eager: needs --elementwise
    "flagperf_llama3_8b_a800_bf16_pp1dp1tp8_8gpu",  # hardware intra_gbps (A800 NVLink) through the cluster file
])
def test_cli_gives_the_bench_figure(run_id):
    row = check_cli_parity.check(RUNS[run_id], CliRunner(), 0.01)
    assert row["status"] == "ok", row
    assert row["cli_s"] == pytest.approx(row["bench_s"], rel=1e-9)
