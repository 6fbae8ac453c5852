"""Generic network spec for MLPs, CNNs and RNNs: an input shape and a list of layer specs.

A spec is a tree of `torch.nn`-like layers (see `modelplan.specs.layers`); its shapes are
inferred and checked on construction, so an invalid stack never exists as a spec. Example:

    kind = "network"
    input_shape = [2]
    layers = [
      {type = "linear", out_features = 3}, {type = "tanh"},
      {type = "linear", out_features = 2}, {type = "tanh"},
      {type = "linear", out_features = 1},
    ]
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from modelplan.specs.base import Spec
from modelplan.specs.layers import (  # noqa: F401 - re-exported for users of the spec
    Activation,
    AdaptiveAvgPool,
    BatchNorm,
    Conv,
    Dropout,
    Embedding,
    Flatten,
    Layer,
    LayerNorm,
    LeafLayer,
    Linear,
    Pool,
    Recurrent,
    Repeat,
    Residual,
    Sequential,
    Softmax,
)


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
