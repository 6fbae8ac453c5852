"""Serving capacity and speed of a model on N GPUs: a roofline estimate on top of exact memory.

Each replica is `tp` GPUs of one node (Megatron-style tensor parallelism as vLLM runs it); the N
GPUs hold N / tp replicas serving independent requests. Per GPU:

    KV budget    memory x gpu_memory_utilization - weights / tp - activation workspace - runtime
                 reserve; it holds floor(budget / block) paged blocks (vLLM num_gpu_blocks) and
                 floor(blocks / ceil(context / block_size)) full-context sequences.
    decode step  (B sequences, one token each, cache of `context` tokens, the slowest case):
                 max(bytes read / achievable HBM bandwidth, FLOPs / achievable matmul rate)
                 + TP collectives. Bytes: the weights once (MoE: only the experts the batch
                 routes to, uniform routing E(1 - (1 - k/E)^B)) and B x context tokens of KV.
                 FLOPs: 2 per multiply-add of every active linear weight and lm_head per token,
                 plus attention 4 x context x q_width per layer and token (QK^T and PV).
    prefill      (one prompt of `context` tokens): the same roofline with context tokens of linear
                 FLOPs, causal attention 2 q_width c (c + 1) per layer, logits for the last token.
    collectives  2 AllReduces of tokens x hidden x 2 B per layer (attention and MLP outputs) and an
                 AllGather of the vocab-parallel logits, alpha-beta priced on the node's NVLink
                 (`modelplan.comm.cost`), not overlapped.
Achievable rates: the accelerator's measured matmul efficiency (MAMF / peak) and the cost model's
HBM efficiency; fp8 weights run fp8 GEMMs (W8A8), int4 weights dequantize to 16-bit (W4A16).
Estimates, not measurements: no kernel launch gaps, scheduler overhead or speculative decoding.
"""

from __future__ import annotations

import math

from modelplan.comm.cost import collective_time_s
from modelplan.count.linears import Linear, linear_modules
from modelplan.count.quant import quantized_tensor_bytes
from modelplan.count.result import Result
from modelplan.count.serve import ServeMemory, count_serve_memory, serving_layout
from modelplan.errors import SpecError
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.serve import ServeSpec
from modelplan.specs.transformer import TransformerSpec

LOGITS_BYTES = 4  # fp32 logits (vLLM's sampler upcasts)


class Phase(Result):
    """Roofline time of one forward step, its terms and which bound dominates."""


    tokens: int
    """Tokens the step processes (decode: the batch; prefill: the prompt)."""
    step_s: float
    memory_s: float
    compute_s: float
    comm_s: float
    bound: str
    """'memory' or 'compute': the larger of the two roofline terms."""
    read_per_gpu_bytes: float
    """HBM bytes one GPU reads (and writes, for new KV entries)."""
    compute_per_gpu_flops: float


class ServeEstimate(Result):
    """What fits on the GPUs and how fast it runs (per-GPU figures are one TP rank's)."""


    gpus: int
    tp: int
    replicas: int
    memory: ServeMemory
    memory_budget_per_gpu_bytes: float
    """GPU memory x gpu_memory_utilization."""
    activation_workspace_per_gpu_bytes: float
    """Estimate of the largest live activations of a max_batched_tokens forward."""
    runtime_reserved_per_gpu_bytes: float
    kv_budget_per_gpu_bytes: float
    kv_blocks_per_gpu: int
    max_sequences_per_replica: int
    """Full-context sequences whose KV blocks fit (before max_num_seqs)."""
    max_sequences: int
    """All replicas together."""
    batch_per_replica: int
    """Sequences one decode step of a replica runs (given, or the most that fit, capped at max_num_seqs)."""
    fits: bool
    decode: Phase
    decode_tokens_per_s: float
    """All replicas, one token per sequence per step."""
    inter_token_latency_s: float
    prefill: Phase
    """One prompt of `context` tokens on one replica (time to first token without queueing)."""
    prefill_tokens_per_s: float
    """Prompt tokens per second per replica."""


def _active_linear_elements(modules: list[Linear], spec: TransformerSpec) -> tuple[float, float]:
    """(weight elements one token multiplies through the blocks, lm_head elements): MoE experts
    count top_k of num_experts."""
    share = spec.moe.top_k / spec.moe.num_experts if spec.moe is not None else 1.0
    blocks = sum(m.count * m.weight_numel * (share if m.path.startswith("mlp/experts/") else 1.0)
                 for m in modules if m.in_block)
    head = sum(m.weight_numel for m in modules if m.path == "head/lm_head")
    return blocks, head


def _expert_bytes(modules: list[Linear], serve: ServeSpec) -> float:
    """Bytes of all routed-expert weights at the serving precision (0 for dense models)."""
    experts = [m for m in modules if m.path.startswith("mlp/experts/")]
    if serve.weights in ("bf16", "fp16"):
        return sum(m.count * m.weight_numel * serve.weight_bytes for m in experts)
    return sum(m.count * quantized_tensor_bytes(m, serve.weights) for m in experts)


def activation_workspace_bytes(spec: TransformerSpec, serve: ServeSpec) -> float:
    """Estimate: one max_batched_tokens forward keeps the residual and its norm (2h), the q/k/v
    projection, the MLP's inner activations (gated: 3f, plain: 2f) split over tp, and fp32 logits
    of up to max_num_seqs sampled tokens (vocab split over tp)."""
    t, d, tp = serve.max_batched_tokens, serve.weight_bytes, serve.tp
    if spec.moe is not None:
        inner = spec.moe.top_k * spec.moe.expert_ffn_hidden + spec.moe.shared_experts * (
            spec.moe.shared_expert_ffn_hidden or spec.moe.expert_ffn_hidden)
    else:
        inner = spec.ffn_hidden
    width = 2 * spec.hidden + (spec.q_width + 2 * spec.kv_width + (3 if spec.gated_mlp else 2) * inner) / tp
    return t * d * width + min(t, serve.max_num_seqs) * spec.vocab / tp * LOGITS_BYTES


def _phase(tokens: int, bytes_per_gpu: float, flops_per_gpu: float, comm_s: float, cluster: Cluster,
           serve: ServeSpec, cost: CostModel) -> Phase:
    acc = cluster.accelerator
    precision = {"fp8": "fp8", "fp16": "fp16"}.get(serve.weights, "bf16")
    memory_s = bytes_per_gpu / (acc.memory_bw_tbps * 1e12 * cost.hbm_efficiency)
    compute_s = flops_per_gpu / (acc.peak_flops(precision) * acc.matmul_efficiency)
    return Phase(tokens=tokens, step_s=max(memory_s, compute_s) + comm_s, memory_s=memory_s, compute_s=compute_s,
                 comm_s=comm_s, bound="memory" if memory_s >= compute_s else "compute",
                 read_per_gpu_bytes=bytes_per_gpu, compute_per_gpu_flops=flops_per_gpu)


def _tp_comm_s(spec: TransformerSpec, tokens: int, logits_tokens: int, serve: ServeSpec, cluster: Cluster) -> float:
    """2 AllReduces per layer of the block outputs, and the logits AllGather (Megatron TP)."""
    if serve.tp == 1:
        return 0.0
    block = collective_time_s("all_reduce", tokens * spec.hidden * serve.weight_bytes, serve.tp, serve.tp, cluster)
    logits = collective_time_s("all_gather", logits_tokens * spec.vocab * LOGITS_BYTES, serve.tp, serve.tp, cluster)
    return 2 * spec.layers * block + logits


def serve_estimate(spec: TransformerSpec, serve: ServeSpec, cluster: Cluster, gpus: int, batch: int | None = None,
                   concurrency: int | None = None, cost: CostModel | None = None) -> ServeEstimate:
    """Capacity (exact memory, estimated workspace) and roofline speed of serving on `gpus` GPUs."""
    cost = cost or CostModel()
    tp = serve.tp
    if tp > cluster.domain_gpus:
        raise SpecError(f"tp ({tp}) exceeds the {cluster.domain_gpus} GPUs of one {cluster.name} node "
                        "(pipeline parallelism across nodes is not modelled for serving)")
    if gpus % tp:
        raise SpecError(f"tp ({tp}) must divide gpus ({gpus})")
    if batch is not None and concurrency is not None:
        raise SpecError("give --batch (sequences per replica) or --concurrency (over all replicas), not both")
    replicas = gpus // tp
    mem = count_serve_memory(spec, serve)
    budget = cluster.accelerator.memory_gb * 1e9 * serve.gpu_memory_utilization
    workspace = activation_workspace_bytes(spec, serve)
    reserved = float(cost.runtime_reserved_bytes)
    kv_budget = budget - mem.weights_per_gpu_bytes - workspace - reserved
    blocks = max(0, math.floor(kv_budget / mem.kv_per_block_per_gpu_bytes))
    per_replica = blocks // mem.blocks_per_sequence
    if concurrency is not None:
        batch = -(-concurrency // replicas)
    fits = True if batch is None else batch <= per_replica
    if batch is None:
        batch = min(per_replica, serve.max_num_seqs)
    run_batch = max(1, batch)

    modules = linear_modules(spec, serving_layout(spec))
    block_elems, head_elems = _active_linear_elements(modules, spec)
    c, layers, q = serve.context, spec.layers, spec.q_width
    # decode: each of B sequences adds one token against a cache of c tokens
    experts = _expert_bytes(modules, serve)
    touched = 1.0
    if spec.moe is not None:
        k, e = spec.moe.top_k, spec.moe.num_experts
        touched = 1.0 - (1.0 - k / e) ** run_batch  # expected share of experts a batch routes to
    weights_read = (mem.weights_bytes - experts + experts * touched) / tp
    decode_bytes = weights_read + run_batch * c * mem.kv_per_token_per_gpu_bytes
    decode_flops = run_batch * (2 * (block_elems + head_elems) + 4 * c * q * layers) / tp
    decode = _phase(run_batch, decode_bytes, decode_flops, _tp_comm_s(spec, run_batch, run_batch, serve, cluster),
                    cluster, serve, cost)
    # prefill: one prompt of c tokens, causal attention, logits of its last token
    prefill_bytes = mem.weights_per_gpu_bytes + c * mem.kv_per_token_per_gpu_bytes
    prefill_flops = (2 * c * block_elems + 2 * head_elems + 2 * q * c * (c + 1) * layers) / tp
    prefill = _phase(c, prefill_bytes, prefill_flops, _tp_comm_s(spec, c, 1, serve, cluster), cluster, serve, cost)
    return ServeEstimate(
        gpus=gpus, tp=tp, replicas=replicas, memory=mem, memory_budget_per_gpu_bytes=budget,
        activation_workspace_per_gpu_bytes=workspace, runtime_reserved_per_gpu_bytes=reserved,
        kv_budget_per_gpu_bytes=kv_budget, kv_blocks_per_gpu=blocks, max_sequences_per_replica=per_replica,
        max_sequences=per_replica * replicas, batch_per_replica=batch, fits=fits and per_replica > 0,
        decode=decode, decode_tokens_per_s=replicas * run_batch / decode.step_s, inter_token_latency_s=decode.step_s,
        prefill=prefill, prefill_tokens_per_s=c / prefill.step_s,
    )
