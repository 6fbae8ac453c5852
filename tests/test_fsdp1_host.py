"""FSDP1 host / limiter / latency helpers (`benchmarks/fsdp1_host.py`, the probe beside
`bench_fsdp1_host.py`). Expected values are hand arithmetic on published figures (llm-foundry
scripts/train/benchmarking/README.md 'H100 80GB FP8' table; pytorch/pytorch#108234's 235 us) and
torch's own FSDP1 rate limiter (torch/distributed/fsdp/_limiter_utils.py)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # not part of the package

from fsdp1_host import (host_upper_s, latency_bound_s, limiter_exposed_s, needed_per_op_s,  # noqa: E402
                        unit_bound_step_s)


def test_needed_per_op_of_the_readme_1b_fp8_row():
    """MPT-1b, seq 512, 8 H100, global batch 1792, micro-batch 56 (4 micro-batches per rank),
    70,315 T/s/GPU: step = 1792 x 512 / (70,315 x 8) = 1.6312 s; per block (24) and micro-batch
    16.99 ms; over 32 listed host ops 531 us each."""
    step = 1792 * 512 / (70315 * 8)
    unit = step / (24 * 4)
    assert unit == pytest.approx(16.99e-3, rel=1e-3)
    assert needed_per_op_s(unit, 32) == pytest.approx(531e-6, rel=2e-3)


def test_host_upper_bound_adds_ops_limiter_gaps_and_hooks():
    """32 ops x 125 us + 2 syncs x 235 us + 4 hooks x 1 ms = 4.00 + 0.47 + 4.00 = 8.47 ms."""
    assert host_upper_s(32, 125e-6, 2, 235e-6, 4, 1e-3) == pytest.approx(8.47e-3)


def test_limiter_gap_is_hidden_by_a_unit_longer_than_gap_plus_collectives():
    """Forward of MPT-1b's block on H100 ~4.5 ms against 0.235 + 0.52 ms: nothing exposed."""
    assert limiter_exposed_s(235e-6, 0.52e-3, 4.5e-3) == 0.0


def test_limiter_gap_is_exposed_when_the_collectives_fill_the_unit():
    """1.0 ms of collectives beside a 1.0 ms unit: the whole 235 us gap idles the GPU."""
    assert limiter_exposed_s(235e-6, 1.0e-3, 1.0e-3) == pytest.approx(235e-6)


def test_latency_bound_is_every_collective_of_the_unit():
    """AllGather before forward, before backward and the ReduceScatter: 3 x 0.625 ms = 1.875 ms."""
    assert latency_bound_s(0.625e-3, 3) == pytest.approx(1.875e-3)


def test_unit_bound_changes_nothing_below_the_device_time():
    assert unit_bound_step_s(10.0, 24, 4, 15e-3, 8e-3) == 10.0


def test_unit_bound_adds_the_host_excess_on_every_unit_and_micro_batch():
    """24 units x 4 micro-batches x (20 - 15) ms = 0.48 s."""
    assert unit_bound_step_s(10.0, 24, 4, 15e-3, 20e-3) == pytest.approx(10.48)


def test_torch_fsdp1_limiter_keeps_two_all_gathers_in_flight():
    """The CPU blocks only once two free events are queued, on the oldest (FIFO): the bound the
    probe's one-unit run-ahead assumes (torch/distributed/fsdp/_limiter_utils.py)."""
    limiter_utils = pytest.importorskip("torch.distributed.fsdp._limiter_utils")
    queue = limiter_utils._FreeEventQueue()
    assert queue._max_num_inflight_all_gathers == 2
    queue.enqueue("free event of unit k-2")
    assert queue.dequeue_if_needed() is None
    queue.enqueue("free event of unit k-1")
    assert queue.dequeue_if_needed() == "free event of unit k-2"
