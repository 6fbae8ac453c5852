"""Sub-specs of a transformer block and of its extra modules: experts (MoE), latent attention
(MLA), a state-space mixer (Mamba), a task head and a vision tower.

Each sub-spec holds exactly the sizes and flags that change a count; options that change only the
executed math (router scoring, scalings) are fields too, so `verify` can refuse what it cannot run.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from modelplan.specs.base import Spec

Norm = Literal["layernorm", "rmsnorm"]
Router = Literal["softmax", "sigmoid", "topk_softmax", "sparsemixer"]


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
    output_bias: bool = False
    """One bias vector (h) added to the merged expert output (JetMoE JetMoeMoE.bias)."""
    router_scales: bool = False
    """The router scales its (weight-free RMS-normed) input per channel and each chosen expert's
    weight by a learned per-expert scale: h + num_experts parameters (Gemma 4 Gemma4TextRouter)."""
    branch_norms: int = Field(0, ge=0)
    """Norms of the MLP's parallel branches beyond the block's own (Gemma 4's MoE blocks: the
    dense MLP's and the experts' post norms and the experts' pre norm, 3), each of width h."""
    layer_freq: int = Field(1, gt=0, description="Every layer_freq-th layer is MoE.")
    """Every `layer_freq`-th layer (counting from 1 after the dense prefix) is an MoE layer."""
    first_dense_layers: int = Field(0, ge=0)
    """Number of leading layers that keep a dense MLP (DeepSeek `first_k_dense_replace`)."""
    layers: list[int] | None = None
    """Explicit 0-based indices of the MoE blocks (Llama 4 `moe_layers`, Jamba's expert period and
    offset, Qwen-MoE's scattered `mlp_only_layers`); overrides layer_freq / first_dense_layers."""
    router_bias: bool = False
    """Whether the router (gate) linear layer has a bias (gpt-oss)."""
    expert_bias: bool | None = None
    """Biases on every routed expert's projections (gpt-oss gate_up_proj_bias / down_proj_bias);
    None: the model's `mlp_bias` (DeepSeek-V2 sets false: its fused experts have none)."""
    router: Router = "softmax"
    """Routing score: softmax over all experts then top-k (Mixtral, Qwen), sigmoid (DeepSeek-V3,
    Llama 4), topk_softmax (softmax over the top-k logits: gpt-oss) or sparsemixer (Phi-3.5-MoE)."""
    norm_topk_prob: bool = True
    """Renormalise the top-k routing weights to sum to 1 (Qwen2-MoE sets false)."""
    router_score_correction: bool = False
    """Auxiliary-loss-free balancing: a per-expert bias added to the scores for selection only
    (DeepSeek-V3 e_score_correction_bias, a buffer: no parameter)."""
    score_correction_param: bool = False
    """The selection bias is stored as a (frozen, requires_grad=False) parameter of num_experts
    values a block, counted in the parameters (AFMoE `expert_bias`), instead of a buffer."""
    router_groups: int = Field(1, gt=0)
    """Expert groups of group-limited routing (DeepSeek n_group with topk_method
    group_limited_greedy or noaux_tc): a token picks its experts from the router_group_top_k best
    groups only (a group scored by its best expert, or with router_score_correction by the sum of
    its best two). 1: no groups."""
    router_group_top_k: int = Field(1, gt=0)
    """Groups a token may pick experts from (DeepSeek topk_group)."""
    routed_scaling: float = Field(1.0, gt=0)
    """Factor on the routed experts' output (DeepSeek routed_scaling_factor)."""
    capacity_factor: float | None = Field(None, gt=0)
    """Token capacity factor for expert buffers (None: dropless)."""
    weights_on_input: bool = False
    """The routing weight scales each expert's input instead of its output (Llama 4:
    routed_in = hidden * sigmoid(logit))."""
    shared_expert_gate: bool = False
    """A sigmoid gate (h x 1 linear, no bias) scaling the shared experts' output (Qwen2-MoE)."""
    zero_experts: int = Field(0, ge=0)
    """Zero-computation (identity) experts the router also scores (LongCat-Flash zero_expert_num,
    arXiv 2509.01322 sec. 2.1): a top-k slot on one returns the token unchanged, no weights. With
    its load balanced over all E + Z experts a token runs top_k E / (E + Z) real experts on average
    (the expected FLOPs and active parameters counted)."""
    zero_expert_padding: bool = False
    """gate_up rows allocated for the zero experts too, never read (transformers 5.24
    LongcatFlashExperts.gate_up_proj is (E + Z, 2f, h)): counted as `mlp/zero_expert_padding`."""
    router_mlp: int | None = Field(None, gt=0)
    """r: a router MLP instead of Linear(h, E) (ZAYA ZayaRouter: down_proj h -> r, an RMSNorm, two
    GELU Linear(r, r), out_proj r -> E + 1, the last class skipping the MLP; each block after the
    first adds the previous block's router state). A token still runs top_k experts."""
    shortcut: bool = False
    """The MoE reads this block's MLP input but its output joins the residual at the end of the
    next block (LongCat-Flash's shortcut-connected MoE): the same counts, a different order."""

    @model_validator(mode="after")
    def _check(self) -> "MoESpec":
        if self.top_k > self.num_experts:
            raise ValueError(
                f"moe.top_k ({self.top_k}) must not exceed moe.num_experts ({self.num_experts})"
            )
        if self.shared_expert_gate and self.shared_experts == 0:
            raise ValueError("moe.shared_expert_gate needs moe.shared_experts > 0 (got 0)")
        if self.num_experts % self.router_groups:
            raise ValueError(f"moe.router_groups ({self.router_groups}) must divide moe.num_experts ({self.num_experts})")
        if self.router_group_top_k > self.router_groups:
            raise ValueError(f"moe.router_group_top_k ({self.router_group_top_k}) must not exceed "
                             f"moe.router_groups ({self.router_groups})")
        if self.router_groups > 1 and self.router_group_top_k * (self.num_experts // self.router_groups) < self.top_k:
            raise ValueError(f"moe.router_group_top_k ({self.router_group_top_k}) groups of "
                             f"{self.num_experts // self.router_groups} experts hold fewer than moe.top_k ({self.top_k})")
        if self.layers is not None and any(i < 0 for i in self.layers):
            raise ValueError(f"moe.layers ({self.layers}) must be 0-based block indices")
        return self


class IndexerSpec(Spec):
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp report, sec. 2.1;
    transformers `DeepseekV32Indexer`): per token, index queries from the MLA query latent
    (wq_b: q_lora_rank -> heads x head_dim), one index key (wk: h -> head_dim, then a LayerNorm)
    and per-head weights (weights_proj: h -> heads); each query scores every earlier key as
    sum_h w_h relu(q_h . k) and the main attention reads only its top-k keys."""

    heads: int = Field(64, gt=0)
    """H^I: index heads (HF index_n_heads)."""
    head_dim: int = Field(128, gt=0)
    """d^I: index head dims (HF index_head_dim)."""
    topk: int = Field(2048, gt=0)
    """Keys each query's main attention reads (HF index_topk)."""
    layers: list[int] | None = None
    """0-based blocks that hold and run an indexer; the others reuse the top-k of the last one
    before them (HY-V4 / GLM-MoE-DSA indexer_types 'shared'). None: every block."""
    reused: bool = False
    """Set by `specs.attention_shape.for_block` on a block outside `layers`: no indexer weights
    or compute of its own (count/mla_extras.py own_indexer), still index_topk keys a query."""
    kpool: int | None = Field(None, gt=0)
    """GLM-5-Next's pooled index keys (Glm5NextTextIndexer): every kpool tokens' keys are pooled
    by a softmax gate (index_kpool_compress_gate (d, h) over the block input, plus
    index_kpool_compress_ape (kpool, d)); the queries score the pools and the main attention reads
    the tokens of the topk / kpool best ones. None: DeepSeek-V3.2's per-token keys."""
    query_from_hidden: bool = False
    """The index queries come from the block input, not the query latent (Mistral Large 4's
    MistralLarge4TextIndexer: q_input_norm LayerNorm(h), wq_b Linear(h, H d), a learned per-head
    softmax scale and bias, 2 H)."""
    kpool_tail: bool = True
    """With kpool: the incomplete last pool's tokens (kpool - 1 at most) are read too
    (index_kpool_always_select_tail)."""

    @model_validator(mode="after")
    def _check_layers(self) -> "IndexerSpec":
        if self.layers is not None and (not self.layers or min(self.layers) < 0):
            raise ValueError(f"mla.indexer.layers ({self.layers}) must list block indices >= 0 (the first top-k among them)")
        return self


class MLASpec(Spec):
    """Multi-head Latent Attention (DeepSeek-V2, arXiv 2405.04434, sec. 2.1): queries and keys /
    values go through low-rank latents; a decoupled rotary key is shared by all heads."""

    kv_lora_rank: int = Field(gt=0)
    """d_c: width of the compressed KV latent (the only per-token cache besides the rope key)."""
    q_lora_rank: int | None = Field(None, gt=0)
    """d_c': width of the query latent; None: a plain q projection (DeepSeek-V2-Lite)."""
    qk_nope_head_dim: int = Field(gt=0)
    """Per-head query/key dims without rotary (d_h)."""
    qk_rope_head_dim: int = Field(ge=0)
    """Decoupled rotary dims per head (d_h^R); the rotary key is one head wide, shared (0: NoPE
    MLA, GLM-5-Next)."""
    v_head_dim: int = Field(gt=0)
    """Per-head value dims."""
    indexer: IndexerSpec | None = None
    """DeepSeek Sparse Attention's indexer (DeepSeek-V3.2); None: dense MLA. Needs q_lora_rank."""
    softmax_scales: bool = False
    """A learned per-head scale and bias on the queries over log(position + 1) (Mistral Large 4's
    MistralLarge4TextSoftmaxScaling: 2 heads a block)."""
    rotary_alpha: bool = False
    """A learned exponent per rotary frequency, once in the model (MistralLarge4TextRotaryEmbedding.alpha:
    qk_rope_head_dim / 2)."""
    nope_layers: list[int] | None = None
    """Blocks without rotary dims: their queries and keys are qk_nope_head_dim + qk_rope_head_dim
    wide without a rope key (Mistral Large 4 no_rope_layers 0)."""
    kv_source: list[int] | None = None
    """Each block's latent source: a block whose entry is an earlier block reads that block's
    latent and holds no kv_a_proj_with_mqa / kv_a_layernorm (Mistral Large 4 kv_source_layers)."""
    kv_reused: bool = False
    """Set by `specs.attention_shape.for_block` on a block reading an earlier latent (kv_source)."""
    rope_key_norm: bool = False
    """An RMSNorm over the shared rope key before its rotary (dots.3 k_rope_only_layernorm:
    qk_rope_head_dim weights)."""

    @model_validator(mode="after")
    def _check_indexer(self) -> "MLASpec":
        if self.indexer is not None and self.q_lora_rank is None and not self.indexer.query_from_hidden:
            raise ValueError("mla.indexer needs mla.q_lora_rank (its queries read the query latent)")
        return self

    @property
    def qk_head_dim(self) -> int:
        """Query/key width per head: nope + rope dims."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


class SSMSpec(Spec):
    """A Mamba (selective state-space) mixer, Gu & Dao 2023 (arXiv 2312.00752), as HF MambaMixer."""

    state_size: int = Field(16, gt=0)
    """N: state dimension per channel."""
    inner: int = Field(gt=0)
    """d_inner = expand * hidden: channels of the inner SSM."""
    conv_kernel: int = Field(4, gt=0)
    """Width of the causal depthwise conv1d."""
    dt_rank: int = Field(gt=0)
    """Rank of the time-step projection (ceil(hidden / 16) for 'auto')."""
    proj_bias: bool = False
    """Biases on in_proj and out_proj (HF use_bias / mamba_proj_bias)."""
    conv_bias: bool = True
    """Bias on the conv1d (HF use_conv_bias)."""
    bc_dt_norm: bool = False
    """RMSNorms on the time step, B and C (Jamba dt_layernorm, b_layernorm, c_layernorm)."""
    heads: int = Field(1, gt=0)
    """Zamba's multi-head Mamba (ZambaMambaMixer n_mamba_heads): d_inner split into heads, each
    with its own x_proj (dt, B, C) and dt_proj slice; the same parameter and FLOP counts as one
    head, different math."""

    @model_validator(mode="after")
    def _check_heads(self) -> "SSMSpec":
        if self.inner % self.heads:
            raise ValueError(f"ssm.heads ({self.heads}) must divide ssm.inner ({self.inner})")
        return self


class ClassifierSpec(Spec):
    """A task head linear (HF ...ForSequenceClassification, ...ForTokenClassification, ...)."""

    num_labels: int = Field(gt=0)
    """Output features (HF num_labels; 2 for question answering's start/end logits)."""
    bias: bool = True
    """Bias on the classifier linear (BERT heads: yes; decoder `score` heads: no)."""
    per_token: bool = False
    """Applied to every token (token classification, QA, decoders' score head) instead of once
    per sequence on the pooled first token."""


class ConnectorLayer(Spec):
    """One parameter-holding layer of a vision projector / patch merger, in execution order
    (Qwen-VL PatchMerger, LLaVA / InternVL multi_modal_projector, Idefics3 connector, Llama 4
    pixel-shuffle MLP): a linear, a norm or a learned vector (LLaVA-NeXT image_newline)."""

    name: str = Field(min_length=1)
    """Breakdown key under `vision/projector/` (e.g. `merger/fc1`)."""
    kind: Literal["linear", "layernorm", "rmsnorm", "vector", "conv", "attention"]
    """linear: Linear(in_features, out_features); layernorm / rmsnorm: a norm over in_features
    (rmsnorm has no bias); vector: in_features learned values, no matmul; conv: Conv2d(in_features,
    out_features, kernel, groups=groups), rows = its output positions; attention: the score and
    value matmuls of `in_features` channels, each row attending to `keys` keys (no parameters)."""
    in_features: int = Field(gt=0)
    """Input width (the norm's or vector's width)."""
    out_features: int = Field(0, ge=0)
    """Output width of a linear (0 for norms and vectors)."""
    bias: bool = False
    """Bias on the linear / LayerNorm."""
    merge: int = Field(1, gt=0)
    """Tower patches folded into one input row of this layer (m^2 after a spatial merge, 1/r^2
    after a pixel shuffle): the layer runs on patches // merge rows per image."""
    copies: int = Field(1, gt=0)
    """Identical copies (Qwen3-VL's deepstack mergers), each run once per image."""
    row_offset: int = Field(0, ge=-1, le=1)
    """Rows per image beyond patches // merge: -1 where LLaVA's 'default' feature strategy drops
    the first token of a tower without a class token (SigLIP), +1 where 'full' keeps CLIP's."""
    rows: int | None = Field(None, gt=0)
    """Rows per image when fixed by the layer rather than the patches (a perceiver resampler's
    latent queries, Idefics2 resampler_n_latents); replaces patches // merge + row_offset."""
    kernel: int = Field(1, gt=0)
    """conv: square kernel side."""
    groups: int = Field(1, gt=0)
    """conv: groups (in_features for a depthwise conv); it divides in_features and out_features."""
    keys: int | None = Field(None, gt=0)
    """attention: keys each row's query scores (a window's tokens; a channel group's width)."""

    @model_validator(mode="after")
    def _check(self) -> "ConnectorLayer":
        if self.kind in ("linear", "conv") and self.out_features == 0:
            raise ValueError(f"connector layer {self.name}: a {self.kind} needs out_features > 0")
        if self.kind == "conv" and (self.in_features % self.groups or self.out_features % self.groups):
            raise ValueError(f"connector layer {self.name}: groups ({self.groups}) must divide in_features "
                             f"({self.in_features}) and out_features ({self.out_features})")
        if self.kind == "attention" and self.keys is None:
            raise ValueError(f"connector layer {self.name}: an attention needs keys")
        return self


class VisionSpec(Spec):
    """A ViT-style vision tower and its projector into the text model (SigLIP for Gemma 3, Pixtral
    for Mistral 3, CLIP for LLaVA, the Qwen-VL towers, Llama 4's, InternViT): patch conv, position
    table or rotary, pre-norm encoder blocks, then a projector (the fixed Gemma 3 / Mistral 3 one,
    or a `connector` list of layers)."""

    layers: int = Field(ge=0)
    """Encoder blocks; 0: encoder-free (Gemma 4 unified's embedder: the patch embedding and its
    norms feed the connector directly)."""
    hidden: int = Field(gt=0)
    """Width of the tower."""
    heads: int = Field(gt=0)
    """Attention heads (head dim = hidden // heads)."""
    ffn_hidden: int = Field(gt=0)
    """MLP inner width."""
    patch_size: int = Field(gt=0)
    """Square patch side in pixels."""
    image_size: int = Field(gt=0)
    """Square image side in pixels (sizes the learned position table)."""
    channels: int = Field(3, gt=0)
    """Input image channels."""
    patch_bias: bool = True
    """Bias on the patch convolution."""
    position: Literal["learned", "rotary"] = "learned"
    """learned: one row per patch, (image_size / patch_size)^2 rows; rotary: no parameters."""
    norm: Norm = "layernorm"
    """Norm kind of the tower."""
    norm_bias: bool = True
    """Whether the tower's norms have a bias."""
    qkv_bias: bool = True
    """Bias on q, k, v."""
    attn_out_bias: bool = True
    """Bias on the attention output projection."""
    mlp_bias: bool = True
    """Bias on the MLP projections."""
    gated_mlp: bool = False
    """Gated MLP (Pixtral) instead of fc1/fc2 (SigLIP)."""
    pre_norm: bool = False
    """A norm on the patch embeddings before the blocks (Pixtral ln_pre)."""
    post_norm: bool = True
    """A norm after the last block (SigLIP post_layernorm)."""
    pooling_head: bool = False
    """SigLIP's attention-pooling head (vision_use_head): probe, MHA, norm and MLP."""
    projector_norm: bool = True
    """An RMSNorm (no bias) over the tower's output before the projection (Gemma 3, Mistral 3)."""
    patch_merge: int = Field(1, gt=0)
    """Spatial merge size m: a bias-free Linear(hidden * m^2, hidden) merging m x m patches."""
    projector_layers: Literal[1, 2] = 1
    """1: one Linear(hidden, text hidden); 2: Linear(hidden, text) + activation + Linear(text, text)."""
    projector_bias: bool = False
    """Biases on the projector linears."""
    temporal_patch: int = Field(1, gt=0)
    """Frames one patch spans (Qwen-VL Conv3d temporal_patch_size; an image is repeated to fill
    them): the patch conv has channels * temporal_patch * patch_size^2 inputs."""
    class_token: bool = False
    """A learned class embedding prepended to the patches (CLIP, InternViT, Llama 4): h
    parameters and one more token (and position row) per image."""
    position_rows: int | None = Field(None, gt=0)
    """Rows of the learned position table when it is not one per patch (+1 with a class token)
    of the configured image (Qwen3-VL num_position_embeddings, interpolated at run time)."""
    layer_scale: bool = False
    """Learned per-channel scales on both residual branches of every block (InternViT lambda_1 /
    lambda_2): 2h parameters per block."""
    qk_norm: bool = False
    """RMSNorms (no bias) over the full query and key width in every block (InternViT
    use_qk_norm)."""
    qk_norm_per_head: bool = False
    """With `qk_norm`: the RMSNorms span one head (hidden // heads weights each, shared by the
    heads: GLM-OCR's q_norm / k_norm) instead of the full width."""
    window_patches: int | None = Field(None, gt=0)
    """Side in patches of the square attention windows of the windowed blocks (Qwen2.5-VL:
    window_size // spatial_merge_size // patch_size merged tokens, times the merge size); the
    image's patch grid is cut into such windows from the top left, the last row and column of
    windows keeping the remainder. None: every block attends over the whole image. FLOPs only."""
    full_attention_layers: list[int] = Field(default_factory=list)
    """0-based blocks that attend over the whole image when `window_patches` is set (Qwen2.5-VL
    fullatt_block_indexes)."""
    pooled_tokens: int | None = Field(None, gt=0)
    """Tokens per image after Gemma 3's average pooling (mm_tokens_per_image): the projector runs
    on these. None: no pooling."""
    kv_heads: int | None = Field(None, gt=0)
    """Key / value heads of grouped-query attention in the tower's blocks (EXAONE 4.5's fused
    qkv of (heads + 2 kv_heads) x head_dim outputs); None: as many as `heads`."""
    head_dim: int | None = Field(None, gt=0)
    """Width of one attention head when it is not hidden // heads (Gemma 4's head_dim): q and o
    span heads x head_dim."""
    sandwich_norms: bool = False
    """Norms after the attention and MLP outputs too (Gemma 4's post_attention_layernorm /
    post_feedforward_layernorm): four per block instead of two."""
    conv_layers: int = Field(0, ge=0)
    """Blocks whose token mixer is a gated depthwise short convolution instead of attention
    (LFM3-VL Lfm3VlVisionShortConv: bias-free in_proj h -> 3h, depthwise conv_kernel x
    conv_kernel over the patch grid, out_proj h -> h); the other layers - conv_layers attend."""
    conv_kernel: int = Field(3, gt=0)
    """Side of the short convolution's square depthwise kernel."""
    towers: int = Field(1, gt=0)
    """Identical towers of this config (Video-LLaVA's image_tower and video_tower): each holds
    the tower's parameters; an image runs through one."""
    connector: list[ConnectorLayer] | None = None
    """The projector as its layers, in order; replaces projector_norm / patch_merge /
    projector_layers / projector_bias (which describe Gemma 3's and Mistral 3's)."""
    tower: list[ConnectorLayer] | None = None
    """The tower as its layers, in order, for a tower that is no stack of uniform ViT blocks
    (Florence-2's DaViT: conv embeddings, stages of different widths): replaces the patch
    embedding, class token, positions, norms and blocks the fields above describe; `patch_size`
    is then the tower's total stride and `hidden` its output width (`patches`: its output tokens)."""
    input_unit: str | None = None
    """What one tower input is when it is not an image (an audio encoder's '30 s clip at 16 kHz':
    `count`'s per-image figures are then per clip); None: an image."""

    @model_validator(mode="after")
    def _check_conv_layers(self) -> "VisionSpec":
        if self.conv_layers > self.layers:
            raise ValueError(f"conv_layers ({self.conv_layers}) must not exceed layers ({self.layers})")
        # SiglipAttention / CLIPAttention: "embed_dim must be divisible by num_heads"
        if self.tower is None and self.attention_layers and self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"vision.heads ({self.heads}) must divide vision.hidden ({self.hidden}) when no "
                             "vision.head_dim is given")
        return self

    @property
    def head_size(self) -> int:
        """Width of one attention head."""
        return self.head_dim or self.hidden // self.heads

    @property
    def q_width(self) -> int:
        """Width of the query (and attention output) projection: heads x head_dim, else hidden."""
        return self.hidden if self.head_dim is None else self.heads * self.head_dim

    @property
    def attention_layers(self) -> int:
        """Blocks that attend (all but the short-convolution ones)."""
        return self.layers - self.conv_layers

    @property
    def patches(self) -> int:
        """Patches of one image of image_size x image_size pixels (temporal_patch frames)."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def tokens(self) -> int:
        """Tokens the tower's blocks run on per image (patches, plus the class token)."""
        return self.patches + int(self.class_token)
