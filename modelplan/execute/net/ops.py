"""Forward and backward of one leaf layer, dispatched on its spec type.

`leaf_forward(node, p, x, ctx)` -> (y, Saved) and `leaf_backward(node, p, saved, dy)` ->
(dx, grads): `p` holds the leaf's parameters by torch attribute name (`weight`, `bias_ih_l0`)
in executor layout, whole or a tensor-parallel shard (the math does not care). Shapes carry the
batch first. `feature` names the tensor-parallel slice (axis, slice) of this rank's activations
so dropout cuts the same mask; `add_bias=False` leaves the bias to the caller (row-parallel adds
it once after the reduce).
"""

from __future__ import annotations

import numpy as np

from modelplan.count.network_tree import LeafNode
from modelplan.execute.layers.embedding import embedding_backward, embedding_forward
from modelplan.execute.layers.linear import linear_backward
from modelplan.execute.layers.norm import norm_backward, norm_forward
from modelplan.execute.net.batchnorm import batchnorm_backward, batchnorm_forward, update_running
from modelplan.execute.net.context_attention import (
    additive_backward, additive_forward, separable_backward, separable_forward,
)
from modelplan.execute.net.focal_modulation import focal_backward, focal_forward
from modelplan.execute.net.conv import ConvGeometry, conv2d_backward, conv2d_forward
from modelplan.execute.net.elementwise import (
    act_backward, act_forward, dropout_backward, dropout_forward, softmax_backward, softmax_forward,
)
from modelplan.execute.net.pool import (
    adaptive_avg_backward, adaptive_avg_forward, pool2d_backward, pool2d_forward,
)
from modelplan.execute.net.recurrent import recurrent_backward, recurrent_forward
from modelplan.execute.net.saved import RunContext, Saved, dropout_keep
from modelplan.execute.net.window_attention import (
    space_to_depth_backward, space_to_depth_forward, window_attention_backward, window_attention_forward,
)
from modelplan.specs.layers import (
    Activation, AdaptiveAvgPool, BatchNorm, Conv, Dropout, Embedding, Flatten, GlobalResponseNorm, GroupNorm, LayerNorm, LayerScale, Linear,
    Pool, Recurrent, Softmax, SpaceToDepth, WindowAttention, ZeroPad2d, PositionEmbedding, ClsToken, Select, Unflatten,
)
from modelplan.specs.context_attention import AdditiveAttention, SeparableAttention
from modelplan.specs.focal_modulation import FocalModulation
from modelplan.specs.network_walk import as_tuple

Params = dict[str, np.ndarray]
ACTIVATIONS = ("relu", "relu6", "gelu", "silu", "tanh", "sigmoid", "hardswish", "hardsigmoid")


def _pair(values: tuple[int, ...], fill: int) -> tuple[int, int]:
    """A 1-d setting as (fill, value): 1-d layers run as 2-d of height 1."""
    return (fill, values[0]) if len(values) == 1 else (values[0], values[1])


def conv_geometry(layer: Conv, where: str) -> ConvGeometry:
    """Kernel/stride/dilation/padding of a conv spec as 2-d pairs (torch's 'same' split)."""
    n = layer.spatial_dims
    kernel = as_tuple(layer.kernel_size, n, "kernel_size", where)
    dilation = as_tuple(layer.dilation, n, "dilation", where)
    if layer.padding == "same":  # torch: total d(k-1), the left side gets the floor half
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        lo, hi = tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
    else:
        lo = hi = (0,) * n if layer.padding == "valid" else as_tuple(layer.padding, n, "padding", where)
    return ConvGeometry(
        kernel=_pair(kernel, 1), stride=_pair(as_tuple(layer.stride, n, "stride", where), 1),
        dilation=_pair(dilation, 1), pad_lo=_pair(lo, 0), pad_hi=_pair(hi, 0), groups=layer.groups,
    )


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """(C,) -> broadcastable against (N, C, ...)."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


GRN_EPS = 1e-6  # ConvNextV2GRN: global_features.mean(dim=-1) + 1e-6


def _grn_terms(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(G, mean_c G + eps, N) of (N, C, ...): per-channel L2 norms over the positions."""
    g = np.sqrt((x * x).sum(axis=tuple(range(2, x.ndim)), keepdims=True))
    m = g.mean(axis=1, keepdims=True) + GRN_EPS
    return g, m, g / m


def grn_forward(p: Params, x: np.ndarray) -> np.ndarray:
    """gamma * (x * N) + beta + x (Woo et al. 2023, eq. 1-3)."""
    return _per_channel(p["weight"], x.ndim) * (x * _grn_terms(x)[2]) + _per_channel(p["bias"], x.ndim) + x


def grn_backward(p: Params, x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, Params]:
    """dN = sum(dy gamma x), dG = dN / m - sum_c(dN G) / (C m^2), dx = dy + dy gamma N + dG x / G."""
    g, m, n = _grn_terms(x)
    spatial, axes = tuple(range(2, x.ndim)), (0,) + tuple(range(2, x.ndim))
    du = dy * _per_channel(p["weight"], dy.ndim)
    dn = (du * x).sum(axis=spatial, keepdims=True)
    dg = dn / m - (dn * g).sum(axis=1, keepdims=True) / (x.shape[1] * m * m)
    dx = dy + du * n + dg * x / np.where(g > 0, g, 1.0)
    return dx, {"weight": (dy * x * n).sum(axis=axes), "bias": dy.sum(axis=axes)}


def _layernorm_forward(p: Params, x: np.ndarray, k: int, eps: float) -> tuple[np.ndarray, Saved]:
    """LayerNorm over the last k axes of x."""
    flat = x.reshape(*x.shape[: x.ndim - k], -1)  # (..., prod(normalized))
    width = flat.shape[-1]
    weight = p["weight"].reshape(-1) if "weight" in p else np.ones(width)
    bias = p["bias"].reshape(-1) if "bias" in p else None
    y, cache = norm_forward("layernorm", flat, weight, bias, eps)
    return y.reshape(x.shape), Saved(floats=(cache.x_hat,), extra=(cache, weight, x.shape))


def _layernorm_backward(p: Params, saved: Saved, dy: np.ndarray) -> tuple[np.ndarray, Params]:
    cache, weight, shape = saved.extra
    flat_dy = dy.reshape(cache.x_hat.shape)
    dx, dw, db = norm_backward(cache, weight, flat_dy, "bias" in p)
    grads = {"weight": dw.reshape(p["weight"].shape)} if "weight" in p else {}
    if db is not None:
        grads["bias"] = db.reshape(p["bias"].shape)
    return dx.reshape(shape), grads


def _as_2d(x: np.ndarray, n: int) -> np.ndarray:
    return x[:, :, None, :] if n == 1 else x


def _from_2d(y: np.ndarray, n: int) -> np.ndarray:
    return y[:, :, 0, :] if n == 1 else y


def _pool_args(layer: Pool, where: str):
    n = layer.spatial_dims
    kernel = as_tuple(layer.kernel_size, n, "kernel_size", where)
    stride = kernel if layer.stride is None else as_tuple(layer.stride, n, "stride", where)
    return _pair(kernel, 1), _pair(stride, 1), _pair(as_tuple(layer.padding, n, "padding", where), 0)


def _positions(layer: Select, length: int) -> int | slice:
    """The index (an int: the axis dropped) or run of positions a Select takes of `length`."""
    if layer.length is None:
        return layer.index
    start = layer.index % length
    return slice(start, start + layer.length if layer.length else length)


def leaf_forward(node: LeafNode, p: Params, x: np.ndarray, ctx: RunContext,
                 feature: tuple[int, slice] | None = None, add_bias: bool = True,
                 buffers: Params | None = None) -> tuple[np.ndarray, Saved]:
    """y and what backward needs; `buffers` (running_mean/var) are updated in place."""
    layer, info = node.layer, node.info
    if isinstance(layer, Linear):
        y = x @ p["weight"]  # (N, ..., in) @ (in, out)
        return (y + p["bias"] if add_bias and "bias" in p else y), Saved(floats=(x,))
    if isinstance(layer, Conv):
        n = layer.spatial_dims
        w = p["weight"] if n == 2 else p["weight"][:, None]  # (C/g, k, C_out) -> (C/g, 1, k, C_out)
        y, saved = conv2d_forward(_as_2d(x, n), w, p.get("bias") if add_bias else None,
                                  conv_geometry(layer, node.path))
        return _from_2d(y, n), saved
    if isinstance(layer, BatchNorm):
        y, saved, stats = batchnorm_forward(x, p.get("weight"), p.get("bias"), layer.eps)
        if buffers is not None and "running_mean" in buffers:
            buffers["running_mean"], buffers["running_var"] = update_running(
                buffers["running_mean"], buffers["running_var"], stats)
        return y, saved
    if isinstance(layer, LayerNorm) and layer.type == "layernorm2d":  # the channel axis 1, moved last
        y, saved = _layernorm_forward(p, np.moveaxis(x, 1, -1), 1, layer.eps)
        return np.moveaxis(y, -1, 1), saved
    if isinstance(layer, LayerNorm):
        return _layernorm_forward(p, x, len(layer.normalized_shape or [1]), layer.eps)
    if isinstance(layer, LayerScale):
        return x * _per_channel(p["weight"], x.ndim), Saved(floats=(x,))
    if isinstance(layer, GlobalResponseNorm):
        return grn_forward(p, x), Saved(floats=(x,))
    if isinstance(layer, GroupNorm):  # (N, G, C/G * positions) normalised, then the per-channel affine
        groups = x.reshape(x.shape[0], layer.num_groups, -1)
        inv_std = 1.0 / np.sqrt(groups.var(axis=-1, keepdims=True) + layer.eps)  # biased variance (torch)
        x_hat = ((groups - groups.mean(axis=-1, keepdims=True)) * inv_std).reshape(x.shape)
        y = x_hat * _per_channel(p["weight"], x.ndim) + _per_channel(p["bias"], x.ndim) if "weight" in p else x_hat
        return y, Saved(floats=(x_hat,), extra=inv_std)
    if isinstance(layer, Embedding):
        ids = np.asarray(x, dtype=np.int64)
        return embedding_forward(p["weight"], ids), Saved(fixed=(ids,))
    if isinstance(layer, Pool):
        n = layer.spatial_dims
        kernel, stride, pad = _pool_args(layer, node.path)
        out = _pair(info.output_shape[1:], 1)
        y, saved = pool2d_forward(layer.op, _as_2d(x, n), kernel, stride, pad, out)
        return _from_2d(y, n), saved
    if isinstance(layer, AdaptiveAvgPool):
        n = layer.spatial_dims
        y, saved = adaptive_avg_forward(_as_2d(x, n), _pair(info.output_shape[1:], 1))
        return _from_2d(y, n), saved
    if isinstance(layer, Activation):
        return act_forward(layer.type, x)
    if isinstance(layer, Softmax):
        return softmax_forward(x, layer.dim % (x.ndim - 1) + 1)
    if isinstance(layer, Dropout):
        if layer.p == 0:
            return x, Saved()
        keep = dropout_keep(ctx, node.path, info.input_shape, x.shape[0], layer.p, feature)
        return dropout_forward(x, keep, layer.p)
    if isinstance(layer, Flatten):
        rank = x.ndim - 1
        start, end = layer.start_dim % rank + 1, layer.end_dim % rank + 1
        return x.reshape(x.shape[:start] + (-1,) + x.shape[end + 1 :]), Saved(extra=x.shape)
    if isinstance(layer, Recurrent):
        return recurrent_forward(layer, p, x, ctx, node.path)
    if isinstance(layer, WindowAttention):
        return window_attention_forward(layer, p, x)
    if isinstance(layer, SpaceToDepth):
        return space_to_depth_forward(layer.block, x)
    if isinstance(layer, SeparableAttention):
        return separable_forward(layer.patch, x)
    if isinstance(layer, AdditiveAttention):
        return additive_forward(p, x)
    if isinstance(layer, FocalModulation):
        return focal_forward(layer, p, x)
    if isinstance(layer, PositionEmbedding):  # x + the table, broadcast over the batch
        return x + p["weight"], Saved()
    if isinstance(layer, ClsToken):  # the token first: (N, C, 1 + L)
        token = np.broadcast_to(p["weight"][None, :, None], (x.shape[0], x.shape[1], 1))
        return np.concatenate([token, x], axis=2), Saved()
    if isinstance(layer, Select):
        return x[..., _positions(layer, x.shape[-1])].copy(), Saved(extra=x.shape)
    if isinstance(layer, Unflatten):
        return x.reshape(x.shape[0], *info.output_shape), Saved()
    if isinstance(layer, ZeroPad2d):  # nn.ZeroPad2d (left, right, top, bottom)
        left, right, top, bottom = layer.padding
        return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right))), Saved()
    raise ValueError(f"{node.path}: no executor for layer type '{info.type}'")  # pragma: no cover


def leaf_backward(node: LeafNode, p: Params, saved: Saved, dy: np.ndarray, need_dx: bool = True
                  ) -> tuple[np.ndarray | None, Params]:
    """(dx, grads by attribute name); dx is None when `need_dx` is False and it costs work."""
    layer = node.layer
    if isinstance(layer, Linear):
        (x,) = saved.floats
        dx, dw, db = linear_backward(x, p["weight"], dy, "bias" in p)
        return dx, {"weight": dw} | ({"bias": db} if db is not None else {})
    if isinstance(layer, Conv):
        n = layer.spatial_dims
        w = p["weight"] if n == 2 else p["weight"][:, None]
        dx, dw, db = conv2d_backward(saved, w, _as_2d(dy, n), conv_geometry(layer, node.path),
                                     "bias" in p, need_dx)
        grads = {"weight": dw if n == 2 else dw[:, 0]}
        return (_from_2d(dx, n) if dx is not None else None), grads | ({"bias": db} if db is not None else {})
    if isinstance(layer, BatchNorm):
        dx, dw, db = batchnorm_backward(saved, p.get("weight"), dy)
        return dx, ({"weight": dw, "bias": db} if dw is not None else {})
    if isinstance(layer, LayerNorm) and layer.type == "layernorm2d":
        dx, grads = _layernorm_backward(p, saved, np.moveaxis(dy, 1, -1))
        return np.moveaxis(dx, -1, 1), grads
    if isinstance(layer, LayerNorm):
        return _layernorm_backward(p, saved, dy)
    if isinstance(layer, GlobalResponseNorm):
        return grn_backward(p, saved.floats[0], dy)
    if isinstance(layer, GroupNorm):  # dx = inv_std (g - mean(g) - x_hat mean(g x_hat)) per group, g = dy w
        (x_hat,), grads = saved.floats, {}
        if "weight" in p:
            axes = (0,) + tuple(range(2, dy.ndim))
            grads = {"weight": (dy * x_hat).sum(axis=axes), "bias": dy.sum(axis=axes)}
            dy = dy * _per_channel(p["weight"], dy.ndim)
        g, h = dy.reshape(dy.shape[0], layer.num_groups, -1), x_hat.reshape(dy.shape[0], layer.num_groups, -1)
        dx = saved.extra * (g - g.mean(axis=-1, keepdims=True) - h * (g * h).mean(axis=-1, keepdims=True))
        return dx.reshape(dy.shape), grads
    if isinstance(layer, LayerScale):
        (x,) = saved.floats
        axes = (0,) + tuple(range(2, dy.ndim))
        return dy * _per_channel(p["weight"], dy.ndim), {"weight": (dy * x).sum(axis=axes)}
    if isinstance(layer, Embedding):
        (ids,) = saved.fixed
        return None, {"weight": embedding_backward(p["weight"].shape[0], ids, dy)}
    if isinstance(layer, Pool):
        n = layer.spatial_dims
        kernel, stride, pad = _pool_args(layer, node.path)
        return _from_2d(pool2d_backward(layer.op, saved, _as_2d(dy, n), kernel, stride, pad), n), {}
    if isinstance(layer, AdaptiveAvgPool):
        n = layer.spatial_dims
        return _from_2d(adaptive_avg_backward(saved, _as_2d(dy, n)), n), {}
    if isinstance(layer, Activation):
        return act_backward(layer.type, saved, dy), {}
    if isinstance(layer, Softmax):
        return softmax_backward(saved, dy), {}
    if isinstance(layer, Dropout):
        return (dy if layer.p == 0 else dropout_backward(saved, dy)), {}
    if isinstance(layer, Flatten):
        return dy.reshape(saved.extra), {}
    if isinstance(layer, Recurrent):
        return recurrent_backward(layer, p, saved, dy, need_dx)
    if isinstance(layer, WindowAttention):
        return window_attention_backward(layer, p, saved, dy)
    if isinstance(layer, SpaceToDepth):
        return space_to_depth_backward(layer.block, saved, dy), {}
    if isinstance(layer, SeparableAttention):
        return separable_backward(layer.patch, saved, dy), {}
    if isinstance(layer, AdditiveAttention):
        return additive_backward(p, saved, dy)
    if isinstance(layer, FocalModulation):
        return focal_backward(layer, p, saved, dy)
    if isinstance(layer, PositionEmbedding):
        return dy, {"weight": dy.sum(axis=0)}
    if isinstance(layer, ClsToken):
        return dy[:, :, 1:], {"weight": dy[:, :, 0].sum(axis=0)}
    if isinstance(layer, Select):
        dx = np.zeros(saved.extra)
        dx[..., _positions(layer, dx.shape[-1])] = dy
        return dx, {}
    if isinstance(layer, Unflatten):
        return dy.reshape(*dy.shape[:2], -1), {}
    if isinstance(layer, ZeroPad2d):  # the gradient of the unpadded window
        left, right, top, bottom = layer.padding
        return dy[:, :, top:dy.shape[2] - bottom, left:dy.shape[3] - right], {}
    raise ValueError(f"{node.path}: no executor for layer type '{node.info.type}'")  # pragma: no cover
