"""Tile and wave quantization (`benchmarks/gemm_waves.py`, the probe beside its benchmark); every
expected value is worked by hand from NVIDIA's Matrix Multiplication Background User's Guide, sec. "Dimension Quantization Effects":
useful share = m n batch / (ceil(tiles / wave) x wave x tile area), tiles = ceil(m / tile_m)
x ceil(n / tile_n) x batch, wave = SMs x tiles per SM."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # not part of the package

from gemm_waves import best_quantized_efficiency, quantized_efficiency  # noqa: E402

A100_SMS, H100_SMS = 108, 132  # NVIDIA A100 / H100 architecture whitepapers (presets/accelerators)


def test_one_full_wave_is_fully_used():
    """108 tiles of 256x128 (9 x 12) on A100's 108 SMs: one full wave, every tile whole: 1.0."""
    assert quantized_efficiency(9 * 256, 12 * 128, 1, A100_SMS, 256, 128) == pytest.approx(1.0)


def test_one_point_one_waves_run_as_two():
    """120 tiles (10 x 12) on 108 SMs are 1.11 waves, run as 2: 120 / 216 = 1.11 / 2 of the rate."""
    assert quantized_efficiency(10 * 256, 12 * 128, 1, A100_SMS, 256, 128) == pytest.approx(120 / 216)


def test_partial_edge_tile_costs_a_whole_one():
    """m = 257 needs 2 tiles of 256 rows (1 SM, 1 tile per wave, 2 waves): 257 / 512 useful."""
    assert quantized_efficiency(257, 128, 1, 1, 256, 128) == pytest.approx(257 / 512)


def test_batched_gemms_share_the_waves():
    """A batch of 132 single-tile GEMMs (128 x 256 each) on H100's 132 SMs: one full wave, 1.0;
    a batch of 133 needs 2 waves: 133 / 264."""
    assert quantized_efficiency(128, 256, 132, H100_SMS, 128, 256) == pytest.approx(1.0)
    assert quantized_efficiency(128, 256, 133, H100_SMS, 128, 256) == pytest.approx(133 / 264)


def test_two_tiles_per_sm_double_the_wave():
    """With 2 resident tiles per SM a wave is 216 tiles on A100: 120 tiles are 120 / 216 of one wave."""
    assert quantized_efficiency(10 * 256, 12 * 128, 1, A100_SMS, 256, 128, ctas_per_sm=2) == pytest.approx(120 / 216)


def test_best_tile_takes_the_better_orientation():
    """(m, n) = (128, 27648) on 108 SMs: 128x256 tiles give 1 x 108 tiles, one full wave (1.0);
    256x128 tiles give 1 x 216 half-empty tiles, 2 waves (128 x 27648 / (216 x 256 x 128) = 0.5)."""
    assert quantized_efficiency(128, 27648, 1, A100_SMS, 256, 128) == pytest.approx(0.5)
    assert best_quantized_efficiency(128, 27648, 1, A100_SMS) == pytest.approx(1.0)


def test_nonpositive_dimension_is_rejected_by_name():
    """A zero SM count is an error naming the field."""
    with pytest.raises(ValueError, match=r"sm_count \(0\) must be > 0"):
        quantized_efficiency(128, 128, 1, 0, 128, 128)
