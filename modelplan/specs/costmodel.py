"""Constants of the planner's step-time and memory model that are neither model nor hardware.

Hardware figures (peak TFLOP/s, measured matmul efficiency, HBM bandwidth, link bandwidths)
live in the accelerator / cluster presets. What is left are properties of the training
software and of running kernels back to back inside a real step; they are gathered here, each
with its source, so no formula hides a constant. ONE instance (the defaults) reproduces all
ten Megatron-LM runs of Narayanan et al. 2021 Table 1 (see benchmarks/bench_calibration.py).
"""

from __future__ import annotations

from pydantic import Field

from modelplan.specs.base import Spec


class CostModel(Spec):
    """Software/overlap constants of the step-time and memory model (defaults: Megatron-LM)."""

    sustained_fraction: float = Field(0.8, gt=0, le=1)
    """Fraction of the isolated-kernel rate (the accelerator's measured MAMF and HBM figures)
    that kernels keep inside a whole training step: clocks under sustained power draw, cuBLAS
    heuristic tiles instead of the brute-force best shape, launch gaps and host overhead.
    Fitted once to Narayanan et al. 2021 Table 1 (the ten rows agree within a few % with 0.8);
    physically 0.75-0.95 (PaLM reports 57.8 % HFU on TPU v4, Megatron 52 % on A100 with
    MAMF at 87 %)."""
    hbm_efficiency: float = Field(0.85, gt=0, le=1)
    """Fraction of the HBM peak that streaming elementwise kernels reach (STREAM-like copy /
    fused softmax; Calculon's A100 profile uses 0.9 for >= 100 MB transfers)."""
    kernel_overhead_us: float = Field(4.0, ge=0)
    """Fixed time per kernel (launch + ramp-up + tail wave), added to every GEMM; makes small
    GEMMs less efficient (CUDA launch latency is 3-5 us; nsys traces of small matmuls)."""
    ep_overlap_host_op_us: float = Field(33.3, ge=0)
    """Host time per issued op in a merged-1F1B EP-overlap slot (`plan/host_issue.py`): calibrated
    on Megatron-Bridge PR #1760's Qwen3-235B-A22B B200 BF16 run with `moe_a2a_overlap` (17.2 s;
    `benchmarks/bench_ep_overlap_host.py`), no bench row; published per-op range 5-25 us (n13host)."""
    tp_exposed_fraction: float = Field(1.0, ge=0, le=1)
    """Share of tensor-parallel collectives on the critical path (1.0: classic Megatron TP,
    no userbuffer overlap; comm_hw.md section 5.3 suggests 0.2-0.5 with TE tp_comm_overlap)."""
    dp_overlap: bool = True
    """Overlap the data-parallel gradient reduction with the backward pass of the last
    micro-batch (PyTorch DDP buckets / Megatron overlap_grad_reduce)."""
    dp_overlap_fraction: float = Field(0.9, ge=0, le=1)
    """Share of that backward pass usable to hide the reduction; exposed time is
    max(one bucket, t_comm - fraction * t_backward) (comm_hw.md section 5.6 heuristic)."""
    overlap_interference: float = Field(0.1, ge=0, le=1)
    """Cost of hiding communication behind compute: each hidden second still adds this much
    (NCCL kernels take SMs and HBM bandwidth from the overlapped GEMMs; comm_hw.md section 5.1
    says "some percent, make it a parameter"; Calculon's A100 profile charges 15 % on NVLink)."""
    dp_bucket_bytes: int = Field(40_000_000 * 4, gt=0)
    """Gradient bucket size in bytes; the last bucket is never hidden (Megatron-core default
    bucket of 40M parameters, fp32 grads: 160 MB)."""
    pp_p2p_exposed_fraction: float = Field(1.0, ge=0, le=1)
    """Share of each pipeline send/recv on the critical path (1.0: Megatron's blocking
    batched p2p of 2021; comm_hw.md section 5.4)."""
    flash_fwd_efficiency: float = Field(0.6, gt=0, le=1)
    """Fraction of the dense peak a fused (flash) attention forward sustains in isolation, on
    FLOPs of the tiles it computes: FlashAttention-2 on A100 reaches ~190-200 of 312 TFLOP/s
    (causal, head dim 128, seq 2k-16k; Dao 2023, arXiv 2307.08691, Fig. 6), FlashAttention-3 on
    H100 ~500-640 of 989 (Shah et al. 2024, arXiv 2407.08608, Fig. 4 causal): ~0.6 on both."""
    flash_bwd_efficiency: float = Field(0.5, gt=0, le=1)
    """The same for the fused backward (recomputes the scores; 2.5x the forward's FLOPs):
    FlashAttention-2 on A100 ~150-170 of 312 TFLOP/s, FlashAttention-3 on H100 ~450-500 of 989
    (same papers' backward figures): ~0.5."""
    fp8_scaled_gemm_factor: float = Field(0.55, gt=0, le=1)
    """Rate of a row- or block-scaled fp8 GEMM (torch._scaled_mm's CUTLASS rowwise kernel,
    blockwise kernels) relative to cuBLAS's per-tensor-scaled fp8 GEMM. Fitted: no kernel
    benchmark was found; chosen with torchtitan's Llama 3 70B / 8B rowwise runs (fit split),
    which run at the bf16 speed end to end (torchtitan asyncTP_llama3_h100_2025-06)."""
    vocab_divisible_by: int = Field(128, gt=0)
    """Megatron pads the vocabulary to a multiple of this times tp (make-vocab-size-divisible-by)."""
    fragmentation_fraction: float = Field(0.05, ge=0, lt=1)
    """Allowance for the caching allocator's block rounding and fragmentation, as a fraction of
    the activation and buffer bytes (the tensors allocated and freed every step; model states
    are a few contiguous buffers allocated once) (PyTorch CUDA caching allocator, 512-byte / 2 MB
    blocks)."""
    near_fit_margin: float = Field(0.10, ge=0, lt=1)
    """When no plan fits, `modelplan plan` shows the best plans whose estimated peak is within this
    fraction above the budget, each marked as not fitting by the estimate (`plan/near_fit.py`),
    instead of refusing: on published peaks held out of every fit the memory estimate over-predicts
    by up to 15.5 %, 10 % or less for 90 % of them (benchmarks/bench_published_runs.py, 61 held-out
    rows at d56e360), so a run it puts a few per cent over may well have trained. A judgment on the
    estimate's measured error, not fitted to any run; 0 refuses every plan over the budget."""
    runtime_reserved_bytes: int = Field(1_000_000_000, ge=0)
    """Memory the model never sees: CUDA context, cuBLAS/cuDNN workspaces (~0.5-1 GB on A100/H100)."""
    nccl_buffer_bytes_per_group: int = Field(200_000_000, ge=0)
    """NCCL buffers per communicator this rank belongs to: 4 MiB Simple buffer x ~24 channels
    x 2 ring peers (+ LL/LL128 buffers) (NCCL_BUFFSIZE default 4 MiB)."""
