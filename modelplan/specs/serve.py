"""Serving settings: precision of weights and KV cache, context, batch, and the engine's knobs
(named after vLLM's engine arguments: block_size, gpu_memory_utilization, max_num_batched_tokens)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.specs.base import Spec

WeightPrecision = Literal["bf16", "fp16", "fp8", "int4"]
KVPrecision = Literal["bf16", "fp16", "fp8"]


class ServeSpec(Spec):
    """How a model is served on one replica of `tp` GPUs (tensor parallel inside one node)."""

    context: int = Field(gt=0)
    """Tokens per sequence the cache must hold (prompt + generated), vLLM's max_model_len."""
    weights: WeightPrecision = "bf16"
    """Weight storage: bf16/fp16, fp8 (e4m3, per-tensor scale; W8A8) or int4 (GPTQ/AWQ group 128, W4A16)."""
    kv_cache: KVPrecision = "bf16"
    """KV-cache dtype (vLLM --kv-cache-dtype: auto = the model dtype, or fp8)."""
    tp: int = Field(1, gt=0)
    """Tensor-parallel GPUs of one replica."""
    block_size: int = Field(16, gt=0)
    """Tokens per paged-attention block (vLLM's default block_size on CUDA: 16)."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """Fraction of each GPU's memory the engine may use (vLLM's default 0.9)."""
    max_batched_tokens: int = Field(8192, gt=0)
    """Tokens of one scheduler step (vLLM max_num_batched_tokens; sets the activation workspace).
    8192 is a stated default: vLLM's own depends on its version and usage context."""
    max_num_seqs: int = Field(256, gt=0)
    """Sequences one step can hold (vLLM max_num_seqs, default 256: the logits workspace)."""

    @property
    def weight_bytes(self) -> int:
        """Bytes per unquantized weight (embeddings, norms, lm_head, and every weight at bf16/fp16)."""
        return 2

    @property
    def kv_bytes(self) -> int:
        """Bytes per KV-cache element."""
        return 1 if self.kv_cache == "fp8" else 2
