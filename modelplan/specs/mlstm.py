"""The mLSTM mixer of xLSTM (Beck et al. 2024, arXiv 2405.04517, sec. 2.3; the xLSTM 7B block,
arXiv 2503.13427; transformers 5.24 `xLSTMLayer`): q, k (h -> qk_dim), v and the output-gate
logits (h -> v_dim), input and forget gate logits per head (h -> heads, with biases, soft-capped);
a matrix memory C_t = f_t C_{t-1} + i_t v_t k_t^T per head with exponential gating and a
normaliser; a per-head LayerNorm over the output (weight over v_dim), times sigmoid(o); out_proj
(v_dim -> h). The projections' biases follow `bias` (HF use_bias)."""

from __future__ import annotations

from pydantic import Field, model_validator

from modelplan.specs.base import Spec


class MLSTMSpec(Spec):
    """Sizes of an mLSTM mixer."""

    heads: int = Field(gt=0)
    """H (HF num_heads)."""
    qk_dim: int = Field(gt=0)
    """Width of q and k over all heads (HF int(hidden * qk_dim_factor))."""
    v_dim: int = Field(gt=0)
    """Width of v, the output gate and the memory's output (HF int(hidden * v_dim_factor))."""
    chunk_size: int = Field(64, gt=0)
    """L: chunk length of the chunkwise-parallel form (HF chunk_size)."""
    bias: bool = False
    """Biases on q, k, v, the output gate, out_proj, the multi-head norm and the block's two
    RMSNorms (HF use_bias; the i / f gates always have theirs)."""

    @model_validator(mode="after")
    def _check(self) -> "MLSTMSpec":
        if self.qk_dim % self.heads or self.v_dim % self.heads:
            raise ValueError(f"mlstm.heads ({self.heads}) must divide mlstm.qk_dim ({self.qk_dim}) and "
                             f"mlstm.v_dim ({self.v_dim})")
        return self

    @property
    def qk_head_dim(self) -> int:
        """d_qk per head."""
        return self.qk_dim // self.heads

    @property
    def v_head_dim(self) -> int:
        """d_v per head."""
        return self.v_dim // self.heads
