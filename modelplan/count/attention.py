"""Fused (flash) attention as one kernel: its FLOPs and what it keeps for backward.

FlashAttention (Dao et al. 2022, arXiv 2205.14135; FlashAttention-2, Dao 2023, arXiv
2307.08691) computes softmax(Q K^T) V tile by tile in on-chip memory: the s x s scores,
probabilities and dropout mask never reach HBM. Forward keeps only the output and the row
log-sum-exp (one fp32 value per query row and head); backward recomputes the scores from Q, K and
the log-sum-exp. FLOPs per (batch x head), with d the head dim:
    forward:  2 matmuls (Q K^T, P V)                   = 4 s_q s_k d
    backward: 5 matmuls (recomputed Q K^T, dV, dP, dQ, dK) = 10 s_q s_k d   (2.5 x forward)
(FlashAttention-2 paper, sec. 4.1 'FLOPs of the backward pass is 2.5 x the forward'). A causal
kernel skips the tiles above the diagonal: about half of the s x s products.
"""

from __future__ import annotations

from dataclasses import dataclass

LSE_BYTES = 4  # fp32 log-sum-exp per query row and head (FlashAttention-2, Algorithm 1 output L)


def is_fused(kernel: str) -> bool:
    """Whether the kernel keeps the s x s scores out of HBM (flash and sdpa do, eager does not)."""
    return kernel != "eager"


def causal_fraction(s_q: int, s_k: int, causal: bool) -> float:
    """Fraction of the s_q x s_k score tiles a causal kernel computes: the lower triangle with its
    diagonal, (s + 1) / 2s of a square; 1 without a causal mask. With s_q < s_k (context
    parallelism with load-balanced chunks) a query chunk sees on average half the keys too."""
    if not causal:
        return 1.0
    if s_q == s_k:
        return (s_q + 1) / (2 * s_q)
    return 0.5


def visible_fraction(s_q: int, s_k: int, causal: bool, window: int | None = None, chunk: int | None = None) -> float:
    """Share of the s_q x s_k (query, key) pairs a masked kernel computes: `causal_fraction`, or
    with a sliding window w (query i sees min(i + 1, w) keys: w s - w (w - 1) / 2 pairs of a
    causal s x s square) or chunks of c (each a causal c x c triangle) when s_q = s_k."""
    if s_q != s_k or (window is None and chunk is None):
        return causal_fraction(s_q, s_k, causal)
    s = s_q
    if window is not None:
        w = min(window, s)
        return (w * s - w * (w - 1) / 2) / (s * s)
    c = min(chunk, s)
    full, rest = divmod(s, c)
    return (full * c * (c + 1) / 2 + rest * (rest + 1) / 2) / (s * s)


@dataclass(frozen=True)
class FusedAttention:
    """One fused attention call: `batch` independent (query-head) problems of s_q queries against
    s_k keys of head dim `head_dim` (its tiles limited to a sliding window or chunks)."""

    name: str
    batch: int
    s_q: int
    s_k: int
    head_dim: int
    causal: bool
    window: int | None = None
    chunk: int | None = None

    @property
    def fwd_flops(self) -> float:
        """Q K^T and P V over the computed tiles (FlashAttention-2 sec. 4.1)."""
        share = visible_fraction(self.s_q, self.s_k, self.causal, self.window, self.chunk)
        return 4 * self.batch * self.s_q * self.s_k * self.head_dim * share

    @property
    def bwd_flops(self) -> float:
        """Recomputed Q K^T plus dV, dP, dQ, dK: 2.5 x the forward (FlashAttention-2 sec. 4.1)."""
        return 2.5 * self.fwd_flops


def lse_bytes_per_token(local_heads: int) -> int:
    """Bytes flash attention keeps per token besides its output: one fp32 log-sum-exp per head."""
    return LSE_BYTES * local_heads
