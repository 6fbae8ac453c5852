"""Sub-specs of the linear-time sequence mixers beyond Mamba-1: the Mamba-2 SSD mixer and the
gated DeltaNet. Each holds exactly the sizes and flags that change a count.

- Mamba-2 (Dao & Gu 2024, arXiv 2405.21060, sec. 7 "the Mamba-2 architecture"), as transformers'
  `Mamba2Mixer` / `BambaMixer` / `GraniteMoeHybridMambaLayer` / `NemotronHMamba2Mixer`: one
  in_proj to [z, x, B, C, dt] (x: heads * head_dim, B and C: n_groups * state each, dt: one per
  head), a depthwise causal conv1d over [x, B, C], A_log, D and dt_bias per head, a gated RMSNorm
  over d_inner (per group of d_inner / n_groups channels) and out_proj.
- Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, arXiv 2412.06464), as transformers'
  `Qwen3NextGatedDeltaNet` / `Qwen3_5GatedDeltaNet`: in_proj to q, k (key heads x key dim), v, z
  (value heads x value dim) and b, a (one per value head), a depthwise conv1d over [q, k, v]
  without bias, A_log and dt_bias per value head, a gated RMSNorm over one value head's dims
  (weight shared by the heads) and out_proj.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from modelplan.specs.base import Spec


class Mamba2Spec(Spec):
    """A Mamba-2 (SSD) mixer."""

    heads: int = Field(gt=0)
    """H: SSM heads (HF mamba_n_heads / mamba_num_heads / num_heads); one A, D, dt each."""
    inner: int = Field(gt=0)
    """d_inner: channels of x, z and y (HF int(mamba_expand * hidden) for Bamba / Granite,
    mamba_num_heads * mamba_head_dim for Nemotron-H); H * P with P channels a head."""
    state_size: int = Field(128, gt=0)
    """N: state dimension (HF mamba_d_state / ssm_state_size)."""
    groups: int = Field(1, gt=0)
    """G: groups sharing one B and one C (HF mamba_n_groups / n_groups)."""
    conv_kernel: int = Field(4, gt=0)
    """Width of the depthwise causal conv1d over [x, B, C]."""
    chunk_size: int = Field(256, gt=0)
    """Q: chunk length of the SSD algorithm (HF mamba_chunk_size / chunk_size)."""
    proj_bias: bool = False
    """Biases on in_proj and out_proj (HF mamba_proj_bias / use_bias)."""
    out_proj_bias: bool | None = None
    """Bias on out_proj when it differs from in_proj's (Falcon-H1 projectors_bias); None: proj_bias."""
    gated_norm: bool = True
    """The gated RMSNorm before out_proj (Falcon-H1 mamba_rms_norm false: none, y * silu(z) only)."""
    conv_bias: bool = True
    """Bias on the conv1d (HF mamba_conv_bias / use_conv_bias)."""

    @model_validator(mode="after")
    def _check(self) -> "Mamba2Spec":
        if self.heads % self.groups:
            raise ValueError(f"mamba2.groups ({self.groups}) must divide mamba2.heads ({self.heads})")
        if self.inner % self.heads:
            raise ValueError(f"mamba2.heads ({self.heads}) must divide mamba2.inner ({self.inner})")
        return self

    @property
    def head_dim(self) -> int:
        """P = d_inner / H: channels per head."""
        return self.inner // self.heads

    @property
    def has_out_bias(self) -> bool:
        """Whether out_proj has a bias."""
        return self.proj_bias if self.out_proj_bias is None else self.out_proj_bias

    @property
    def conv_dim(self) -> int:
        """Channels of the conv1d: x (d_inner) and B, C (G * N each)."""
        return self.inner + 2 * self.groups * self.state_size

    @property
    def in_proj_width(self) -> int:
        """Outputs of in_proj: z (d_inner), x, B, C (conv_dim) and dt (H)."""
        return self.inner + self.conv_dim + self.heads


class DeltaNetSpec(Spec):
    """A gated DeltaNet mixer."""

    key_heads: int = Field(gt=0)
    """Key (and query) heads (HF linear_num_key_heads)."""
    value_heads: int = Field(gt=0)
    """Value heads (HF linear_num_value_heads); q and k are repeated to them in the kernel."""
    key_head_dim: int = Field(gt=0)
    """d_k per head (HF linear_key_head_dim)."""
    value_head_dim: int = Field(gt=0)
    """d_v per head (HF linear_value_head_dim)."""
    conv_kernel: int = Field(4, gt=0)
    """Width of the depthwise causal conv1d over [q, k, v] (HF linear_conv_kernel_dim)."""
    chunk_size: int = Field(64, gt=0)
    """C: chunk length of the chunkwise delta-rule kernel (fla chunk_gated_delta_rule: 64)."""
    kda: bool = False
    """Kimi Delta Attention (Kimi Linear, arXiv 2510.26692; transformers KimiLinearDeltaAttention):
    a per-channel decay from a low-rank forget gate (f_a: h -> d_k, f_b: d_k -> all channels, a
    dt_bias per channel), beta from b_proj, a low-rank sigmoid output gate (g_a, g_b) instead of
    the z projection; q, k, v projections of equal heads."""
    kda_full_rank_gates: bool = False
    """With kda: the forget and output gates are full-rank Linear(h, value_dim) each (Bailing
    hybrid's BailingHybridForgetGate.f_proj and g_proj) instead of Kimi Linear's rank-d_k pairs."""

    @model_validator(mode="after")
    def _check(self) -> "DeltaNetSpec":
        if self.value_heads % self.key_heads:
            raise ValueError(f"deltanet.key_heads ({self.key_heads}) must divide deltanet.value_heads "
                             f"({self.value_heads})")
        return self

    @property
    def key_dim(self) -> int:
        """Width of q (and of k): key_heads * key_head_dim."""
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        """Width of v (and of z, and of the output): value_heads * value_head_dim."""
        return self.value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the conv1d: q, k and v."""
        return 2 * self.key_dim + self.value_dim


class ShortConvSpec(Spec):
    """An LFM2 gated short-convolution mixer (Liquid AI LFM2; transformers `Lfm2ShortConv`):
    in_proj Linear(h, 3h) to B, C, x; y = C * conv(B * x) with a depthwise causal Conv1d(h, h,
    L, groups=h); out_proj Linear(h, h). The conv width is the model's hidden size."""

    conv_kernel: int = Field(3, gt=0)
    """L: width of the depthwise causal conv (HF conv_L_cache)."""
    bias: bool = False
    """Biases on in_proj, the conv and out_proj (HF conv_bias)."""


class RGLRUSpec(Spec):
    """Griffin's recurrent block (De et al. 2024, arXiv 2402.19427, sec. 2.4; transformers
    `RecurrentGemmaRecurrentBlock`): linear_y and linear_x (h -> w, biases), y through GeLU; x
    through a depthwise causal Conv1d(w, w, k) with bias, then the RG-LRU (input and recurrence
    gates as block-diagonal linears of `heads` blocks, biases; a learned recurrent_param per
    channel); out = linear_out((rg_lru(x) * y)), w -> h with bias."""

    width: int = Field(gt=0)
    """w: RG-LRU channels (HF lru_width, default hidden_size)."""
    heads: int = Field(gt=0)
    """Blocks of the block-diagonal gates (HF num_attention_heads)."""
    conv_kernel: int = Field(4, gt=0)
    """k: width of the temporal conv (HF conv1d_width)."""

    @model_validator(mode="after")
    def _check(self) -> "RGLRUSpec":
        if self.width % self.heads:
            raise ValueError(f"rglru.heads ({self.heads}) must divide rglru.width ({self.width})")
        return self

    @property
    def block_width(self) -> int:
        """Channels of one gate block: w / heads."""
        return self.width // self.heads


class LightningSpec(Spec):
    """MiniMax's lightning attention (MiniMax-01 report, arXiv 2501.08313, sec. 2.2; Lightning
    Attention-2, Qin et al. 2024, arXiv 2401.04658; transformers `MiniMaxLightningAttention`):
    qkv_proj Linear(h, 3 H d) then SiLU, a decayed causal linear attention computed block-wise
    (intra-block masked Q K^T V, inter-block through a d x d state per head), an RMSNorm over all
    H d channels, times sigmoid(output_gate(x)), out_proj; all linears bias-free."""

    heads: int = Field(gt=0)
    """H (HF num_attention_heads)."""
    head_dim: int = Field(gt=0)
    """d (HF head_dim, default hidden / heads)."""
    block_size: int = Field(256, gt=0)
    """B: block length of the block-wise algorithm (HF block_size)."""

    @property
    def width(self) -> int:
        """H d: width of q, k, v, the gate and the output."""
        return self.heads * self.head_dim


class RWKVSpec(Spec):
    """An RWKV-4 block's two mixers (Peng et al. 2023, arXiv 2305.13048, sec. 3; transformers
    `RwkvSelfAttention` and `RwkvFeedForward`): time mixing (token-shift mixes time_mix_key /
    value / receptance, key, value, receptance Linear(h, A), the WKV recurrence with time_decay and
    time_first per channel, output Linear(A, h)) and channel mixing (token-shift mixes, key
    Linear(h, I), squared ReLU, value Linear(I, h), gated by sigmoid(receptance Linear(h, h)));
    all linears bias-free."""

    attention_hidden: int = Field(gt=0)
    """A: channels of the time mixing (HF attention_hidden_size, default hidden)."""
    intermediate: int = Field(gt=0)
    """I: channel-mixing width (HF intermediate_size, default 4 hidden)."""
