"""Frozen result types of the calculator, shared by transformer and network counting.

Breakdowns use slash-path keys whose parents are sums of their children (nanoGPT's sizing
notebook style): `attention/qkv`, `attention/out`, `mlp/in`, `embedding/token`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Result(BaseModel):
    """Frozen result model (no validation cost beyond construction)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ParamCount(Result):
    """Parameters of a model: exact integers."""

    total: int
    """Every parameter tensor element (tied matrices counted once)."""
    trainable: int
    """Parameters that receive gradients (equal to total unless something is frozen)."""
    active: int
    """Parameters touched by one token's forward (MoE: top_k of the routed experts); = total for dense."""
    breakdown: dict[str, int] = Field(default_factory=dict)
    """Slash-path components (leaves and their parent sums), whole model."""
    per_layer: list[int] = Field(default_factory=list)
    """Parameters of each block / layer in order."""


class FlopCount(Result):
    """FLOPs of one training step (a multiply-add counts as 2 FLOPs)."""

    forward_per_token: int
    """Forward FLOPs per token (or per sample for non-sequence networks)."""
    forward: int
    """Forward FLOPs of one step (global batch)."""
    model: int
    """Model FLOPs of one step: forward + backward (2x forward for matmuls), no recompute (MFU numerator)."""
    hardware: int
    """FLOPs the hardware executes: model FLOPs plus the recompute forward (HFU numerator)."""
    breakdown: dict[str, int] = Field(default_factory=dict)
    """Forward FLOPs per slash-path component for the whole step."""
    convention: str = ""
    """How causal attention and other conventions were counted."""


class MemoryCount(Result):
    """Bytes of model state and activations (unsharded, for one replica)."""

    weights: int
    gradients: int
    optimizer: int
    """Optimizer states (fp32 Adam m and v, or the momentum buffer)."""
    master_weights: int
    """fp32 master copy of the weights under mixed precision (0 otherwise)."""
    activations: int
    """Activation bytes kept for backward for one micro-batch of the given batch (whole model)."""
    activations_per_layer: list[int] = Field(default_factory=list)
    kv_cache: int = 0
    """Inference cache bytes for the given batch and sequence length: K/V of every attention
    block (windows and chunks capped, MLA's compressed latent), Mamba states."""
    kv_cache_per_token: int = 0
    """Bytes each further token adds to one sequence's cache once every window is full (the
    full-attention blocks only: sliding, chunked and Mamba blocks stop growing)."""
    kv_state_per_sequence: int = 0
    """Part of the cache one sequence holds whatever its length: the conv and SSM / delta-rule
    states of Mamba-style blocks (Mamba, Mamba-2, gated DeltaNet)."""

    @property
    def model_states(self) -> int:
        """Weights + gradients + optimizer states + master weights."""
        return self.weights + self.gradients + self.optimizer + self.master_weights
