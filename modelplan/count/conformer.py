"""Exact parameters, forward FLOPs and kept activation values of a Conformer block's additions
(`modelplan.specs.conformer.ConformerSpec`), keyed relative to the block:

    conformer/{ffn1, ffn1_norm, conv, block_norm, relative}

The convolution module is counted from its layer list (`specs.conformer.conv_module_layers`, the
same list an audio tower's Conformer blocks use): a pointwise conv is a linear per frame, the depthwise conv
kernel multiply-adds a channel and frame. FLOPs count matmuls and convolutions, 2 per multiply-add
(the `count.flops` convention); norms, GLU and activations are free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.encoder_inputs import layer_flops_per_row
from modelplan.count.vision import connector_params
from modelplan.specs.conformer import conv_module_layers

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.specs.conformer import ConformerSpec
    from modelplan.specs.transformer import TransformerSpec


def _layers(spec: "TransformerSpec") -> list[dict]:
    from modelplan.specs.blocks import ConnectorLayer

    m = spec.extras.conformer
    return [ConnectorLayer(**layer) for layer in conv_module_layers(m.conv, spec.hidden, spec.norm_bias)]


def _mlp(spec: "TransformerSpec") -> tuple[int, int]:
    """(inputs of the first projection, its width): gated 2, else 1; the MLP's inner width."""
    return (2 if spec.gated_mlp else 1), spec.ffn_hidden


def _norm(spec: "TransformerSpec") -> int:
    return spec.hidden * (2 if spec.norm_bias else 1) if spec.norm_affine else 0


def conformer_params(spec: "TransformerSpec", block: "Block") -> dict[str, int]:
    """One block's parameters (module docstring)."""
    m: "ConformerSpec" = spec.extras.conformer
    h, (n_in, f) = spec.hidden, _mlp(spec)
    out = {"conformer/conv": sum(connector_params(layer) for layer in _layers(spec)),
           "conformer/block_norm": _norm(spec) if m.block_norm else 0}
    if m.macaron:  # ffn1: the block's MLP again (Linear(h, f) + Linear(f, h), biases as the MLP's)
        out["conformer/ffn1"] = (n_in + 1) * h * f + ((n_in * f + h) if spec.mlp_bias else 0)
        out["conformer/ffn1_norm"] = _norm(spec)
    if m.relative == "xl":  # linear_pos Linear(h, q, bias=False); pos_bias_u, pos_bias_v (heads, head_dim)
        out["conformer/relative"] = h * spec.q_width + 2 * spec.q_width
    elif m.relative == "key":  # distance_embedding Embedding(left + right + 1, head_dim)
        out["conformer/relative"] = m.relative_rows * spec.dim_head
    return out


def conformer_flops(spec: "TransformerSpec", block: "Block", tokens: int, seq_len: int) -> dict[str, int]:
    """One block's forward FLOPs over `tokens` frames in clips of `seq_len`: ffn1 (t, h) @ (h, f) and
    back; the conv module per frame; Transformer-XL's position projection (b (2s - 1), h) @ (h, q)
    and position scores (t, d) @ (d, 2s - 1) per head (Wav2Vec2ConformerSelfAttention
    matrix_bd); the distance table's scores, an s x head_dim product per query and head
    (Wav2Vec2BertSelfAttention relative_key einsum)."""
    m: "ConformerSpec" = spec.extras.conformer
    h, (n_in, f) = spec.hidden, _mlp(spec)
    out = {"conformer/conv": tokens * sum(layer_flops_per_row(layer) for layer in _layers(spec))}
    if m.macaron:
        out["conformer/ffn1"] = 2 * tokens * (n_in + 1) * h * f
    positions = 2 * seq_len - 1
    if m.relative == "xl":
        out["conformer/relative_proj"] = 2 * (tokens // seq_len) * positions * h * spec.q_width
        out["conformer/relative_score"] = 2 * tokens * positions * spec.q_width
    elif m.relative == "key":
        out["conformer/relative_score"] = 2 * tokens * seq_len * spec.q_width
    return out


def conformer_kept_elements(spec: "TransformerSpec", block: "Block") -> int:
    """Values per frame eager autograd keeps for backward: ffn1's norm and fc1 inputs (2h) and its
    activation's input and output (n_in f + f); the conv module's pre-norm and pointwise inputs
    (2h), the GLU input (2c), the depthwise conv, its norm's and activation's inputs and the second
    pointwise input (4c); the block norm's input (h); q + u and q + v (2q) with 'xl' (the s x (2s - 1)
    position scores per head: not counted, as count/extras.py's Transformer-XL ones)."""
    m: "ConformerSpec" = spec.extras.conformer
    h, (n_in, f) = spec.hidden, _mlp(spec)
    c = m.conv.channels or h
    out = 2 * h + 6 * c + (h if m.block_norm else 0)
    if m.macaron:
        out += 2 * h + (n_in + 1) * f
    if m.relative == "xl":
        out += 2 * spec.q_width
    return out
