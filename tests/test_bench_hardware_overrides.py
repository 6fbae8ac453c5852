"""The bench's per-run hardware overrides (benchmarks/bench_published_runs.py `_cluster`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_published_runs as bench  # noqa: E402

# NVIDIA A800 40GB / 80GB datasheet: NVLink 400 GB/s (both directions) = 200 GB/s per direction,
# against the A100's 600 GB/s = 300 GB/s per direction (the dgx-a100 preset's intra link).
A800_NVLINK_GBPS = 200.0


def test_intra_gbps_sets_the_node_link_only():
    """hardware.intra_gbps replaces the intra-node bandwidth and leaves the network and the part alone."""
    base = bench.load_cluster("dgx-a100")
    a800 = bench._cluster({"cluster": "dgx-a100", "hardware": {"intra_gbps": A800_NVLINK_GBPS}})
    assert a800.intra.bandwidth_gbps == A800_NVLINK_GBPS
    assert base.intra.bandwidth_gbps == 300.0  # 12 NVLink3 links x 25 GB/s, the preset
    assert a800.inter == base.inter
    assert a800.accelerator == base.accelerator


def test_narrower_nvlink_prices_a_tp8_step_slower():
    """A TP-8 run (all its TP collectives on NVLink) is priced slower on the A800's 200 GB/s than on 300 GB/s."""
    run = next(r for r in bench.load_runs() if r["id"] == "flagperf_llama3_8b_a800_bf16_pp1dp1tp8_8gpu")
    assert run["hardware"] == {"intra_gbps": A800_NVLINK_GBPS}
    a800 = bench.price(run)
    a100 = bench.price({k: v for k, v in run.items() if k != "hardware"})
    assert a800["predicted_s"] > a100["predicted_s"]
