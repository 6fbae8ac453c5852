"""benchmarks/param_gather_window.py: the forward window of Megatron-core's overlapped parameter
AllGather, worked by hand from the schedule the module docstring quotes."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from param_gather_window import megatron_gather_window_s  # noqa: E402


def test_without_interleaving_the_window_is_the_first_microbatch_forward():
    """vpp 1: the pre-hooks wait inside the first forward only (distributed_data_parallel.py), 0.2 s."""
    assert megatron_gather_window_s(0.2, 5, pp=1, vpp=1) == pytest.approx(0.2)
    assert megatron_gather_window_s(0.2, 80, pp=4, vpp=1) == pytest.approx(0.2)


def test_interleaved_chunks_hide_behind_the_group_before_them():
    """pp 4, vpp 2, t_fwd 0.8 s: chunk forward 0.4 s; chunk 0 its own 0.4 s, chunk 1 pp x 0.4 = 1.6 s."""
    assert megatron_gather_window_s(0.8, 16, pp=4, vpp=2) == pytest.approx(0.4 + 1.6)


def test_never_more_than_the_step_forwards():
    """pp 8, vpp 4, 2 micro-batches of 0.1 s: the hand window 0.025 + 3 x 8 x 0.025 = 0.625 s caps at 0.2 s."""
    assert megatron_gather_window_s(0.1, 2, pp=8, vpp=4) == pytest.approx(0.2)
