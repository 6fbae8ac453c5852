"""Layer specs of a generic network (MLP, CNN, RNN), discriminated by `type`.

Names, fields and defaults follow the `torch.nn` module of the same name (`type = "conv2d"` is
`nn.Conv2d`), so a spec reads like the PyTorch model it describes. Sizes that the previous
layer determines (`in_features`, `in_channels`, `num_features`, `input_size`) may be left out:
`modelplan.specs.network_walk` infers them from `NetworkSpec.input_shape`, and checks them
when given. Shapes are per sample: the batch dimension is never written (PyTorch's
`batch_first=True` layout, so a sequence sample is `[seq, features]`).
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, field_validator, model_validator

from modelplan.specs.base import Spec

IntOrTuple = Union[int, tuple[int, ...]]


class LayerBase(Spec):
    """Fields every layer has."""

    name: str | None = None
    """Path segment of this layer (torch attribute name, e.g. 'conv1'); None: its position."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or "/" in value or "." in value):
            raise ValueError(f"name '{value}' must be non-empty without '/' or '.'")
        return value


def _positive(values: IntOrTuple, field: str, minimum: int = 1) -> IntOrTuple:
    """Every entry of an int-or-tuple field is >= minimum."""
    items = values if isinstance(values, tuple) else (values,)
    if not items or any(v < minimum for v in items):
        raise ValueError(f"{field} ({values}) must be >= {minimum}")
    return values


class Linear(LayerBase):
    """`nn.Linear`: y = x W^T + b over the last dimension."""

    type: Literal["linear"]
    out_features: int = Field(gt=0)
    """Output size."""
    in_features: int | None = Field(None, gt=0)
    """Input size; None: the input's last dimension."""
    bias: bool = True
    """Learnable additive bias."""


class Conv(LayerBase):
    """`nn.Conv1d` / `nn.Conv2d` over a [channels, length] or [channels, height, width] sample."""

    type: Literal["conv1d", "conv2d"]
    out_channels: int = Field(gt=0)
    """Output channels."""
    kernel_size: IntOrTuple
    """Kernel size (an int applies to every spatial dimension)."""
    in_channels: int | None = Field(None, gt=0)
    """Input channels; None: the input's first dimension."""
    stride: IntOrTuple = 1
    """Stride."""
    padding: IntOrTuple | Literal["same", "valid"] = 0
    """Zero padding on both sides, or 'same' (stride 1 only) / 'valid' (no padding)."""
    dilation: IntOrTuple = 1
    """Spacing between kernel elements."""
    groups: int = Field(1, gt=0)
    """Blocked connections: groups must divide in_channels and out_channels."""
    bias: bool = True
    """Learnable additive bias per output channel."""

    @model_validator(mode="after")
    def _check(self) -> "Conv":
        _positive(self.kernel_size, "kernel_size")
        _positive(self.stride, "stride")
        _positive(self.dilation, "dilation")
        if not isinstance(self.padding, str):
            _positive(self.padding, "padding", minimum=0)
        if self.out_channels % self.groups:
            raise ValueError(
                f"groups ({self.groups}) must divide out_channels ({self.out_channels})"
            )
        return self

    @property
    def spatial_dims(self) -> int:
        """1 for conv1d, 2 for conv2d."""
        return int(self.type[-2])


class BatchNorm(LayerBase):
    """`nn.BatchNorm1d` ([C] or [C, L] samples) / `nn.BatchNorm2d` ([C, H, W] samples)."""

    type: Literal["batchnorm1d", "batchnorm2d"]
    num_features: int | None = Field(None, gt=0)
    """Channels C; None: the input's first dimension."""
    affine: bool = True
    """Learnable gamma and beta (2*C parameters)."""
    track_running_stats: bool = True
    """Keep running mean/var and a batch counter: buffers (2*C + 1), not parameters."""
    eps: float = Field(1e-5, gt=0)
    """Added to the variance (used by the executor)."""


class LayerNorm(LayerBase):
    """`nn.LayerNorm` over the trailing `normalized_shape` dimensions; `layernorm2d` over the
    channel axis of a [C, ...] sample at every position (ConvNeXt's channels_first LayerNorm,
    transformers modeling_convnext.py ConvNextLayerNorm; timm's LayerNorm2d)."""

    type: Literal["layernorm", "layernorm2d"]
    normalized_shape: list[int] | None = None
    """Trailing dimensions normalised together; None: the last dimension (layernorm2d: the
    channels; it takes no normalized_shape)."""
    elementwise_affine: bool = True
    """Learnable per-element weight (and bias, see `bias`)."""
    bias: bool = True
    """With elementwise_affine, also a learnable bias (torch >= 2.1 flag)."""
    eps: float = Field(1e-5, gt=0)
    """Added to the variance (used by the executor)."""

    @field_validator("normalized_shape")
    @classmethod
    def _check_shape(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and (not value or any(v < 1 for v in value)):
            raise ValueError(f"normalized_shape ({value}) must be non-empty positive sizes")
        return value

    @model_validator(mode="after")
    def _check_channels(self) -> "LayerNorm":
        if self.type == "layernorm2d" and self.normalized_shape is not None:
            raise ValueError(f"layernorm2d normalises the channels: normalized_shape ({self.normalized_shape}) "
                             "must be left out")
        return self


class GroupNorm(LayerBase):
    """`nn.GroupNorm`: the channels of a [C, ...] sample in num_groups groups, each normalised over
    its channels and positions together (Wu & He 2018, eq. 1), then a per-channel affine."""

    type: Literal["groupnorm"]
    num_groups: int = Field(gt=0)
    """Groups; they divide the channels."""
    affine: bool = True
    """Learnable per-channel weight and bias (2 * C parameters)."""
    eps: float = Field(1e-5, gt=0)
    """Added to the variance (used by the executor)."""


class GlobalResponseNorm(LayerBase):
    """ConvNeXt V2's global response normalisation of a [C, H, W] map (Woo et al. 2023, eq. 1-3;
    transformers modeling_convnextv2.py ConvNextV2GRN): G_c = ||x_c||_2 over the positions,
    N_c = G_c / (mean over channels of G + 1e-6), y = gamma * (x * N) + beta + x; gamma and beta
    per channel."""

    type: Literal["grn"]


class LayerScale(LayerBase):
    """A learned per-channel scale y = x * gamma over the first sample axis (Touvron et al. 2021,
    CaiT sec. 3; ConvNeXt's layer_scale_parameter): C parameters, no bias."""

    type: Literal["layerscale"]


class WindowAttention(LayerBase):
    """Multi-head self-attention inside square windows of a [3C, H, W] map of stacked q, k, v
    (Liu et al. 2021, Swin Transformer, sec. 3.2; transformers modeling_swin.py SwinLayer): the
    grid is zero-padded at the bottom and right to a multiple of window_size, cyclically shifted
    up-left by `shift` (the regions the shift joins masked apart, -100 added to their scores),
    cut into window_size^2-token windows; each head scores softmax(q k^T / sqrt(d) + B) v with B
    from a ((2 w - 1)^2, heads) relative position bias table; the output [C, H, W] is the padding
    cropped off. Parameters: the table (relative_position_bias_table)."""

    type: Literal["windowattention"]
    heads: int = Field(gt=0)
    """Attention heads; 3 * heads divides the input channels."""
    window_size: int = Field(gt=0)
    """Side of the square windows, in positions."""
    shift: int = Field(0, ge=0)
    """Cyclic shift of the shifted-window blocks (window_size // 2), 0: none."""
    relative_bias: bool = True
    """A relative position bias added to the scores: a learned table, or with `bias_mlp` the
    continuous one."""
    bias_mlp: int = Field(0, ge=0)
    """Swin V2's continuous position bias (Liu et al. 2022, sec. 3.3): 16 sigmoid(MLP(log-spaced
    relative coordinates)), the MLP Linear(2, bias_mlp) + ReLU + Linear(bias_mlp, heads, no bias)
    (cpb_fc1_weight / cpb_fc1_bias / cpb_fc2_weight) in place of the table; 0: the table."""
    pretrained_window: int = Field(0, ge=0)
    """Swin V2: the window the coordinates are normalised by (pretrained_window_sizes); 0: window_size."""
    cosine: bool = False
    """Swin V2's scaled cosine attention: cos(q, k) * exp(min(logit_scale, log 100)), one
    learned logit_scale per head, in place of q k^T / sqrt(d)."""
    qv_bias: bool = False
    """Biases on q and v, none on k (Swin V2's query / value over a bias-free key), held here as
    q_bias and v_bias and added to the stacked input's q and v channels."""

    @model_validator(mode="after")
    def _check(self) -> "WindowAttention":
        if self.shift >= self.window_size:
            raise ValueError(f"shift ({self.shift}) must be smaller than window_size ({self.window_size})")
        return self


class SpaceToDepth(LayerBase):
    """Each block x block neighbourhood of a [C, H, W] map stacked into channels, [block^2 C, H / block,
    W / block], after zero-padding H and W at the bottom and right to multiples of block (Swin's
    SwinPatchMerging gather of 2 x 2 patches; nn.PixelUnshuffle's channel order)."""

    type: Literal["spacetodepth"]
    block: int = Field(2, gt=0)
    """Side of the merged neighbourhood."""


class ZeroPad2d(LayerBase):
    """`nn.ZeroPad2d`: a [C, H, W] map zero-padded by (left, right, top, bottom) positions (an
    asymmetric pad, F.pad(x, (0, 1, 0, 1)) in HGNetV2Embeddings)."""

    type: Literal["zeropad2d"]
    padding: tuple[int, int, int, int]
    """(left, right, top, bottom), as nn.ZeroPad2d takes them."""

    @field_validator("padding")
    @classmethod
    def _check_padding(cls, value: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        if min(value) < 0:
            raise ValueError(f"padding ({list(value)}) must be >= 0")
        return value


class PositionEmbedding(LayerBase):
    """A learned table of the sample's own shape added to it (ViT / PVT `position_embeddings`,
    Dosovitskiy et al. 2021 eq. 1): prod(shape) parameters, held as `weight`."""

    type: Literal["positionembedding"]


class ClsToken(LayerBase):
    """A learned C-vector put before the positions of a [C, L] sample: [C, L + 1] (ViT / PVT
    `cls_token`, Dosovitskiy et al. 2021 eq. 1), held as `weight`."""

    type: Literal["clstoken"]


class Select(LayerBase):
    """Position `index` of the last axis of a [C, L] sample: [C] (the class token's output,
    `sequence_output[:, 0]`); with `length`, a run of positions kept as the axis (CvT's
    torch.split(hidden_state, [1, height * width], 1))."""

    type: Literal["select"]
    index: int = 0
    """The position taken (negative counts from the end)."""
    length: int | None = Field(None, ge=0)
    """None: position `index` alone, its axis dropped ([C]); n > 0: the n positions from `index`
    ([C, n]); 0: every position from `index` on ([C, L - index])."""


class Unflatten(LayerBase):
    """`nn.Unflatten` of the last axis: a [C, L] sequence as a [C, *sizes] map, prod(sizes) = L
    (CvT's hidden_state.permute(0, 2, 1).view(batch, C, height, width))."""

    type: Literal["unflatten"]
    sizes: list[int] | None = Field(None, min_length=1)
    """The sizes the last axis becomes; None: a square map [C, s, s], s^2 = L (so a copy of the
    network on a smaller square image, verify's scale-down, keeps its meaning)."""


class Attend(LayerBase):
    """The leaf closing a `combine = "attend"` residual (Wang et al. 2021, PVT, sec. 3.3,
    spatial-reduction attention; Xie et al. 2021, SegFormer, eq. 2): queries q [C, *P] from the main
    branch, keys k = the shortcut's first C channels and values v its other C_v (C_v = C but for
    LeViT's wider values); per head h (C / heads and C_v / heads channels) out_h = softmax(q_h^T k_h /
    sqrt(C / heads) + B_h) v_h, [C_v, *P], B the `offset_bias` table's entries (its only parameters:
    the projections are the branches' own layers). Built by the walker, never written in a spec."""

    type: Literal["attend"]
    heads: int = Field(gt=0)
    """Attention heads."""
    patch: int = Field(1, gt=0)
    """`Residual.patch`: attention among the positions at one offset of patch x patch patches."""
    offset_bias: int = Field(0, ge=0)
    """`Residual.offset_bias`: the query stride of LeViT's attention-bias table; 0: no table."""
    scale: float | None = Field(None, gt=0)
    """`Residual.scale`: the scores' factor; None: 1 / sqrt(C / heads)."""
    window: int = Field(0, ge=0)
    """`Residual.window`: the keys' block side; 0: no blocks."""


class Embedding(LayerBase):
    """`nn.Embedding`: the network input is then token ids, output appends embedding_dim."""

    type: Literal["embedding"]
    num_embeddings: int = Field(gt=0)
    """Rows of the table (vocabulary size)."""
    embedding_dim: int = Field(gt=0)
    """Size of each vector."""


class Pool(LayerBase):
    """`nn.MaxPool1d/2d`, `nn.AvgPool1d/2d` over [C, L] or [C, H, W] samples."""

    type: Literal["maxpool1d", "maxpool2d", "avgpool1d", "avgpool2d"]
    kernel_size: IntOrTuple
    """Window size."""
    stride: IntOrTuple | None = None
    """Window stride; None: kernel_size (torch default)."""
    padding: IntOrTuple = 0
    """Implicit padding on both sides (at most half the kernel, as torch requires)."""
    ceil_mode: bool = False
    """Round the output size up instead of down (torch rule: last window starts inside)."""

    @model_validator(mode="after")
    def _check(self) -> "Pool":
        _positive(self.kernel_size, "kernel_size")
        if self.stride is not None:
            _positive(self.stride, "stride")
        _positive(self.padding, "padding", minimum=0)
        return self

    @property
    def spatial_dims(self) -> int:
        """1 or 2."""
        return int(self.type[-2])

    @property
    def op(self) -> Literal["max", "avg"]:
        """Max or average."""
        return "max" if self.type.startswith("max") else "avg"


class AdaptiveAvgPool(LayerBase):
    """`nn.AdaptiveAvgPool1d/2d`: fixed output size, windows [floor(i*L/o), ceil((i+1)*L/o))."""

    type: Literal["adaptiveavgpool1d", "adaptiveavgpool2d"]
    output_size: IntOrTuple
    """Output length, or (height, width)."""

    @model_validator(mode="after")
    def _check(self) -> "AdaptiveAvgPool":
        _positive(self.output_size, "output_size")
        return self

    @property
    def spatial_dims(self) -> int:
        """1 or 2."""
        return int(self.type[-2])


ActivationName = Literal["relu", "relu6", "gelu", "tanh", "sigmoid", "silu", "hardswish", "hardsigmoid"]


class Activation(LayerBase):
    """Elementwise `nn.ReLU`, `nn.ReLU6` (min(max(x, 0), 6)), `nn.GELU`, `nn.Tanh`, `nn.Sigmoid`, `nn.SiLU`,
    `nn.Hardswish` (x * relu6(x + 3) / 6, Howard et al. 2019, MobileNetV3 eq. 2), `nn.Hardsigmoid`
    (relu6(x + 3) / 6, MobileNetV3 sec. 5.2)."""

    type: ActivationName


class Softmax(LayerBase):
    """`nn.Softmax` along one sample dimension."""

    type: Literal["softmax"]
    dim: int = -1
    """Sample dimension (no batch dim: 0 is the first sample dim; negative counts from the end)."""


class Flatten(LayerBase):
    """`nn.Flatten`; dims count without the batch dim (torch's start_dim=1 is start_dim=0 here)."""

    type: Literal["flatten"]
    start_dim: int = 0
    """First sample dimension to flatten."""
    end_dim: int = -1
    """Last sample dimension to flatten."""


class Dropout(LayerBase):
    """`nn.Dropout` (elementwise; any sample shape)."""

    type: Literal["dropout"]
    p: float = Field(0.5, ge=0, lt=1)
    """Probability of zeroing an element in training."""


class Recurrent(LayerBase):
    """`nn.RNN` / `nn.LSTM` / `nn.GRU` over a [seq, features] sample (batch_first=True layout)."""

    type: Literal["rnn", "lstm", "gru"]
    hidden_size: int = Field(gt=0)
    """Hidden state size h."""
    input_size: int | None = Field(None, gt=0)
    """Features per time step; None: the input's last dimension."""
    num_layers: int = Field(1, gt=0)
    """Stacked recurrent layers."""
    bidirectional: bool = False
    """A second, time-reversed direction per layer; outputs are concatenated (2*h_out)."""
    bias: bool = True
    """Two bias vectors per layer and direction (b_ih and b_hh), as torch has."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the outputs of every layer except the last (torch's `dropout`)."""
    proj_size: int = Field(0, ge=0)
    """LSTM only: project h to proj_size (weight_hr); 0: no projection."""
    nonlinearity: Literal["tanh", "relu"] = "tanh"
    """RNN only: the cell's nonlinearity."""
    output: Literal["sequence", "last"] = "sequence"
    """'sequence': all steps [seq, D*h_out]; 'last': output[-1] of the sequence, [D*h_out]."""

    @model_validator(mode="after")
    def _check(self) -> "Recurrent":
        if self.proj_size and self.type != "lstm":
            raise ValueError(f"proj_size ({self.proj_size}) is only valid for lstm, not {self.type}")
        if self.proj_size >= self.hidden_size and self.proj_size:
            raise ValueError(
                f"proj_size ({self.proj_size}) must be smaller than hidden_size ({self.hidden_size})"
            )
        if self.nonlinearity != "tanh" and self.type != "rnn":
            raise ValueError(f"nonlinearity is only valid for rnn, not {self.type}")
        return self

    @property
    def gates(self) -> int:
        """Gate blocks G stacked in weight_ih: LSTM 4 (i, f, g, o), GRU 3 (r, z, n), RNN 1."""
        return {"lstm": 4, "gru": 3, "rnn": 1}[self.type]

    @property
    def directions(self) -> int:
        """D: 2 if bidirectional else 1."""
        return 2 if self.bidirectional else 1

    @property
    def h_out(self) -> int:
        """Size of the emitted hidden state per direction: proj_size if set, else hidden_size."""
        return self.proj_size or self.hidden_size


LeafLayer = Union[
    Linear, Conv, BatchNorm, LayerNorm, GroupNorm, GlobalResponseNorm, LayerScale, WindowAttention, SpaceToDepth, Embedding, Pool, AdaptiveAvgPool, Activation, Softmax,
    Flatten, Dropout, Recurrent, ZeroPad2d, PositionEmbedding, ClsToken, Select, Unflatten,
]
"""Layers that compute (everything but the composite blocks)."""
