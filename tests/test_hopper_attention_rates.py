"""The Hopper parts' fused-attention rates are one causal measurement of both passes
(presets/accelerators h100-sxm, h100-sxm-500w, h200; published_runs_model.md n22dense).

Source of every expected number: NVIDIA/cudnn-frontend b740542 (2024-05-07)
benchmark/benchmark_results.csv, H200 at 700 W, clocks locked to 1980 MHz, cuDNN 9.1.0, bf16, batch 2,
16 heads, seq 8192, head dim 128, causal: cuDNN 572.9 TFLOP/s forward / 463.5 backward, PyTorch SDPA
(FlashAttention-2) 325.1 / 277.4; the same file's no-mask rows: cuDNN 668.7 / 530.4, PyTorch
355.4 / 303.3. Its FLOP count is flash-attn's (causal: half of 4 b s^2 h d; backward 2.5x the
forward), which is `FusedAttention.fwd_flops` / `bwd_flops`. The H100's dense bf16 peak is 989.4
TFLOP/s (NVIDIA H100 datasheet).
"""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.count.attention import FusedAttention
from modelplan.plan.compute import Roofline
from modelplan.specs.costmodel import CostModel

H100_PEAK_TFLOPS = 989.4
CSV_CAUSAL = {"cudnn": (572.9, 463.5), "fa2": (325.1, 277.4)}  # TFLOP/s, fwd / bwd, causal, 8k
CSV_NO_MASK = {"cudnn": (668.7, 530.4), "fa2": (355.4, 303.3)}


@pytest.mark.parametrize("cluster", ["dgx-h100", "grand-teton-h100", "dgx-h200"])
@pytest.mark.parametrize("kernel", ["cudnn", "fa2"])
def test_hopper_rates_are_the_causal_measurement(cluster, kernel):
    """Each Hopper preset lists the causal pair of the cudnn-frontend table, to two decimals."""
    fwd, bwd = load_cluster(cluster).accelerator.attention_efficiency[kernel]
    assert (fwd, bwd) == (round(CSV_CAUSAL[kernel][0] / H100_PEAK_TFLOPS, 2),
                          round(CSV_CAUSAL[kernel][1] / H100_PEAK_TFLOPS, 2))


def test_causal_backward_is_slower_than_the_no_mask_one():
    """The reason for the change: at 8k the causal backward runs 463.5 / 530.4 = 0.874 (cuDNN) and
    277.4 / 303.3 = 0.915 (FA2) of the no-mask backward that the FA3 paper's Fig. 6 shows."""
    for kernel, (_, bwd) in CSV_CAUSAL.items():
        assert bwd / CSV_NO_MASK[kernel][1] < 0.92
    assert CSV_CAUSAL["cudnn"][1] / CSV_NO_MASK["cudnn"][1] == pytest.approx(0.874, abs=1e-3)


def test_a_causal_backward_on_h100_is_priced_at_that_rate():
    """One causal head of 8192 tokens, d 128, under TE's cuDNN kernel on H100 with no kernel
    overhead: forward FLOPs 4 x 8192^2 x 128 x 8193 / 16384 = 17,181,966,336 (the s (s + 1) / 2
    visible pairs, diagonal included); backward 2.5x that at 989.4e12 x 0.47 x 0.8 (sustained
    fraction) FLOP/s = 115.47 us (it was 104.36 us at the no-mask 0.52)."""
    cost = CostModel(kernel_overhead_us=0)
    roof = Roofline.of(load_cluster("dgx-h100").accelerator, "bf16", cost, ("cudnn", "fa2"))
    op = FusedAttention("core", 1, 8192, 8192, 128, causal=True)
    assert op.fwd_flops == 17_181_966_336
    assert roof.fused_bwd_s(op) == pytest.approx(2.5 * 17_181_966_336 / (989.4e12 * 0.47 * 0.8), rel=1e-9)
    assert roof.fused_bwd_s(op) == pytest.approx(115.47e-6, rel=1e-4)
