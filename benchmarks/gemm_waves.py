"""Tile and wave quantization of one GEMM on a GPU: the share of its tensor-core work that is useful.

NVIDIA, "Matrix Multiplication Background User's Guide" (Deep Learning Performance documentation,
docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication, sec. "Dimension
Quantization Effects"): the output (m, n) is cut into tile_m x tile_n thread-block tiles, each
computed whole (a partial tile at an edge costs a full one: tile quantization); the tiles run in
waves of as many tiles as the GPU holds at once, one per SM for the guide's 256x128 tile on A100
(108 SMs; a wave of 108 tiles), and a partial last wave costs a full one (wave quantization).
Useful work / work run = m n batch / (waves x wave size x tile_m x tile_n).

Not part of the planner, so it lives beside its benchmark, not in the package: the roofline
(`compute.Roofline`) prices a GEMM at the measured MAMF times the cost model's `sustained_fraction`,
independent of shape; priced over the published runs this model did not improve them (benchmarks/bench_gemm_waves.py; benchmarks/published_runs_model.md, "GEMM tile and
wave quantization").
"""

from __future__ import annotations

from functools import lru_cache

CUBLAS_LARGE_TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256))
"""The guide's most efficient thread-block tiles ("256x128 ... 128x256" listed first, larger tiles
having more data reuse); the guide's wave example uses 256x128 on A100."""


@lru_cache(maxsize=1 << 16)
def quantized_efficiency(m: int, n: int, batch: int, sm_count: int, tile_m: int, tile_n: int,
                         ctas_per_sm: int = 1) -> float:
    """Useful share of the tiles' work for `batch` GEMMs of output (m, n) on `sm_count` SMs, each
    SM holding `ctas_per_sm` tiles of tile_m x tile_n at once (module docstring)."""
    for name, value in (("m", m), ("n", n), ("batch", batch), ("sm_count", sm_count), ("tile_m", tile_m),
                        ("tile_n", tile_n), ("ctas_per_sm", ctas_per_sm)):
        if value <= 0:
            raise ValueError(f"{name} ({value}) must be > 0")
    tiles = -(-m // tile_m) * -(-n // tile_n) * batch  # tile quantization: ceil per dimension
    wave = sm_count * ctas_per_sm
    waves = -(-tiles // wave)  # wave quantization: a partial wave runs as a whole one
    return m * n * batch / (waves * wave * tile_m * tile_n)


@lru_cache(maxsize=1 << 16)
def best_quantized_efficiency(m: int, n: int, batch: int, sm_count: int,
                              tiles: tuple[tuple[int, int], ...] = CUBLAS_LARGE_TILES, ctas_per_sm: int = 1) -> float:
    """The highest `quantized_efficiency` over `tiles` (a library picking the best-fitting tile of
    equally fast ones; the guide: cuBLAS heuristics choose among its tile sizes per shape)."""
    return max(quantized_efficiency(m, n, batch, sm_count, tm, tn, ctas_per_sm) for tm, tn in tiles)
