"""Transformer spec: decoder-only (GPT/Llama style) and encoder-only (BERT style), dense or MoE.

Every flag that changes a parameter count is a field, so a preset states it explicitly
(GPT-2 small is 124,439,808 parameters with biases, 124,337,664 without).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from modelplan.specs.base import Spec

Position = Literal["learned", "rotary", "alibi", "none"]
Norm = Literal["layernorm", "rmsnorm"]
Activation = Literal["gelu", "relu", "silu", "gelu_tanh"]


class MoESpec(Spec):
    """Mixture-of-experts MLP (Switch / Mixtral / DeepSeek-MoE style)."""

    num_experts: int = Field(gt=0, description="Routed experts per MoE layer.")
    """Routed experts per MoE layer."""
    top_k: int = Field(gt=0, description="Experts each token is routed to.")
    """Experts each token is routed to."""
    expert_ffn_hidden: int = Field(gt=0, description="Hidden size of one expert's MLP.")
    """Hidden size of one expert's MLP."""
    shared_experts: int = Field(0, ge=0, description="Always-active shared experts.")
    """Always-active shared experts (DeepSeek-MoE); each has `shared_expert_ffn_hidden`."""
    shared_expert_ffn_hidden: int | None = Field(None, gt=0)
    """Hidden size of one shared expert (defaults to expert_ffn_hidden)."""
    layer_freq: int = Field(1, gt=0, description="Every layer_freq-th layer is MoE.")
    """Every `layer_freq`-th layer (counting from 1 after the dense prefix) is an MoE layer."""
    first_dense_layers: int = Field(0, ge=0)
    """Number of leading layers that keep a dense MLP (DeepSeek `first_k_dense_replace`)."""
    router_bias: bool = False
    """Whether the router (gate) linear layer has a bias."""
    capacity_factor: float | None = Field(None, gt=0)
    """Token capacity factor for expert buffers (None: dropless)."""
    shared_expert_gate: bool = False
    """A sigmoid gate (h x 1 linear, no bias) scaling the shared experts' output (Qwen2-MoE)."""

    @model_validator(mode="after")
    def _check(self) -> "MoESpec":
        if self.top_k > self.num_experts:
            raise ValueError(
                f"moe.top_k ({self.top_k}) must not exceed moe.num_experts ({self.num_experts})"
            )
        if self.shared_expert_gate and self.shared_experts == 0:
            raise ValueError("moe.shared_expert_gate needs moe.shared_experts > 0 (got 0)")
        return self


class TransformerSpec(Spec):
    """A transformer language model; fields follow HuggingFace config names where they exist."""

    kind: Literal["transformer"] = "transformer"
    """Spec discriminator."""
    name: str = "transformer"
    """Display name."""
    source: str = ""
    """Where the configuration comes from (paper, HF config), for presets."""
    arch: Literal["decoder", "encoder"] = "decoder"
    """decoder: causal LM (GPT, Llama); encoder: bidirectional (BERT)."""
    layers: int = Field(gt=0)
    """Number of transformer blocks (HF num_hidden_layers)."""
    hidden: int = Field(gt=0)
    """Model width h (HF hidden_size)."""
    heads: int = Field(gt=0)
    """Query heads a (HF num_attention_heads)."""
    kv_heads: int | None = Field(None, gt=0)
    """Key/value heads (GQA/MQA); None means heads (MHA)."""
    head_dim: int | None = Field(None, gt=0)
    """Per-head dimension; None means hidden // heads (then heads must divide hidden)."""
    qk_norm: bool = False
    """A per-head norm (head_dim wide) on queries and on keys (Phi qk_layernorm, Qwen3, OLMo-2)."""
    ffn_hidden: int = Field(gt=0)
    """Dense MLP hidden size (HF intermediate_size; 4h for GPT)."""
    vocab: int = Field(gt=0)
    """Vocabulary size (rows of the token embedding)."""
    embedding_dim: int | None = Field(None, gt=0)
    """Token-embedding width when it differs from hidden (OPT-350m word_embed_proj_dim): adds
    bias-free project_in (embedding_dim -> hidden) and project_out (hidden -> embedding_dim)."""
    max_positions: int = Field(2048, gt=0)
    """Rows of the learned position table (HF max_position_embeddings)."""
    position: Position = "rotary"
    """Position encoding; only 'learned' adds parameters."""
    norm: Norm = "rmsnorm"
    """Normalisation layer kind."""
    norm_bias: bool = False
    """Whether norms have a bias (LayerNorm's beta)."""
    norm_eps: float = Field(1e-5, gt=0)
    """Epsilon of the norms (used by the executor)."""
    qkv_bias: bool = False
    """Bias on the Q, K, V projections."""
    attn_out_bias: bool = False
    """Bias on the attention output projection."""
    mlp_bias: bool = False
    """Bias on the MLP projections."""
    gated_mlp: bool = True
    """Gated MLP (SwiGLU/GeGLU: two input projections) instead of a plain one."""
    activation: Activation = "silu"
    """MLP activation (inside the gate for gated MLPs)."""
    tied_embeddings: bool = False
    """Output head shares the token embedding matrix."""
    lm_head_bias: bool = False
    """Bias on the output head (Phi; BERT's MLM decoder bias)."""
    parallel_block: bool = False
    """Attention and MLP read the same input and are summed (GPT-J, Falcon, GPT-NeoX)."""
    norms_per_layer: int | None = Field(None, ge=1, le=2)
    """Norms per block; None means 2 for sequential blocks, 1 for parallel blocks."""
    final_norm: bool = True
    """A norm after the last block."""
    embedding_norm: bool = False
    """A norm right after the embeddings (BLOOM, BERT)."""
    type_vocab: int = Field(0, ge=0)
    """Token-type (segment) embedding rows (BERT: 2)."""
    pooler: bool = False
    """BERT pooler (dense h x h with bias on the first token)."""
    lm_head: bool = True
    """Whether an output projection to the vocabulary exists (counted unless tied)."""
    mlm_transform: bool = False
    """BERT MLM head transform before the output head: dense h x h + bias, activation, norm
    (the decoder's vocab-sized bias is `lm_head_bias`)."""
    dropout: bool = False
    """Dropout is active in training (adds 1-byte masks to activation memory, Korthikanti et al.)."""
    moe: MoESpec | None = None
    """Mixture-of-experts settings; None for a dense model."""

    @model_validator(mode="after")
    def _check(self) -> "TransformerSpec":
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(
                f"heads ({self.heads}) must divide hidden ({self.hidden}) when no head_dim is given"
            )
        kv = self.kv_heads if self.kv_heads is not None else self.heads
        if self.heads % kv:
            raise ValueError(f"kv_heads ({kv}) must divide heads ({self.heads})")
        if self.lm_head_bias and not self.lm_head:
            raise ValueError("lm_head_bias needs lm_head (there is no output head to carry it)")
        if self.mlm_transform and not self.lm_head:
            raise ValueError("mlm_transform needs lm_head (it feeds the output head)")
        if self.moe is not None and self.moe.first_dense_layers > self.layers:
            raise ValueError(
                f"moe.first_dense_layers ({self.moe.first_dense_layers}) "
                f"exceeds layers ({self.layers})"
            )
        return self

    # Derived sizes (names say global vs per-rank: these are all global).
    @property
    def num_kv_heads(self) -> int:
        """Key/value heads with the MHA default applied."""
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def dim_head(self) -> int:
        """Per-head dimension with the hidden // heads default applied."""
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def embed_dim(self) -> int:
        """Token-embedding width with the hidden default applied."""
        return self.embedding_dim if self.embedding_dim is not None else self.hidden

    @property
    def q_width(self) -> int:
        """Width of all query heads together: heads * head_dim (= hidden unless head_dim is set)."""
        return self.heads * self.dim_head

    @property
    def kv_width(self) -> int:
        """Width of all key (or value) heads together: kv_heads * head_dim."""
        return self.num_kv_heads * self.dim_head

    @property
    def num_norms_per_layer(self) -> int:
        """Norms inside one block."""
        if self.norms_per_layer is not None:
            return self.norms_per_layer
        return 1 if self.parallel_block else 2

    @property
    def causal(self) -> bool:
        """Decoder models use a causal mask."""
        return self.arch == "decoder"

    def is_moe_layer(self, index: int) -> bool:
        """Whether block `index` (0-based) has an MoE MLP."""
        if self.moe is None or index < self.moe.first_dense_layers:
            return False
        return (index - self.moe.first_dense_layers + 1) % self.moe.layer_freq == 0

    @property
    def num_moe_layers(self) -> int:
        """Number of blocks whose MLP is a mixture of experts."""
        return sum(self.is_moe_layer(i) for i in range(self.layers))
