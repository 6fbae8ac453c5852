"""Transformer spec: decoder-only (GPT/Llama style), encoder-only (BERT style) or encoder-decoder
(T5 style), dense or MoE, with attention, state-space (Mamba) or mixed (Jamba) blocks.

Every flag that changes a parameter count is a field, so a preset states it explicitly
(GPT-2 small is 124,439,808 parameters with biases, 124,337,664 without). Architectural features
are fields, never model names: a new checkpoint of a known family is a new set of values.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from modelplan.specs.attention_shape import AttentionLayerType, LayerTypeAttention
from modelplan.specs.base import Spec
from modelplan.specs.blocks import ClassifierSpec, MLASpec, MoESpec, Norm, SSMSpec, VisionSpec
from modelplan.specs.encoder_inputs import EncoderInput
from modelplan.specs.extras import ExtrasSpec
from modelplan.specs.mixers import DeltaNetSpec, LightningSpec, Mamba2Spec, RGLRUSpec, RWKVSpec, ShortConvSpec
from modelplan.specs.mlstm import MLSTMSpec
from modelplan.specs.seq2seq import Seq2SeqSpec

from modelplan.specs.product_key import ProductKeySpec
from modelplan.specs.shared_block import SharedBlockSpec
from modelplan.specs.side_paths import AltUpSpec, PerLayerInputSpec
from modelplan.specs.hyperconn import HyperConnSpec
from modelplan.specs.compressed_attention import CompressedAttentionSpec
from modelplan.specs.cca import CCASpec
from modelplan.specs.qsa import TokenIndexerSpec
from modelplan.specs.transformer_checks import check_transformer

__all__ = ["TransformerSpec", "MoESpec", "MLASpec", "SSMSpec", "ClassifierSpec", "VisionSpec"]

Position = Literal["learned", "rotary", "alibi", "relative", "none"]
Activation = Literal["gelu", "relu", "silu", "gelu_tanh", "swiglu_clamp"]
LayerType = Literal["full_attention", "sliding_attention", "chunked_attention", "mamba", "mamba2", "gated_deltanet",
                    "mlp", "parallel_mamba2", "short_conv", "rglru", "lightning", "rwkv", "mlstm"]
NormPlacement = Literal["pre", "post", "sandwich", "output"]


class TransformerSpec(Spec):
    """A transformer language model; fields follow HuggingFace config names where they exist."""

    kind: Literal["transformer"] = "transformer"
    """Spec discriminator."""
    name: str = "transformer"
    """Display name."""
    source: str = ""
    """Where the configuration comes from (paper, HF config), for presets."""
    arch: Literal["decoder", "encoder", "encoder_decoder"] = "decoder"
    """decoder: causal LM (GPT, Llama); encoder: bidirectional (BERT); encoder_decoder: a
    bidirectional encoder and a causal decoder with cross-attention (T5)."""
    layers: int = Field(gt=0)
    """Number of blocks (HF num_hidden_layers); the encoder's for encoder_decoder."""
    decoder_layers: int | None = Field(None, gt=0)
    """encoder_decoder only: decoder blocks (T5 num_decoder_layers); None means `layers`."""
    seq2seq: Seq2SeqSpec | None = None
    """encoder_decoder only: per-stack position tables and Whisper's audio front-end (`specs/seq2seq.py`)."""
    hidden: int = Field(gt=0)
    """Model width h (HF hidden_size)."""
    heads: int = Field(gt=0)
    """Query heads a (HF num_attention_heads); attention-free models (Mamba) state 1, unused."""
    kv_heads: int | None = Field(None, gt=0)
    """Key/value heads (GQA/MQA); None means heads (MHA)."""
    head_dim: int | None = Field(None, gt=0)
    """Per-head dimension; None means hidden // heads (then heads must divide hidden)."""
    layer_types: list[LayerType] | None = None
    """Mixer of each block, repeated cyclically: block i is layer_types[i % len] (Gemma 3:
    5 x sliding_attention + full_attention; Jamba: 4 mamba, attention, 3 mamba); `mlp`: a block
    without a mixer, its norm then its MLP (Nemotron-H, with `mlp` false for the others);
    `parallel_mamba2`: full attention and a Mamba-2 mixer on the same norm output, summed
    (Falcon-H1). None: all full_attention."""
    sliding_window: int | None = Field(None, gt=0)
    """Keys a sliding_attention query sees, itself included (HF sliding_window)."""
    attention_chunk: int | None = Field(None, gt=0)
    """chunked_attention: queries see only earlier keys of their own chunk (Llama 4)."""
    qk_norm: bool = False
    """A norm on queries and on keys before the scores (Phi qk_layernorm, Qwen3, OLMo-2, Gemma 3)."""
    qk_norm_scope: Literal["head", "all_heads"] = "head"
    """head: each head normalised over head_dim; all_heads: the whole q (k) projection normalised
    over heads * head_dim (OLMo-2, OLMoE: weights of width q_width and kv_width)."""
    qk_norm_weight: Literal["shared", "per_head", "none"] = "shared"
    """Learnable weight of a per-head qk norm: one head_dim vector for all heads (Qwen3, Gemma 3),
    one per head (Cohere), or none (Llama 4's L2 norm)."""
    attention_sinks: bool = False
    """A learned sink logit per head in every softmax (gpt-oss `sinks`: heads parameters/layer)."""
    attn_logit_softcap: float | None = Field(None, gt=0)
    """Scores become cap * tanh(scores / cap) (Gemma 2)."""
    final_logit_softcap: float | None = Field(None, gt=0)
    """Output logits become cap * tanh(logits / cap) (Gemma 2)."""
    attention_scale: float | None = Field(None, gt=0)
    """Factor on Q K^T; None means 1 / sqrt(head_dim) (Gemma query_pre_attn_scalar, Granite)."""
    qkv_clip: float | None = Field(None, gt=0)
    """Q, K, V clamped to [-clip, clip] (OLMo clip_qkv)."""
    nope_full_attention: bool = False
    """full_attention blocks have no position encoding (Llama 4: rotary on its chunked blocks
    only, no_rope_layers); they have no q/k norm either (HF Llama 4: use_qk_norm and use_rope)."""
    rotary_fraction: float = Field(1.0, gt=0, le=1)
    """Share of each head's dims that rotary rotates (HF partial_rotary_factor)."""
    rope_theta: float | None = Field(None, gt=0)
    """RoPE base (HF rope_theta; Su et al. 2021's 10000 in the original). It changes no count or
    cost; exports write it (Megatron --rotary-base, torchtitan's rope theta). None: not stated,
    the engine's default applies."""
    rope_scaling: Literal["yarn"] | None = None
    """RoPE frequency scaling (HF rope_scaling / rope_parameters rope_type; YaRN: Peng et al. 2023).
    It changes no count; Megatron-core applies YaRN with its unfused rotary (`plan/rotary_fusion.py`).
    None: plain RoPE or a scaling no engine here prices apart."""
    mla: MLASpec | None = None
    compressed_attention: CompressedAttentionSpec | None = None
    """DeepSeek-V4's shared-KV attention with KV compressors (`specs/compressed_attention.py`)."""
    token_indexer: TokenIndexerSpec | None = None
    """A token indexer on the full-attention blocks' q/k/v attention (Qwen4-Exp QSA; `specs/qsa.py`)."""
    cca: CCASpec | None = None
    """Compressed convolutional attention's q/k convolutions and key temperature (ZAYA; `specs/cca.py`)."""
    residual_affine: bool = False
    """A learned scale and bias on the branch and on the residual at both adds of every block, and
    on the embeddings (ZAYA ZayaResidualScaling: 8 h a block, ZayaModel: 2 h)."""
    """Multi-head Latent Attention instead of q/k/v projections (DeepSeek-V2/V3)."""
    ssm: SSMSpec | None = None
    """The state-space mixer of `mamba` blocks."""
    mamba2: Mamba2Spec | None = None
    """The Mamba-2 (SSD) mixer of `mamba2` blocks (Bamba, Granite 4.0-H, Nemotron-H)."""
    deltanet: DeltaNetSpec | None = None
    """The gated DeltaNet mixer of `gated_deltanet` blocks (Qwen3-Next, Qwen3.5)."""
    short_conv: ShortConvSpec | None = None
    """The gated short-convolution mixer of `short_conv` blocks (LFM2)."""
    rglru: RGLRUSpec | None = None
    """The Griffin recurrent block of `rglru` blocks (RecurrentGemma)."""
    lightning: LightningSpec | None = None
    """The lightning (linear) attention of `lightning` blocks (MiniMax-01)."""
    mlstm: MLSTMSpec | None = None
    """The mLSTM mixer of `mlstm` blocks (xLSTM; `specs/mlstm.py`)."""
    rwkv: RWKVSpec | None = None
    """The time- and channel-mixing of `rwkv` blocks (RWKV-4; such a block has no separate MLP)."""
    shared_block: SharedBlockSpec | None = None
    """A shared attention + MLP block run before the blocks it lists (Zamba, Zamba2): weights once
    per copy, compute at every use."""
    altup: AltUpSpec | None = None
    hyper_connections: HyperConnSpec | None = None
    """Residual streams widened to n copies mixed around every branch (DeepSeek-V4, HY-V4; `specs/hyperconn.py`)."""
    """AltUp's copies of the residual stream (Gemma 3n; `specs/side_paths.py`)."""
    per_layer_input: PerLayerInputSpec | None = None
    """Per-layer token inputs gated into every block (Gemma 3n)."""
    laurel_rank: int | None = Field(None, gt=0)
    """Rank of the LAuReL low-rank residual beside each block's attention (Gemma 3n laurel_rank)."""
    kv_shared_layers: int = Field(0, ge=0)
    """The last N blocks reuse the K/V of the last earlier block of their layer type (Gemma 3n
    num_kv_shared_layers): no k/v projections, no k norm, no cache of their own."""
    kv_shared_ffn_hidden: int | None = Field(None, gt=0)
    """MLP width of the K/V-sharing blocks where it differs from ffn_hidden (Gemma 4
    use_double_wide_mlp: 2 x intermediate_size). None: ffn_hidden."""
    attention_output_gate: bool = False
    """Gated attention output (Qwen3-Next / Qwen3.5 full attention): q_proj also emits a per-head
    gate, o_proj reads attn * sigmoid(gate); q_proj is twice as wide."""
    head_gate: Literal["head", "element"] | None = None
    """A separate bias-free gate projection g_proj on the block input scaling the attention output
    before o_proj: head, Linear(h, heads), one value per head (LFM3 sigmoid, Laguna softplus);
    element, Linear(h, heads * head_dim), one per channel (Laguna gating 'per-element'). None: none."""
    head_gate_bias: bool = False
    """A learned (heads,) bias added to the head gate's logits, broadcast over head_dim (Beam gate_bias)."""
    v_head_dim: int | None = Field(None, gt=0)
    """Per-head value width when it differs from head_dim (MiMo-V2-Flash v_head_dim): v_proj
    Linear(h, kv_heads v_head_dim), o_proj Linear(heads v_head_dim, h). None: head_dim."""
    value_is_key: bool = False
    """The keys double as the values: no v_proj, V = K (Gemma 4 attention_k_eq_v global blocks)."""
    attention_by_type: dict[AttentionLayerType, LayerTypeAttention] | None = None
    """Attention sizes of the blocks of a layer type where they differ from the model's
    (`specs/attention_shape.py`; MiMo-V2-Flash sliding blocks: more kv heads, sinks)."""
    attention_experts: int | None = Field(None, gt=0)
    """Mixture of attention experts (JetMoE MoA, Shen et al. 2024, arXiv 2404.07413; transformers
    JetMoeMoA): E pairs of query / output projections, each kv_heads x head_dim wide, of which a
    bias-free router Linear(h, E) picks heads / kv_heads per token; one shared kv_proj and a bias
    (h) on the merged output. `heads` is kv_heads x top_k. None: plain attention."""
    dynamic_mask: bool = False
    """Doge's dynamic mask attention (transformers DogeAttention): A (kv_heads values) and dt_proj
    Linear(kv_heads head_dim, kv_heads, bias=qkv_bias) over the values, exp(A softplus(dt)) a
    per-key bias on each kv head's scores (its keep_window_size best keys kept)."""
    residual_weights: bool = False
    """Learned per-channel weights on both residual paths of every block, x_new = w * x + f(x)
    (Doge input_residual, post_attention_residual: 2 h parameters a block)."""
    differential_attention: bool = False
    """Differential attention (Ye et al. 2024, arXiv 2410.05258; transformers DiffLlamaAttention):
    two softmax maps over the same Q and K, the second subtracted with a learned lambda
    (lambda_q1/k1/q2/k2: 4 head_dim parameters a block) before a weight-free RMSNorm."""
    ffn_hidden: int = Field(0, ge=0)
    """Dense MLP hidden size (HF intermediate_size; 4h for GPT); 0 only when no block has a
    dense MLP."""
    product_key_experts: ProductKeySpec | None = None
    """Product-key expert memory added to every dense MLP's output (Doge's cross-domain MoE,
    `specs/product_key.py`). None: none."""
    mlp: bool = True
    """Blocks have an MLP after the mixer (false: Mamba's mixer-only blocks)."""
    vocab: int = Field(gt=0)
    """Vocabulary size (rows of the token embedding)."""
    embedding_dim: int | None = Field(None, gt=0)
    """Token-embedding width when it differs from hidden (OPT-350m word_embed_proj_dim): adds
    bias-free project_in (embedding_dim -> hidden) and project_out (hidden -> embedding_dim)."""
    max_positions: int = Field(2048, gt=0)
    """Rows of the learned position table (HF max_position_embeddings)."""
    position: Position = "rotary"
    """Position encoding; 'learned' adds a table, 'relative' T5's bucketed bias (the first
    block of each stack holds relative_buckets x heads)."""
    relative_buckets: int = Field(32, gt=0)
    """relative: buckets of T5's relative attention bias."""
    relative_max_distance: int = Field(128, gt=0)
    """relative: distance at which T5's buckets saturate."""
    norm: Norm = "rmsnorm"
    """Normalisation layer kind."""
    norm_bias: bool = False
    """Whether norms have a bias (LayerNorm's beta)."""
    norm_affine: bool = True
    """Whether norms have a learnable weight at all (false: OLMo's non-parametric LayerNorm)."""
    norm_eps: float = Field(1e-5, gt=0)
    """Epsilon of the norms (used by the executor)."""
    norm_placement: NormPlacement | None = None
    """pre: x + f(norm(x)); post: norm(x + f(x)) (BERT); sandwich: x + norm(f(norm(x))), four
    norms a block (Gemma 2/3, GLM-4); output: x + norm(f(x)) (OLMo-2). None: pre."""
    qkv_bias: bool = False
    """Bias on the Q, K, V projections (MLA: on the down projections q_a and kv_a)."""
    attn_out_bias: bool = False
    """Bias on the attention output projection."""
    mlp_bias: bool = False
    """Bias on the MLP projections."""
    gated_mlp: bool = True
    """Gated MLP (SwiGLU/GeGLU: two input projections) instead of a plain one."""
    activation: Activation = "silu"
    """MLP activation (inside the gate for gated MLPs; swiglu_clamp: gpt-oss's clamped SwiGLU)."""
    tied_embeddings: bool = False
    """Output head shares the token embedding matrix."""
    lm_head_bias: bool = False
    """Bias on the output head (Phi; BERT's MLM decoder bias)."""
    head_bias_copy: bool = False
    """A second vocab-sized head bias held but unused in forward (transformers 5.24
    BertLMPredictionHead untied: `bias` beside `decoder.bias`, which forward adds)."""
    parallel_block: bool = False
    """Attention and MLP read the same input and are summed (GPT-J, Falcon, GPT-NeoX, Cohere)."""
    norms_per_layer: int | None = Field(None, ge=1, le=4)
    """Norms per block; None means 4 for sandwich, 1 for parallel or MLP-free blocks, else 2."""
    final_norm: bool = True
    """A norm after the last block (of each stack for encoder_decoder)."""
    embedding_norm: bool = False
    """A norm right after the embeddings (BLOOM, BERT)."""
    embedding_scale: float | None = Field(None, gt=0)
    """Factor on the token embeddings (Gemma sqrt(hidden), Granite embedding_multiplier)."""
    residual_scale: float = Field(1.0, gt=0)
    """Factor on each block's branch output before the residual add (Granite residual_multiplier)."""
    logit_scale: float = Field(1.0, gt=0)
    """Factor on the output logits (Cohere logit_scale, Granite 1 / logits_scaling)."""
    type_vocab: int = Field(0, ge=0)
    """Token-type (segment) embedding rows (BERT: 2)."""
    pooler: bool = False
    """BERT pooler (dense h x h with bias on the first token)."""
    lm_head: bool = True
    """Whether an output projection to the vocabulary exists (counted unless tied)."""
    mlm_transform: bool = False
    """BERT MLM head transform before the output head: dense h x h + bias, activation, norm
    (the decoder's vocab-sized bias is `lm_head_bias`)."""
    classifier: ClassifierSpec | None = None
    """A task head linear (HF ...ForSequenceClassification and friends)."""
    mtp_layers: int = Field(0, ge=0)
    """Multi-token prediction modules (DeepSeek-V3 sec. 2.2, num_nextn_predict_layers): each two
    norms, a Linear(2h, h), one block and a norm; embedding and output head shared."""
    mtp_not_built: int = Field(0, ge=0)
    """MTP modules a checkpoint's config declares (num_nextn_predict_layers) that its HF class does
    not build (DeepseekV3ForCausalLM skips their weights on load; transformers' MtpModel wraps them
    apart): in neither the count nor a plan; `count` reports their size apart (`not_built`). Set
    mtp_layers instead to plan an engine that trains them (Megatron-core --mtp-num-layers)."""
    mtp_loss_weight: float = Field(0.1, gt=0)
    """lambda of the training loss L_main + lambda / D * sum_k L_k over the D MTP modules
    (DeepSeek-V3 sec. 2.2: 0.3, then 0.1; Megatron-core --mtp-loss-scaling-factor 0.1)."""
    vision: VisionSpec | None = None
    """A vision tower and projector (Gemma 3, Mistral 3); parameters only."""
    inputs: EncoderInput | None = None
    """An encoder reading images (ViT patches) or audio (wav2vec 2.0 convs) instead of tokens, and
    its task head (`specs/encoder_inputs.py`); no token table. None: tokens."""
    dropout: bool = False
    """Dropout is active in training (adds 1-byte masks to activation memory, Korthikanti et al.)."""
    moe: MoESpec | None = None
    """Mixture-of-experts settings; None for a dense model."""
    extras: ExtrasSpec | None = None
    """Small options of the block stack: factored embeddings, extra or frozen position rows, sub-norms,
    adapters (`specs/extras.py`); None: none of them."""

    @field_validator("layer_types")
    @classmethod
    def _non_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("layer_types must not be empty (omit it for all full_attention)")
        return value

    @model_validator(mode="after")
    def _check(self) -> "TransformerSpec":
        check_transformer(self)
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
    def dim_value(self) -> int:
        """Per-head value width with the head_dim default applied."""
        return self.v_head_dim if self.v_head_dim is not None else self.dim_head

    @property
    def v_width(self) -> int:
        """Width of all value heads together: kv_heads * value head width (= kv_width by default)."""
        return self.num_kv_heads * self.dim_value

    @property
    def v_proj_width(self) -> int:
        """Output width of v_proj: v_width, or 0 when the keys double as the values."""
        return 0 if self.value_is_key else self.v_width

    @property
    def o_width(self) -> int:
        """Input width of the output projection: heads * value head width (= q_width by default)."""
        return self.heads * self.dim_value

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
    def placement(self) -> NormPlacement:
        """Norm placement with the default (pre) applied."""
        return self.norm_placement if self.norm_placement is not None else "pre"

    @property
    def num_norms_per_layer(self) -> int:
        """Norms inside one block (a decoder block's cross-attention norm not included)."""
        if self.norms_per_layer is not None:
            return self.norms_per_layer
        if self.hyper_connections is not None and self.hyper_connections.lowrank is not None:
            return 0  # Qwen4-Exp: the gated residuals' grouped norms replace the block's (count/hyperconn.py)
        if self.placement == "sandwich":
            return 4
        return 1 if self.parallel_block or not self.mlp else 2

    @property
    def causal(self) -> bool:
        """Decoder models (and the decoder of an encoder-decoder) use a causal mask."""
        return self.arch != "encoder"

    @property
    def num_decoder_layers(self) -> int:
        """Decoder blocks of an encoder-decoder (0 otherwise)."""
        if self.arch != "encoder_decoder":
            return 0
        return self.decoder_layers if self.decoder_layers is not None else self.layers

    @property
    def num_blocks(self) -> int:
        """All blocks: the encoder's then the decoder's for encoder_decoder, else `layers`."""
        return self.layers + self.num_decoder_layers

    def is_decoder_block(self, index: int) -> bool:
        """Whether block `index` is a decoder block of an encoder-decoder (has cross-attention)."""
        return self.arch == "encoder_decoder" and index >= self.layers

    def is_first_in_stack(self, index: int) -> bool:
        """The first block of the (encoder or decoder) stack: holds T5's relative bias table."""
        return index == 0 or (self.arch == "encoder_decoder" and index == self.layers)

    def layer_type(self, index: int) -> LayerType:
        """Mixer of block `index` (layer_types repeated cyclically; full_attention by default)."""
        if self.layer_types is None:
            return "full_attention"
        return self.layer_types[index % len(self.layer_types)]

    def has_mlp(self, index: int) -> bool:
        """Whether block `index` has an MLP: every block unless `mlp` is false, then only the
        mixer-free `mlp` blocks (Nemotron-H's '-' and 'E' blocks)."""
        return self.mlp or self.layer_type(index) == "mlp"

    def rotary_in(self, mixer: str) -> bool:
        """Whether blocks whose mixer is `mixer` rotate q and k (NoPE full-attention blocks do not)."""
        return self.position == "rotary" and not (self.nope_full_attention and mixer == "full_attention")

    def qk_norm_in(self, mixer: str) -> bool:
        """Whether blocks whose mixer is `mixer` normalise q and k (Llama 4: its rotary blocks only)."""
        return self.qk_norm and not (self.nope_full_attention and mixer == "full_attention")

    def is_moe_layer(self, index: int) -> bool:
        """Whether block `index` (0-based) has an MoE MLP."""
        moe = self.moe
        if moe is None or not self.has_mlp(index):
            return False
        if moe.layers is not None:
            return index in moe.layers
        if index < moe.first_dense_layers:
            return False
        return (index - moe.first_dense_layers + 1) % moe.layer_freq == 0

    @property
    def num_moe_layers(self) -> int:
        """Number of blocks whose MLP is a mixture of experts."""
        return sum(self.is_moe_layer(i) for i in range(self.layers))
