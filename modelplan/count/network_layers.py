"""Per-leaf formulas of a network: parameter tensors, forward FLOPs, what backward keeps.

All numbers are per sample, exact ints. Conventions (modelplan's, stated once here):

FLOPs (forward, a multiply-add = 2 FLOPs):
- matmul FLOPs = 2 * MACs of Linear, Conv, RNN matmuls (what torch.utils.flop_counter counts:
  bias adds excluded). Linear: 2*in*out per row; Conv: 2*(C_in/groups)*prod(k) per output
  element; RNN per step, layer, direction: 2*G*h*(in_l + h_out) (+ 2*h*proj for LSTM proj).
- other FLOPs, 1 per element per elementwise op: bias add 1 per output element (RNN: 2*G*h
  per step for b_ih and b_hh); relu/relu6/gelu/tanh/sigmoid/silu/hardswish/hardsigmoid 1; layer scale 1; residual
  gate product and difference 1 per output element; softmax 5 (max, subtract,
  exp, sum, divide); dropout 1 (mask multiply) when p > 0; residual add 1; batchnorm/layernorm
  5 (mean, subtract, square+sum for variance, scale by 1/std) + 1 per affine weight and bias
  (groupnorm as batchnorm); global response norm 6 (square and sum for the L2 norm, x * N,
  * gamma, + beta, + x; the per-channel norms and their mean are not counted);
  max/avg pool prod(kernel) per output element; adaptive avg pool: window size per output
  element; flatten/embedding/space-to-depth/zero-pad/concat/class token/select 0 (views, gathers, padded or
  stacked copies); a position table's add 1; window attention:
  `count.window_attention`; separable / additive attention: `count.context_attention`; focal modulation: `count.focal_modulation`; a residual's attention combine: `count.cross_attention`. RNN cell math per hidden unit per step:
  LSTM 13 (4 adds of the two products, 3 sigmoid, 2 tanh, 3 for c_t = f*c + i*g, 1 for
  h_t = o*tanh(c_t)), GRU 10 (3 adds, 2 sigmoid, r*(W_hn h + b_hn), tanh, 3 for
  h_t = n + z*(h - n)), RNN 2 (add, nonlinearity).

Activation memory kept for backward, per sample: float tensors (counted in the compute dtype)
plus fixed-width bytes. Each layer counts what its own backward needs:
- Linear, Conv, LayerScale, global response norm: the input. LayerNorm, GroupNorm: the input (Korthikanti et al. 2022, sec. 4.1).
  Gate product (residual `mul`): both factors. ReLU6: a 1-byte mask like ReLU.
  BatchNorm: the input and the normalised output. gelu/silu/hardswish/hardsigmoid: the input; tanh, sigmoid,
  softmax: the output. ReLU: a 1-byte mask per element. Dropout (p > 0): a 1-byte mask.
- MaxPool: int64 argmax indices per output element (8 bytes, torch's max_pool*_with_indices).
  AvgPool, adaptive avg pool, flatten, add, zero-pad, concat, position table, class token, select: nothing. Embedding: its int64 token ids.
- RNN/LSTM/GRU (backpropagation through time): layer 0's input sequence; per layer,
  direction and time step the emitted h_t (h_out) and the cell state backward needs:
  LSTM 4h gates + h for c_t (+ h for o*tanh(c_t) with a projection), GRU 3h gates + h for
  W_hn h + b_hn, RNN nothing more; between layers with dropout > 0, the dropped copy and a
  1-byte mask. The stored outputs of layer l are the input of layer l+1.
A tensor read by two layers (a Linear after an LSTM) is counted by both: an upper bound.
"""

from __future__ import annotations

import math

from modelplan.specs.layers import (
    Activation,
    AdaptiveAvgPool,
    BatchNorm,
    Conv,
    Dropout,
    Embedding,
    GlobalResponseNorm,
    GroupNorm,
    LayerNorm,
    LayerScale,
    Linear,
    Pool,
    Recurrent,
    Softmax,
    WindowAttention,
    ClsToken,
    PositionEmbedding,
)
from modelplan.count import context_attention, cross_attention, focal_modulation, window_attention
from modelplan.specs.focal_modulation import FocalModulation
from modelplan.specs.context_attention import AdditiveAttention, SeparableAttention
from modelplan.specs.layers import Attend
from modelplan.specs.network_walk import Leaf, as_tuple

INDEX_BYTES = 8  # torch.int64 indices (argmax, token ids)
MASK_BYTES = 1  # torch.bool masks

GRN_FLOPS = 6  # per element of a global response norm (see module docstring)
# Elementwise FLOPs per hidden unit per time step of the cell math (see module docstring).
CELL_FLOPS = {"lstm": 13, "gru": 10, "rnn": 2}
# Float elements per hidden unit per step that BPTT keeps beyond h_t (see module docstring).
CELL_SAVED = {"lstm": 5, "gru": 4, "rnn": 0}


def recurrent_param_shapes(layer: Recurrent, input_size: int) -> dict[str, tuple[int, ...]]:
    """torch.nn.RNNBase `_flat_weights_names` order and shapes (PyTorch nn.LSTM docs)."""
    shapes: dict[str, tuple[int, ...]] = {}
    g_h = layer.gates * layer.hidden_size
    for k in range(layer.num_layers):
        in_l = input_size if k == 0 else layer.directions * layer.h_out
        for suffix in ("", "_reverse")[: layer.directions]:
            shapes[f"weight_ih_l{k}{suffix}"] = (g_h, in_l)
            shapes[f"weight_hh_l{k}{suffix}"] = (g_h, layer.h_out)
            if layer.bias:
                shapes[f"bias_ih_l{k}{suffix}"] = (g_h,)
                shapes[f"bias_hh_l{k}{suffix}"] = (g_h,)
            if layer.proj_size:
                shapes[f"weight_hr_l{k}{suffix}"] = (layer.proj_size, layer.hidden_size)
    return shapes


def param_shapes(leaf: Leaf) -> dict[str, tuple[int, ...]]:
    """Parameter tensors of a leaf by torch attribute name, in torch layout (weight is (out, in))."""
    layer, shape = leaf.layer, leaf.input_shape
    if isinstance(layer, Linear):
        out = {"weight": (layer.out_features, shape[-1])}
        return out | ({"bias": (layer.out_features,)} if layer.bias else {})
    if isinstance(layer, Conv):
        kernel = as_tuple(layer.kernel_size, layer.spatial_dims, "kernel_size", leaf.path)
        out = {"weight": (layer.out_channels, shape[0] // layer.groups, *kernel)}
        return out | ({"bias": (layer.out_channels,)} if layer.bias else {})
    if isinstance(layer, (BatchNorm, GroupNorm)):
        return {"weight": (shape[0],), "bias": (shape[0],)} if layer.affine else {}
    if isinstance(layer, GlobalResponseNorm):
        return {"weight": (shape[0],), "bias": (shape[0],)}
    if isinstance(layer, LayerNorm):
        if not layer.elementwise_affine:
            return {}
        normalized = (shape[0],) if layer.type == "layernorm2d" else tuple(layer.normalized_shape or shape[-1:])
        return {"weight": normalized} | ({"bias": normalized} if layer.bias else {})
    if isinstance(layer, Embedding):
        return {"weight": (layer.num_embeddings, layer.embedding_dim)}
    if isinstance(layer, (LayerScale, ClsToken)):
        return {"weight": (shape[0],)}
    if isinstance(layer, PositionEmbedding):
        return {"weight": tuple(shape)}
    if isinstance(layer, WindowAttention):
        return window_attention.param_shapes(layer, shape[0])
    if isinstance(layer, Attend):
        return cross_attention.param_shapes(layer, shape, leaf.output_shape)
    if isinstance(layer, (SeparableAttention, AdditiveAttention)):
        return context_attention.param_shapes(layer, leaf.output_shape)
    if isinstance(layer, FocalModulation):
        return focal_modulation.param_shapes(layer, leaf.output_shape)
    if isinstance(layer, Recurrent):
        return recurrent_param_shapes(layer, shape[-1])
    return {}


def buffer_count(leaf: Leaf) -> int:
    """Non-parameter state: BatchNorm running_mean, running_var (C each) and num_batches_tracked."""
    if isinstance(leaf.layer, BatchNorm) and leaf.layer.track_running_stats:
        return 2 * leaf.input_shape[0] + 1
    return 0


def _adaptive_window_sum(size: int, out: int) -> int:
    """Sum of window lengths of adaptive pooling: [floor(i*L/o), ceil((i+1)*L/o)) (ATen)."""
    return sum(-(-((i + 1) * size) // out) - (i * size) // out for i in range(out))


def _recurrent_flops(layer: Recurrent, shape: tuple[int, ...]) -> tuple[int, int]:
    seq, h = shape[0], layer.hidden_size
    g_h = layer.gates * h
    matmul = other = 0
    for k in range(layer.num_layers):
        in_l = shape[1] if k == 0 else layer.directions * layer.h_out
        per_step = 2 * g_h * (in_l + layer.h_out)  # x W_ih^T and h W_hh^T (PyTorch nn.LSTM docs)
        per_step += 2 * h * layer.proj_size  # h_t = W_hr (o * tanh(c_t))
        matmul += seq * layer.directions * per_step
        cell = CELL_FLOPS[layer.type] * h + (2 * g_h if layer.bias else 0)
        other += seq * layer.directions * cell
    if layer.dropout:
        other += (layer.num_layers - 1) * seq * layer.directions * layer.h_out
    return matmul, other


def forward_flops(leaf: Leaf) -> tuple[int, int]:
    """(matmul FLOPs, other FLOPs) of one sample's forward, by the module docstring's rules."""
    layer, n_in, n_out = leaf.layer, math.prod(leaf.input_shape), math.prod(leaf.output_shape)
    if leaf.type in ("add", "mul", "sub"):
        return 0, n_out
    if isinstance(layer, Attend):
        return cross_attention.forward_flops(layer, leaf.input_shape, leaf.output_shape)
    if isinstance(layer, (SeparableAttention, AdditiveAttention)):
        return context_attention.forward_flops(layer, leaf.output_shape)
    if isinstance(layer, FocalModulation):
        return focal_modulation.forward_flops(layer, leaf.output_shape)
    if isinstance(layer, Linear):
        rows = n_in // leaf.input_shape[-1]
        matmul = 2 * rows * leaf.input_shape[-1] * layer.out_features  # 2 * MACs
        return matmul, n_out if layer.bias else 0
    if isinstance(layer, Conv):
        kernel = as_tuple(layer.kernel_size, layer.spatial_dims, "kernel_size", leaf.path)
        per_out = (leaf.input_shape[0] // layer.groups) * math.prod(kernel)
        return 2 * n_out * per_out, n_out if layer.bias else 0  # 2 * MACs
    if isinstance(layer, Recurrent):
        return _recurrent_flops(layer, leaf.input_shape)
    if isinstance(layer, WindowAttention):
        return window_attention.forward_flops(layer, leaf.input_shape)
    if isinstance(layer, (BatchNorm, GroupNorm)):
        return 0, (5 + (2 if layer.affine else 0)) * n_in
    if isinstance(layer, LayerNorm):
        affine = (1 + int(layer.bias)) if layer.elementwise_affine else 0
        return 0, (5 + affine) * n_in
    if isinstance(layer, Pool):
        kernel = as_tuple(layer.kernel_size, layer.spatial_dims, "kernel_size", leaf.path)
        return 0, n_out * math.prod(kernel)
    if isinstance(layer, AdaptiveAvgPool):
        windows = [
            _adaptive_window_sum(size, out)
            for size, out in zip(leaf.input_shape[1:], leaf.output_shape[1:])
        ]
        return 0, leaf.input_shape[0] * math.prod(windows)
    if isinstance(layer, Softmax):
        return 0, 5 * n_in
    if isinstance(layer, (Activation, LayerScale, PositionEmbedding)):
        return 0, n_in
    if isinstance(layer, GlobalResponseNorm):  # square, sum; x * N, * gamma, + beta, + x
        return 0, GRN_FLOPS * n_in
    if isinstance(layer, Dropout):
        return 0, n_in if layer.p > 0 else 0
    return 0, 0  # flatten, embedding


def _recurrent_saved(layer: Recurrent, shape: tuple[int, ...]) -> tuple[int, int]:
    seq, h, d = shape[0], layer.hidden_size, layer.directions
    per_step = layer.h_out + CELL_SAVED[layer.type] * h + (h if layer.proj_size else 0)
    floats = seq * shape[1] + layer.num_layers * seq * d * per_step
    fixed = 0
    if layer.dropout:
        between = (layer.num_layers - 1) * seq * d * layer.h_out
        floats += between
        fixed += between * MASK_BYTES
    return floats, fixed


def saved_for_backward(leaf: Leaf) -> tuple[int, int]:
    """(float elements, fixed-width bytes) kept for backward, by the module docstring's rules."""
    layer, n_in, n_out = leaf.layer, math.prod(leaf.input_shape), math.prod(leaf.output_shape)
    if isinstance(layer, (Linear, Conv, LayerNorm, GroupNorm, GlobalResponseNorm, LayerScale)):
        return n_in, 0
    if leaf.type == "mul":  # both factors: the gate (input_shape) and the gated tensor (output_shape)
        return n_in + n_out, 0
    if isinstance(layer, BatchNorm):
        return 2 * n_in, 0
    if isinstance(layer, Recurrent):
        return _recurrent_saved(layer, leaf.input_shape)
    if isinstance(layer, WindowAttention):
        return window_attention.saved_elements(layer, leaf.input_shape), 0
    if isinstance(layer, Attend):
        return cross_attention.saved_elements(layer, leaf.input_shape, leaf.output_shape), 0
    if isinstance(layer, (SeparableAttention, AdditiveAttention)):
        return context_attention.saved_elements(layer, leaf.input_shape, leaf.output_shape), 0
    if isinstance(layer, FocalModulation):
        return focal_modulation.saved_elements(layer, leaf.input_shape, leaf.output_shape), 0
    if isinstance(layer, Embedding):
        return 0, INDEX_BYTES * n_in
    if isinstance(layer, Pool):
        return 0, (INDEX_BYTES * n_out if layer.op == "max" else 0)
    if isinstance(layer, Softmax):
        return n_out, 0
    if isinstance(layer, Activation):
        return (0, MASK_BYTES * n_in) if layer.type in ("relu", "relu6") else (n_in, 0)
    if isinstance(layer, Dropout):
        return 0, (MASK_BYTES * n_in if layer.p > 0 else 0)
    return 0, 0  # add, flatten, adaptive avg pool
