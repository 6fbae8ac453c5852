"""Sub-spec of a token indexer on q/k/v attention blocks (`TransformerSpec.token_indexer`;
transformers 5.24 `Qwen4ExpTextQSAIndexer`): index_qk_proj Linear(h, (heads + 1) head_dim) gives
index queries and one index key per token (q_layernorm, k_layernorm RMSNorm(head_dim)); the keys
are averaged over blocks of compress_ratio tokens, every query scores the pooled blocks
(sum over heads of relu(q . k)) and its full-attention block reads the tokens of the best
budget / compress_ratio blocks plus the incomplete tail (compress_ratio - 1 at most).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from modelplan.specs.base import Spec


class TokenIndexerSpec(Spec):
    """Qwen4-Exp's QSA indexer on the full-attention blocks."""

    heads: int = Field(gt=0)
    """Index query heads (HF indexer_n_heads; one index key head)."""
    head_dim: int = Field(gt=0)
    """Index head width (HF indexer_head_dim)."""
    budget: int = Field(gt=0)
    """Tokens read from complete blocks a query (HF indexer_budget)."""
    compress_ratio: int = Field(gt=0)
    """Tokens pooled into one index key (HF indexer_compress_ratio)."""

    @model_validator(mode="after")
    def _check(self) -> "TokenIndexerSpec":
        if self.budget % self.compress_ratio:
            raise ValueError(f"token_indexer.budget ({self.budget}) must be a multiple of compress_ratio "
                             f"({self.compress_ratio})")
        return self
