"""Host issue time of Megatron-core's merged-1F1B EP overlap (issue 13, n19epoverlap).

A rank issues its kernels from one host thread; the GPU runs ahead only until the host waits for
it. Megatron-core's all-to-all dispatcher waits once per MoE block forward when it is dropless
(`token_dispatcher.py` `preprocess`: `before_ep_alltoall`, the split sizes must reach NCCL as host
ints; the DtoH copy on `cuda_dtoh_stream` waits on the compute stream at `before_permutation_1`).
Under `overlap_moe_expert_parallel_comm` (`TransformerLayerSchedulePlan.run`, core_v0.15.0
`models/common/model_chunk_schedule_plan.py`) the host issues, between two of those waits, one
micro-batch's block forward and another's block backward: combine_bwd, attn_fwd, post_attn_fwd,
mlp_bwd, [wait in dispatch_fwd], dispatch_fwd, mlp_bwd_dw, dispatch_bwd, mlp_fwd, combine_fwd,
post_attn_bwd, attn_bwd, attn_dw. The wait drains the compute stream up to the next forward's
router, behind which only that pair's `mlp_bwd` is queued, so a merged slot takes
max(device, host) and the host time does not hide behind a backward that runs ahead (as it does
without the merged schedule, whose backward has no wait). Megatron-Bridge PR #1760 (2025-12-17):
"Disable `moe_a2a_overlap` due to CPU overhead", Qwen3-235B-A22B B200 BF16 17.2 s -> 16.0 s.

Host ops of one merged slot: the block's own (`moe_block_host_ops`, n15moe's engine-true count)
plus the schedule's node calls (`MERGED_NODE_OPS`), each at one host cost per op
(`CostModel.ep_overlap_host_op_us`).
"""

from __future__ import annotations

from modelplan.plan.experts import expert_capacity
from modelplan.plan.fp8 import is_fp8_gemm
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.parallel.ep import unmerged_chunks

FP8_QUANTIZE_LAUNCHES = 3
"""One TE current-scaling quantize of one tensor: nvte_compute_amax, nvte_compute_scale_from_amax,
nvte_quantize_v2 (TE v2.9 quantizer.cpp Float8CurrentScalingQuantizer::quantize); split_quantize
loops over the experts for it (cast.cpp multi_tensor_quantize_impl: fused only for delayed scaling)."""

ROUTER_DISPATCH_OPS = (47, 25)
"""(forward, backward) per MoE block outside the experts: router.py TopKRouter (gating GEMM,
unfused score + top-k ~5, aux loss ~8), token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess
(~7 with the tp_ep all-gather), the DtoH copies on cuda_dtoh_stream with event and wait (~8),
permute / sort_chunks_by_idxs / Fp8Padding / weighted swiglu (~9), combine (sort back, AllToAll,
unpermute, view: ~6), the two dispatch AllToAlls (tokens, probs); backward about half of it."""

MERGED_NODE_OPS = (77, 47)
"""(forward, backward) host calls the merged schedule adds per MoE block (core_v0.15.0
`pipeline_parallel/utils.py` ScheduleNode, `models/gpt/fine_grained_callables.py`), five nodes.
Forward, per node: event.wait + event.record (2), stream enter / exit (2), nvtx push / pop (2),
per input make_viewless (torch.empty + .data: 2) + detach (1), per output make_viewless (2);
attn 11; post_attn 13 + node.detach(residual) 3 = 16; moe_dispatch (2 inputs) 14 + detach(probs) 3
+ free_input record_stream + resize_ per input 4 = 21; mlp 11 + 2 = 13; moe_combine 11 + 2 +
make_viewless_tensor 2 + residual.record_stream 1 = 16: 77. Backward, per node: event wait / record
(2), stream (2), nvtx (2), one autograd run_backward, record_stream per gradient: attn 8, post_attn
10 (3 gradients), moe_dispatch 9, mlp 8, moe_combine 8, plus backward_dw of mlp and attn (nvtx
range each, 2 x 2): 47."""


def expert_ops(fp8: bool) -> tuple[int, int]:
    """(forward, backward) launches per local expert of TEGroupedMLP's fc1 + fc2 (two TE v2.9
    GroupedLinear): forward per linear split_quantize (fp8: 3 per expert) + one cuBLASLt GEMM per
    expert (general_grouped_gemm); backward per linear the grad-output split_quantize (fp8: 3), the
    fp8 weight's column-wise copy for dgrad on Hopper (update_usage: 1), dgrad and wgrad GEMMs (2)."""
    if fp8:
        return 2 * (FP8_QUANTIZE_LAUNCHES + 1), 2 * (FP8_QUANTIZE_LAUNCHES + 1 + 2)
    return 2 * 1, 2 * 2


def attention_ops(spec, training, software, dtype_bytes: int, capacity_factor, tp: int, sp: bool, micro_batch: int,
                  cp: int, ep: int, etp: int | None) -> tuple[int, int]:
    """(forward, backward) host ops of an MoE block's non-MoE part: the planner's kernels outside
    mlp/ (`plan/kernels.py`: GEMMs, element-wise kernels with their eager composites' counts, fused
    attention), one fp8 cast per fp8 GEMM each way, the TP collectives (2 AllReduces, or 2
    AllGathers + 2 ReduceScatters under SP)."""
    tokens = micro_batch * training.seq_len // cp
    routed = tokens * etp // tp if etp else tokens
    capacity = expert_capacity(routed, spec.moe, capacity_factor)
    k = layer_kernels(spec, tp, micro_batch, training.seq_len, dtype_bytes, sp, moe_layer=True, ep=ep,
                      capacity=capacity, cp=cp, attention=training.attention, elementwise=software.elementwise,
                      memory_len=training.seq_len, etp=etp, norm_elementwise=software.norm_elementwise,
                      cp_fp32_merge=software.cp_fp32_merge)
    gemms = [g for g in k.gemms if not g.name.startswith("mlp/")]
    casts = sum(1 for g in gemms if is_fp8_gemm(g.name)) if software.fp8_recipe else 0
    elem = [e for e in k.elementwise if not e.name.startswith("mlp/")]
    comm = (4 if sp else 2) if tp > 1 else 0
    fwd = len(gemms) + sum(e.kernels[0] for e in elem) + len(k.fused) + casts + comm
    bwd = 2 * len(gemms) + sum(e.kernels[1] for e in elem) + len(k.fused) + casts + comm
    return fwd, bwd


def moe_block_host_ops(spec, training, software, dtype_bytes: int, capacity_factor, tp: int, sp: bool,
                       micro_batch: int, cp: int, ep: int, etp: int | None) -> tuple[int, int]:
    """(forward, backward) host ops of one MoE block on one rank, engine-true (n15moe): attention
    side, router and dispatcher, and every local expert's launches."""
    local = spec.moe.num_experts // ep
    ef, eb = expert_ops(bool(software.fp8_recipe))
    af, ab = attention_ops(spec, training, software, dtype_bytes, capacity_factor, tp, sp, micro_batch, cp, ep, etp)
    return af + ROUTER_DISPATCH_OPS[0] + local * ef, ab + ROUTER_DISPATCH_OPS[1] + local * eb


def dispatcher_syncs(spec, tp: int, ep: int) -> bool:
    """Megatron-core's all-to-all dispatcher waits for the host once per MoE block forward when
    dropless (no capacity) and ep * tp > 1 (`preprocess`: before_ep_alltoall)."""
    return spec.moe is not None and spec.moe.capacity_factor is None and ep * tp > 1


def merged_slots(pp: int, vpp: int, rank: int, m: int, moe_run: float) -> float:
    """MoE block slots per step that pipeline rank `rank` runs merged (a forward block with a
    backward block): its m * vpp chunks less the warm-up ones (`ep.unmerged_chunks`), moe_run / vpp
    MoE blocks each."""
    return (m * vpp - unmerged_chunks(pp, vpp, rank, m)) * moe_run / vpp


def merged_host_s(host_ops: int, op_s: float, device_s: float, slots: float) -> float:
    """Seconds the host adds per step: each merged slot takes max(device, host), host = host_ops x
    op_s (the wait in every slot keeps the host from running ahead into the next)."""
    return slots * max(0.0, host_ops * op_s - device_s)
