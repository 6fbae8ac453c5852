"""Conformer blocks (Gulati et al. 2020, arXiv 2005.08100, fig. 1) as additions to the block stack's
pre-LN block (`ExtrasSpec.conformer`): the block's own attention (with its norm) and MLP (with its
norm, the second half-step feed-forward) stay the stack's; this adds

- the macaron first feed-forward: a norm and a second MLP of the block's widths before attention,
  its output halved into the residual (ffn1 / feed_forward1);
- the convolution module (`ConvModuleSpec`, also a layer list for audio towers: `conv_module_layers`):
  a pre-norm, pointwise Conv1d(h, 2c) (or Linear), GLU, depthwise Conv1d(c, c, kernel, groups c),
  a BatchNorm1d / LayerNorm over c, activation, pointwise Conv1d(c, h);
- a norm at the end of every block (final_layer_norm / norm_out);
- relative positions: Transformer-XL's (Dai et al. 2019 sec. 3.3: linear_pos / relative_k_proj
  Linear(h, q, bias=False) over 2T - 1 sinusoidal positions and the u / v biases, (heads, head_dim)
  each) or a learned distance table of head_dim rows per block ('key': Wav2Vec2-BERT
  distance_embedding, left + right + 1 rows).

transformers 5.24 modeling_wav2vec2_conformer.py (Wav2Vec2ConformerEncoderLayer,
Wav2Vec2ConformerConvolutionModule, Wav2Vec2ConformerSelfAttention), modeling_wav2vec2_bert.py,
modeling_parakeet.py (ParakeetEncoderBlock), modeling_lasr.py (LasrEncoderBlock).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.specs.base import Spec


class ConvModuleSpec(Spec):
    """The Conformer convolution module (module docstring)."""

    kernel: int = Field(gt=0)
    """Depthwise kernel (HF conv_depthwise_kernel_size / conv_kernel_size)."""
    channels: int | None = Field(None, gt=0)
    """c, the GLU's output width; None: the block's hidden width."""
    pointwise_bias: bool = False
    """Biases on both pointwise convs (Parakeet convolution_bias)."""
    depthwise_bias: bool = False
    """Bias on the depthwise conv."""
    norm: Literal["batch", "layer"] = "batch"
    """After the depthwise conv: BatchNorm1d(c) (weight, bias; running statistics are buffers) or
    Wav2Vec2-BERT's depthwise_layer_norm LayerNorm(c)."""
    pre_norm: bool = True
    """A norm of the block's kind over h before the first pointwise conv."""


class ConformerSpec(Spec):
    """What a Conformer block adds to the stack's pre-LN block (module docstring)."""

    conv: ConvModuleSpec
    """The convolution module."""
    macaron: bool = True
    """A first half-step feed-forward (and its norm) before the attention."""
    block_norm: bool = True
    """A norm after the second feed-forward's residual in every block."""
    relative: Literal["none", "xl", "key"] = "none"
    """Relative positions of the attention (module docstring); 'none' for rotary or none."""
    relative_rows: int = Field(0, ge=0)
    """'key': rows of each block's distance table (left + right + 1)."""


def conv_module_layers(conv: ConvModuleSpec, h: int, norm_bias: bool = True, prefix: str = "conv",
                       copies: int = 1) -> list[dict]:
    """The convolution module as ConnectorLayer dicts, one row a frame: the pre-norm, pointwise
    (h -> 2c), depthwise (c channels of `kernel` taps, written as groups-c Conv2d of kernel-wide
    input: the same weights and multiply-adds), the post-depthwise norm, pointwise (c -> h)."""
    c = conv.channels or h
    norm = dict(kind="layernorm", bias=norm_bias)
    layers = [dict(name=f"{prefix}/norm", in_features=h, **norm, copies=copies)] if conv.pre_norm else []
    return layers + [
        dict(name=f"{prefix}/pointwise1", kind="linear", in_features=h, out_features=2 * c, bias=conv.pointwise_bias,
             copies=copies),
        dict(name=f"{prefix}/depthwise", kind="conv", in_features=c * conv.kernel, out_features=c, groups=c,
             bias=conv.depthwise_bias, copies=copies),
        # BatchNorm1d(c) / LayerNorm(c): weight and bias
        dict(name=f"{prefix}/depthwise_norm", kind="layernorm", in_features=c, bias=True, copies=copies),
        dict(name=f"{prefix}/pointwise2", kind="linear", in_features=c, out_features=h, bias=conv.pointwise_bias,
             copies=copies),
    ]
