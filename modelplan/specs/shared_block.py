"""A shared attention + MLP block reused by several blocks of the stack (Zamba, Glorioso et al.
2024, arXiv 2405.16712, fig. 2 and eq. 6; Zamba2, arXiv 2411.15242, fig. 2), as transformers'
`ZambaAttentionDecoderLayer` / `Zamba2AttentionDecoderLayer`:

    x_in = rmsnorm(concat(hidden, embeddings))          input_width = 2 h
    a    = o_proj(attention(q/k/v_proj(x_in)))          q/k/v read input_width, o_proj writes h
    y    = mlp(rmsnorm(a))                              gated (gate, up, down), no residual
    hidden <- block(hidden + linear(y))                 a per-use Linear(h, h), then the block's mixer

`copies` distinct weight sets are used round-robin (use j runs copy j % copies, Zamba2
num_mem_blocks); their weights are counted once, their FLOPs and activations at every use. Zamba2
adds per-use low-rank adapters (LoRA-shaped, each use its own, held by the use's copy):
Linear(h, r) -> Linear(r, 2 ffn) on the MLP's gate/up input, and with `attention_adapters`
Linear(w, r) -> Linear(r, w) on each of q, k, v.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from modelplan.specs.base import Spec


class SharedBlockSpec(Spec):
    """Sizes of the shared block and where it runs."""

    layers: list[int] = Field(min_length=1)
    """0-based indices of the blocks the shared block runs before (HF 'hybrid' layers)."""
    copies: int = Field(1, gt=0)
    """Distinct weight sets, used round-robin over `layers` (Zamba2 num_mem_blocks; Zamba 1)."""
    tied: bool = True
    """The uses of one copy share its weights. False: every use holds a copy of its own (with the
    adapters of every use of its round-robin class): what transformers 5.24 builds when
    tie_word_embeddings is false, since its weight tying (`get_expanded_tied_weights_keys`) is off
    then."""
    input_width: int = Field(gt=0)
    """Width the input norm and q/k/v read: the hidden state concatenated with the embeddings
    (HF attention_hidden_size, 2 h)."""
    heads: int = Field(gt=0)
    """Query heads (HF num_attention_heads)."""
    kv_heads: int = Field(gt=0)
    """Key / value heads (HF num_key_value_heads)."""
    head_dim: int = Field(gt=0)
    """Per-head dims (HF attention_head_dim, 2 h / heads by default)."""
    ffn_hidden: int = Field(gt=0)
    """Inner width of the gated MLP (HF intermediate_size)."""
    mlp_bias: bool = False
    """Biases on the MLP's gate/up and down projections (Zamba2 add_bias_linear)."""
    adapter_rank: int | None = Field(None, gt=0)
    """r of the per-use adapters (Zamba2 adapter_rank); None: no adapters (Zamba)."""
    attention_adapters: bool = False
    """Per-use adapters on q, k and v too (Zamba2 use_shared_attention_adapter)."""

    @model_validator(mode="after")
    def _check(self) -> "SharedBlockSpec":
        if self.heads % self.kv_heads:
            raise ValueError(f"shared_block.kv_heads ({self.kv_heads}) must divide shared_block.heads ({self.heads})")
        if any(i < 0 for i in self.layers) or len(set(self.layers)) != len(self.layers):
            raise ValueError(f"shared_block.layers ({self.layers}) must be distinct 0-based block indices")
        if self.copies > len(self.layers):
            raise ValueError(f"shared_block.copies ({self.copies}) exceeds its {len(self.layers)} uses")
        if self.attention_adapters and self.adapter_rank is None:
            raise ValueError("shared_block.attention_adapters needs shared_block.adapter_rank")
        return self

    @property
    def q_width(self) -> int:
        """heads * head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """kv_heads * head_dim."""
        return self.kv_heads * self.head_dim
