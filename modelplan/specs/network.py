"""Generic network spec for MLPs, CNNs and RNNs: an input shape and a tree of layer specs.

Leaf layers live in `modelplan.specs.layers`; this module adds the composite blocks
(`sequential`, `repeat`, `residual`), the `Layer` union and `NetworkSpec`. Shapes are inferred
and checked on construction (`modelplan.specs.network_walk`), so an invalid stack never exists
as a spec. Example (the 2-3-2-1 MLP preset):

    kind = "network"
    input_shape = [2]
    layers = [
      {type = "linear", out_features = 3}, {type = "sigmoid"},
      {type = "linear", out_features = 2}, {type = "sigmoid"},
      {type = "linear", out_features = 1},
    ]
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from modelplan.specs.base import Spec
from modelplan.specs.layers import (
    Activation,
    Attend,
    ActivationName,
    AdaptiveAvgPool,
    BatchNorm,
    Conv,
    Dropout,
    Embedding,
    Flatten,
    GlobalResponseNorm,
    GroupNorm,
    LayerBase,
    LayerNorm,
    LayerScale,
    LeafLayer,
    Linear,
    Pool,
    Recurrent,
    Softmax,
    SpaceToDepth,
    WindowAttention,
    ZeroPad2d,
    PositionEmbedding,
    ClsToken,
    Select,
    Unflatten,
)
from modelplan.specs.context_attention import AdditiveAttention, SeparableAttention
from modelplan.specs.focal_modulation import FocalModulation

__all__ = [
    "Activation", "Attend", "AdaptiveAvgPool", "BatchNorm", "Conv", "Dropout", "Embedding", "Flatten", "GlobalResponseNorm", "GroupNorm",
    "Layer", "LayerNorm", "LayerScale", "LeafLayer", "Linear", "NetworkSpec", "Pool", "Recurrent", "Repeat",
    "Residual", "Sequential", "Softmax", "SpaceToDepth", "WindowAttention", "ZeroPad2d",
    "PositionEmbedding", "ClsToken", "Select", "SeparableAttention", "AdditiveAttention", "Unflatten", "FocalModulation",
]


class Sequential(LayerBase):
    """`nn.Sequential`: a named group of layers (children named by name or position)."""

    type: Literal["sequential"]
    layers: list["Layer"] = Field(min_length=1)
    """Layers in order."""


class Repeat(LayerBase):
    """`layers` repeated `times` times (identical copies, separate parameters).

    Unnamed, the copies are spliced into the parent list, each item taking the next position
    (torch's `nn.Sequential(*[block() for _ in range(n)])`). Named, it is an `nn.Sequential` of
    the copies, copy i at `<name>/i`; a one-item sub-list's copy is that item itself, a longer
    one is an `nn.Sequential` of its items.
    """

    type: Literal["repeat"]
    times: int = Field(gt=0)
    """Number of copies."""
    layers: list["Layer"] = Field(min_length=1)
    """The repeated sub-list."""


class Residual(LayerBase):
    """main(x) + shortcut(x), then an optional activation (ResNet BasicBlock / Bottleneck);
    with `combine = "mul"`, main(x) * shortcut(x), main's output broadcast over the shortcut's
    size-1 axes: a squeeze-and-excitation gate (Hu et al. 2018, eq. 4: x scaled per channel); with
    `combine = "sub"`, main(x) - shortcut(x); with `combine = "attend"`, multi-head attention of
    main's output (queries [C, ...]) over the shortcut's (stacked keys and values [2 C, ...], on
    their own, e.g. spatially reduced, grid; LeViT's values may be wider than its keys: `Attend`); with `combine = "concat"`, the shortcut's
    output and main's stacked along the channels (torch.cat([shortcut(x), main(x)], dim=1): DenseNet /
    HGNetV2 aggregation; nested, [x, f1(x), f2(f1(x)), ...]).

    Main items are children of the block (by name or position); unnamed shortcut items sit
    at `shortcut/<i>`; an empty shortcut is the identity. The sum is the leaf `<block>/add`
    (the product `<block>/mul`, the difference `<block>/sub`), the activation `<block>/act`.
    """

    type: Literal["residual"]
    main: list["Layer"] = Field(min_length=1)
    """The main branch."""
    shortcut: list["Layer"] = Field(default_factory=list)
    """The shortcut branch (torchvision's `downsample`); empty: identity."""
    activation: ActivationName | None = None
    """Activation applied after the sum (ResNet: relu)."""
    combine: Literal["add", "mul", "sub", "attend", "concat"] = "add"
    """How the branches meet: their sum, main's output (a per-channel gate) times the shortcut's,
    main's minus the shortcut's (PoolFormer's pool(x) - x), or main's queries attending the
    shortcut's keys and values (`Attend`), or the two stacked along the channels, shortcut first."""
    heads: int | None = Field(None, gt=0)
    """combine = "attend": attention heads (they divide the query channels); unset otherwise."""
    patch: int = Field(1, gt=0)
    """combine = "attend": each position attends only the positions at its own offset within the
    map's patch x patch patches (MobileViT's unfolded patches, Mehta & Rastegari 2022, sec. 3.1);
    1: the whole map."""
    window: int = Field(0, ge=0)
    """combine = "attend": attention within window x window blocks of the keys' grid, each query in the
    block at the same place of its own grid cut into as many blocks (Hiera's mask units with pooled
    queries, Ryali et al. 2023 sec. 3); 0: no blocks."""
    scale: float | None = Field(None, gt=0)
    """combine = "attend": the scores' factor in place of 1 / sqrt(C / heads) (CvT's embed_dim ** -0.5,
    transformers modeling_cvt.py CvtSelfAttention); None: 1 / sqrt(C / heads)."""
    axis: int = 0
    """combine = "concat": the sample axis the branches are stacked along (0: the channels; -1: the
    positions of a [C, L] sequence, CvT's torch.cat((cls_token, query), dim=1))."""
    offset_bias: int = Field(0, ge=0)
    """combine = "attend": LeViT's learned attention biases (Graham et al. 2021, sec. 4.2), one per
    head and distinct (|row offset|, |column offset|) between a query at stride `offset_bias` of
    the keys' grid and a key, added to the scores; 0: none."""

    @model_validator(mode="after")
    def _check_heads(self) -> "Residual":
        if (self.combine == "attend") != (self.heads is not None):
            raise ValueError(f"heads ({self.heads}) is set exactly when combine is 'attend' (got '{self.combine}')")
        if (self.patch > 1 or self.offset_bias) and self.combine != "attend":
            raise ValueError(f"patch ({self.patch}) and offset_bias ({self.offset_bias}) need combine 'attend' "
                             f"(got '{self.combine}')")
        if self.window and (self.combine != "attend" or self.patch > 1 or self.offset_bias):
            raise ValueError(f"window ({self.window}) needs combine 'attend' without patch or offset_bias")
        if self.scale is not None and self.combine != "attend":
            raise ValueError(f"scale ({self.scale}) needs combine 'attend' (got '{self.combine}')")
        if self.axis and self.combine != "concat":
            raise ValueError(f"axis ({self.axis}) needs combine 'concat' (got '{self.combine}')")
        if self.patch > 1 and self.offset_bias:
            raise ValueError(f"patch ({self.patch}) and offset_bias ({self.offset_bias}) cannot be combined")
        return self


Layer = Annotated[
    Union[
        Linear,
        Conv,
        BatchNorm,
        LayerNorm,
        GroupNorm,
        GlobalResponseNorm,
        LayerScale,
        WindowAttention,
        SpaceToDepth,
        ZeroPad2d,
        PositionEmbedding,
        ClsToken,
        Select,
        Unflatten,
        SeparableAttention,
        AdditiveAttention,
        FocalModulation,
        Embedding,
        Pool,
        AdaptiveAvgPool,
        Activation,
        Softmax,
        Flatten,
        Dropout,
        Recurrent,
        Sequential,
        Repeat,
        Residual,
    ],
    Field(discriminator="type"),
]
"""Any layer spec, chosen by its `type`."""

for _cls in (Sequential, Repeat, Residual):
    _cls.model_rebuild()


class NetworkSpec(Spec):
    """A feed-forward tree of layers applied to one input tensor per sample."""

    kind: Literal["network"] = "network"
    """Spec discriminator."""
    name: str = "network"
    """Display name."""
    source: str = ""
    """Where the architecture comes from."""
    input_shape: list[int] = Field(min_length=1)
    """Shape of one sample, without the batch dimension: [3, 224, 224], [seq, features], or
    [seq] token ids when the first layer is an embedding."""
    layers: list[Layer] = Field(min_length=1)
    """Layers in order (torch `nn.Sequential` naming: a layer's name, else its position)."""

    @field_validator("input_shape")
    @classmethod
    def _check_input(cls, value: list[int]) -> list[int]:
        if any(d < 1 for d in value):
            raise ValueError(f"input_shape ({value}) must be positive sizes")
        return value

    @model_validator(mode="after")
    def _check_shapes(self) -> "NetworkSpec":
        from modelplan.specs.network_walk import walk

        walk(self.layers, tuple(self.input_shape))  # raises a one-line SpecError on a mismatch
        return self

    @property
    def tokens_input(self) -> bool:
        """Whether the input is token ids (the first leaf is an embedding)."""
        from modelplan.specs.network_walk import walk

        return walk(self.layers, tuple(self.input_shape))[0].type == "embedding"
