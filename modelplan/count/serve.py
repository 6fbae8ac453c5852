"""Exact serving memory: weights at the serving precision, KV cache per token and per sequence.

KV cache of a sequence (K and V of every layer): the count layer's `kv_cache_bytes` (one function
for every attention kind, MHA / GQA exact: 2 x layers x kv_heads x head_dim x bytes per token).
A tensor-parallel rank holds kv_heads / tp heads (or one, replicated, when tp exceeds kv_heads:
vLLM's rule); an MLA model's compressed latent is not split by heads, so every TP rank keeps all
of it (vLLM's MLA backends). Paged attention (vLLM, Kwon et al. 2023) allocates whole blocks of `block_size`
tokens, so a sequence of c tokens takes ceil(c / block) blocks; the tail of the last block is the
paging overhead. Mamba-style blocks (Mamba, Mamba-2, gated DeltaNet) keep a fixed-size state per
sequence instead of per-token K/V: it is not part of the per-token figures; like vLLM's hybrid
cache manager, a sequence's states take whole pages (of the attention page size; one page of the
state itself for attention-free models).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.linears import linear_modules
from modelplan.count.memory import kv_cache_bytes
from modelplan.count.params import count_params
from modelplan.count.quant import weights_bytes
from modelplan.count.result import Result
from modelplan.errors import SpecError
from modelplan.specs.tp_kv_heads import tp_fits_kv_heads, tp_kv_heads_problem

if TYPE_CHECKING:
    from modelplan.specs.serve import ServeSpec
    from modelplan.specs.transformer import TransformerSpec


def serving_layout(spec: "TransformerSpec") -> str:
    """Module table for quantized weights: separate q/k/v (llama for gated MLPs, opt for plain
    ones); fused and separate projections quantize to the same bytes up to per-tensor constants."""
    return "llama" if spec.gated_mlp else "opt"


def local_kv_fraction(spec: "TransformerSpec", tp: int) -> tuple[int, int]:
    """(KV heads one TP rank holds, KV heads of the model): kv/tp, or 1 when tp > kv (replicated);
    (1, 1) for MLA, whose cached latent (d_c + d_h^R per token, DeepSeek-V2 sec. 2.1.2) every TP
    rank holds whole."""
    if spec.mla is not None:
        return 1, 1
    problem = tp_kv_heads_problem(spec, tp)
    if problem:
        raise SpecError(problem)
    kv = spec.num_kv_heads
    return max(1, kv // tp), kv


def default_serving_tp(spec: "TransformerSpec", gpus: int, gpus_per_node: int) -> int:
    """The largest tp <= min(gpus, gpus_per_node) that divides the GPUs (whole replicas), the
    attention heads (vLLM's tensor-parallel attention: total_num_heads % tp_size == 0) and fits the
    KV heads (`tp_fits_kv_heads`); 1 at worst."""
    return next((tp for tp in range(min(gpus, gpus_per_node), 1, -1)
                 if gpus % tp == 0 and spec.heads % tp == 0 and tp_fits_kv_heads(spec, tp)), 1)


def kv_bytes_per_gpu(spec: "TransformerSpec", tokens: int, kv_bytes: int, tp: int) -> int:
    """KV-cache bytes of `tokens` tokens of one sequence on one TP rank."""
    local, kv = local_kv_fraction(spec, tp)
    return kv_cache_bytes(spec, 1, tokens, kv_bytes) * local // kv


class ServeMemory(Result):
    """Bytes of one serving replica; per-GPU figures are one TP rank's."""

    weights_bytes: int
    """All weights at the serving precision (the whole model)."""
    weights_per_gpu_bytes: int
    """weights / tp, rounded up (norms, a few KB per layer, counted as split too)."""
    kv_per_token_bytes: int
    """K and V of one token over every layer, whole model."""
    kv_per_token_per_gpu_bytes: int
    kv_per_block_per_gpu_bytes: int
    """One paged-attention block of `block_size` tokens on one GPU."""
    blocks_per_sequence: int
    """ceil(context / block_size)."""
    kv_per_sequence_per_gpu_bytes: int
    """The cache of one sequence of `context` tokens on one GPU, in whole blocks (the cache of
    blocks x block_size tokens)."""
    paging_overhead_per_sequence_per_gpu_bytes: int
    """The unused tail of a sequence's last block."""


def count_serve_memory(spec: "TransformerSpec", serve: "ServeSpec") -> ServeMemory:
    """Weights and KV-cache bytes of serving `spec` with `serve` (exact integers)."""
    if not spec.causal:
        raise SpecError(f"serve: {spec.name} is an encoder (arch '{spec.arch}'): it keeps no KV cache")
    total = count_params(spec).total
    fmt = None if serve.weights in ("bf16", "fp16") else serve.weights
    weights = weights_bytes(total, linear_modules(spec, serving_layout(spec)), fmt, dtype_bytes=serve.weight_bytes)
    # fixed-size conv / SSM / delta-rule states of Mamba-style blocks (the cache of 0 tokens)
    state, state_gpu = kv_cache_bytes(spec, 1, 0, serve.kv_bytes), kv_bytes_per_gpu(spec, 0, serve.kv_bytes, serve.tp)
    per_token = kv_cache_bytes(spec, 1, 1, serve.kv_bytes) - state
    per_token_gpu = kv_bytes_per_gpu(spec, 1, serve.kv_bytes, serve.tp) - state_gpu
    blocks = -(-serve.context // serve.block_size)
    per_block = kv_bytes_per_gpu(spec, serve.block_size, serve.kv_bytes, serve.tp) - state_gpu
    used = kv_bytes_per_gpu(spec, serve.context, serve.kv_bytes, serve.tp) - state_gpu
    paged = kv_bytes_per_gpu(spec, blocks * serve.block_size, serve.kv_bytes, serve.tp) - state_gpu
    if state_gpu and per_block == 0:  # attention-free (Mamba, Mamba-2): one state page per sequence
        blocks, per_block, used, paged = 1, state_gpu, state_gpu, state_gpu
    elif state_gpu:  # vLLM's hybrid allocator: a sequence's states take whole pages beside its K/V
        state_blocks = -(-state_gpu // per_block)
        blocks, used, paged = blocks + state_blocks, used + state_gpu, paged + state_blocks * per_block
    return ServeMemory(
        weights_bytes=weights, weights_per_gpu_bytes=-(-weights // serve.tp), kv_per_token_bytes=per_token,
        kv_per_token_per_gpu_bytes=per_token_gpu, kv_per_block_per_gpu_bytes=per_block,
        blocks_per_sequence=blocks, kv_per_sequence_per_gpu_bytes=paged,
        paging_overhead_per_sequence_per_gpu_bytes=paged - used,
    )
