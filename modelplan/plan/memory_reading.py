"""What a memory counter would read on a GPU whose memory is the predicted `StageMemory`: the
like-for-like figure to compare with a published peak.

- `allocated`: `torch.cuda.max_memory_allocated()`, the live tensors at their peak: model
  states, activations and the buffers PyTorch allocates (pipeline send/recv, DP buckets); not
  the caching allocator's cache, the CUDA context or NCCL's own buffers (NCCL allocates its
  channel buffers itself, `ncclCudaCalloc`, outside PyTorch's allocator).
- `reserved`: `torch.cuda.max_memory_reserved()` (torchtitan's `max_reserved_gib`,
  Megatron's `max reserved`): the allocator's segments, allocated plus its cache (the
  `fragmentation` allowance); still without the CUDA context and NCCL's buffers.
- `device`: nvidia-smi / NVML "memory used": everything, the plan's `total`.
PyTorch "CUDA semantics: memory management" (torch.cuda.memory_reserved >= memory_allocated;
"the unused memory managed by the allocator will still show as if used in nvidia-smi").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from modelplan.plan.results import StageMemory

MemoryReading = Literal["allocated", "reserved", "device"]
READINGS: tuple[MemoryReading, ...] = ("allocated", "reserved", "device")


def memory_reading(stage: StageMemory, reading: MemoryReading) -> float:
    """Bytes the counter `reading` reports for one stage's GPU (see the module docstring)."""
    if reading == "device":
        return stage.total
    allocated = stage.weights + stage.gradients + stage.optimizer + stage.activations + stage.comm_buffers
    allocated -= stage.nccl_buffers
    if reading == "allocated":
        return allocated
    if reading == "reserved":
        return allocated + stage.fragmentation
    raise ValueError(f"memory reading must be one of {', '.join(READINGS)}, got {reading!r}")


def peak_reading(stages: Iterable[StageMemory], reading: MemoryReading) -> float:
    """The largest stage's `memory_reading` (a published peak is the heaviest rank's)."""
    return max(memory_reading(s, reading) for s in stages)
