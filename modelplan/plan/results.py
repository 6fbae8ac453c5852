"""Frozen results of the planner: a plan's step-time and memory breakdown, and a search's answer."""

from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from modelplan.specs.plan import Plan


class Result(BaseModel):
    """Frozen result model."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class StepTime(Result):
    """Seconds of one optimizer step on the slowest pipeline stage; the terms sum to step_time_s."""

    step_time_s: float
    compute_s: float
    """Block, embedding and head kernels of all micro-batches (forward + backward)."""
    recompute_s: float
    """The recomputed forward (full: whole blocks; selective: attention core)."""
    tp_comm_s: float
    """Exposed tensor-parallel collectives (AllReduce, or AllGather + ReduceScatter with SP)."""
    pp_comm_s: float
    """Exposed pipeline send/recv (one per micro-batch per direction per chunk)."""
    bubble_s: float
    """Pipeline fill and drain: the schedule's idle micro-batch times ((pp - 1)/vpp for Megatron's
    schedules) times one micro-batch's mean stage time (`parallel/pp.py`)."""
    dp_comm_s: float
    """Exposed data-parallel traffic (gradient reduction, ZeRO gathers) not hidden by backward."""
    embedding_sync_s: float
    """AllReduce of the gradients of units held by several pipeline ranks: the tied word
    embedding (first and last stage), every stage under DualPipe (`parallel/pp.py`)."""
    optimizer_s: float
    """Optimizer step (memory-bound), plus each micro-batch's accumulation of 16-bit gradients into
    fp32 ones where the engine does it apart from backward (DeepSpeed BF16_Optimizer)."""
    dp_comm_total_s: float
    """All data-parallel traffic, hidden or not (for reference)."""
    tp_hidden_s: float
    """Tensor-parallel traffic overlapped with compute (for reference)."""
    ep_comm_s: float = 0.0
    """Expert-parallel AllToAll dispatch and combine (MoE), on the critical path."""
    cp_comm_s: float = 0.0
    """Context-parallel K, V (and dK, dV) ring traffic not hidden behind the attention core."""
    cp_hidden_s: float = 0.0
    """Context-parallel ring traffic hidden behind the attention core (for reference)."""
    offload_s: float = 0.0
    """Exposed offload: activation copies between HBM and host beyond the blocks' compute, and the
    host optimizer step with its gradient / weight copies (`modelplan.comm.offload`)."""
    host_s: float = 0.0
    """Host issue time beyond the GPU's in the merged-1F1B EP-overlap slots (`plan/host_issue.py`)."""

    def terms(self) -> dict[str, float]:
        """The additive terms in display order."""
        names = ("compute_s", "recompute_s", "tp_comm_s", "ep_comm_s", "cp_comm_s", "pp_comm_s", "bubble_s",
                 "dp_comm_s", "embedding_sync_s", "optimizer_s", "offload_s", "host_s")
        return {n: getattr(self, n) for n in names}


class StageMemory(NamedTuple):
    """Bytes on one GPU of one pipeline stage; `total` is what must fit (a tuple: the search
    builds two per plan; results serialize it field by field)."""

    stage: int
    weights: float
    gradients: float
    optimizer: float
    """fp32 master weights and optimizer states."""
    activations: float
    comm_buffers: float
    fragmentation: float
    reserved: float
    """CUDA context and library workspaces."""
    total: float
    nccl_buffers: float = 0.0
    """The part of `comm_buffers` NCCL allocates itself, outside PyTorch's caching allocator
    (`plan/memory_reading.py`)."""


StageMemoryField = Annotated[StageMemory, PlainSerializer(lambda s: s._asdict())]


class PlanEstimate(Result):
    """A valid plan with its predicted step time, throughput and per-stage memory."""

    plan: Plan
    num_microbatches: int
    step: StepTime
    throughput_per_s: float
    """The global batch per second, in `throughput_unit`."""
    throughput_unit: Literal["tokens", "samples"] = "tokens"
    """What the family's batches count: tokens (batch x seq_len) or samples (`specs/family.py`)."""
    model_tflops_per_gpu: float
    """Model FLOPs (fwd + bwd, no recompute) per second per GPU."""
    hardware_tflops_per_gpu: float
    """FLOPs the GPUs execute (with recompute) per second per GPU."""
    mfu: float
    """Model FLOPs utilisation (PaLM, Chowdhery et al. 2022 app. B)."""
    hfu: float
    """Hardware FLOPs utilisation (recompute included)."""
    model_flops: float
    hardware_flops: float
    bubble_fraction: float
    """Bubble time over the pipeline's busy time."""
    memory: list[StageMemoryField]
    """First and last stage (one entry when pp = 1): the largest stages."""
    peak_memory_bytes: float
    memory_budget_bytes: float
    """Accelerator memory * (1 - headroom)."""
    fits: bool
    notes: list[str] = Field(default_factory=list)
    """Conventions this plan relies on (vocab padding, KV replication)."""
    cp_comm_type: str | None = None
    """The context-parallel exchange a search chose for this cp > 1 plan, the cheapest of the
    engine's (`plan/cp_search.py`); None: the run's or the engine's default."""

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens per second (None for a family that counts samples)."""
        return self.throughput_per_s if self.throughput_unit == "tokens" else None


class SearchResult(Result):
    """The ranked answer of a search and what it rejected."""

    gpus: int
    best: list[PlanEstimate]
    """Fitting plans, fastest first (top-k)."""
    evaluated: int
    """Plans timed in full."""
    bounded: int
    """Valid plans that fit but were skipped: a lower bound of their step time (without DP
    traffic) was already slower than the k-th best."""
    candidates: int
    """Plan combinations considered (evaluated + bounded + rejected)."""
    rejected: dict[str, int]
    """Plans rejected per reason."""
    examples: dict[str, str]
    """One message per rejection reason, with its numbers."""
    wall_s: float
    near_fit_margin: float = 0.0
    """0 when the plans fit their budget. Otherwise no plan did, and these are the best whose
    estimated peak is within this fraction above it (`CostModel.near_fit_margin`, `plan/near_fit.py`):
    each has `fits` False and a note saying by how much it is over."""
