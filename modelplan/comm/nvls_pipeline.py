"""The pipeline fill of NCCL's single-node NVLS AllReduce, which tuning.cc's time leaves out.

tuning.cc prices NVLS as `latency + n / algbw`, as if every byte streamed at the saturated rate.
The kernel (src/device/all_reduce.h, RunWorkColl<AllReduce, NVLS, Simple>, `oneNode`) runs three
warp groups per channel as a pipeline: *scatter* copies the user buffer into the NVLS buffers of
the nHeads heads, *reduce* (one per head) does multimem.ld_reduce + multimem.st through the
switch, *gather* copies the result out. Each works on one loop of nHeads x chunkSize bytes per
channel, so over all channels a loop is

    loop = nvlsChannels x nHeads x chunkSize      (nHeads = ranks in the node, search.cc)

and the pipeline takes (loops + STAGES - 1) loop-times: STAGES - 1 = 2 loops on top of
tuning.cc's n / algbw. NCCL shrinks chunkSize for smaller calls (enqueue.cc calcCollChunking),
so the fill is 2 x 2 MiB on 8x H200 at 2-8 MiB, 2 x 4 MiB at 8-64 MiB, 2 x 8 MiB at 64 MiB-1 GiB,
2 x 16 MiB above: ~1 % of a 4 GiB call, ~25 % of a 16 MiB one. A call smaller than one loop
fills with its own bytes (the last loop's chunk is the remainder, all_reduce.h lastChunkSize).

NCCL picks the algorithm by tuning.cc's time without this term (enqueue.cc topoGetAlgoInfo), so
callers choose by `Choice.time_s` and add `fill_s` to the chosen one only.
Constants: NVIDIA/nccl master 5067397 (v2.30-era); the same values since the 2.2x releases.
"""

from __future__ import annotations

KIB = 1024

NVLS_CHANNELS = {"hopper": 16, "blackwell": 24}
"""nvls.cc ncclNvlsTuning: NVLS_NCHANNELS_SM90 16; sm100 one node NVLS_NCHANNELS_SM100_NVL 24."""
NVLS_CHUNK_BYTES = 128 * KIB  # nvls.cc NCCL_PARAM(NvlsChunkSize, "NVLS_CHUNKSIZE", 128 * 1024)
PIPELINE_STAGES = 3  # all_reduce.h RunWorkColl NVLS oneNode: scatter, reduce, gather warp groups

# enqueue.cc calcCollChunking, NCCL_ALGO_NVLS: chunkSize -> 64 / 32 / 16 KiB while
# nBytes < 64 / 8 / 2 x (nChannels x nHeads x chunkSize)
CHUNK_STEPS = ((64, 64 * KIB), (8, 32 * KIB), (2, 16 * KIB))


def nvls_concurrent_ops(arch: str, ranks: int) -> int:
    """enqueue.cc concurrentOps = nChannels x nvls.nHeads (one head per GPU of the node); 0: no NVLS."""
    return NVLS_CHANNELS.get(arch, 0) * ranks


def nvls_chunk_bytes(nbytes: float, concurrent_ops: int) -> int:
    """chunkSize calcCollChunking picks for an NVLS AllReduce of `nbytes` (one node)."""
    chunk = NVLS_CHUNK_BYTES
    for factor, smaller in CHUNK_STEPS:
        if nbytes < factor * concurrent_ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def nvls_fill_bytes(nbytes: float, concurrent_ops: int) -> float:
    """Bytes-worth of time the pipeline adds: (STAGES - 1) loops, a loop at most the call itself."""
    if concurrent_ops <= 0:
        return 0.0
    loop = concurrent_ops * nvls_chunk_bytes(nbytes, concurrent_ops)
    return (PIPELINE_STAGES - 1) * min(float(nbytes), float(loop))
