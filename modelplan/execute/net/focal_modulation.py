"""FocalNet's focal modulation leaf (`specs.focal_modulation`) in numpy, forward and backward,
batched (N, 2 C + L + 1, H, W); parameters in torch's layout (module docstring there).

Forward: z_l = dwconv_l(c_{l-1}), c_l = GELU(z_l), a = sum_l c_l g_l + GELU(mean c_L) g_L (/ (L + 1)),
m = W a + b (projection_context), y = q m. Backward: dq = dy m, dm = dy q, dW = dm a^T, da = W^T dm;
dg_l = sum_channels da c_l, dc_l += da g_l; through the global term dc_L += GELU'(mean) sum(da g_L) / P;
each level dz_l = GELU'(z_l) dc_l, then the depthwise conv's backward into dc_{l-1}.
"""

from __future__ import annotations

import numpy as np

from modelplan.execute.layers.activations import activation_backward, activation_forward
from modelplan.execute.net.conv import ConvGeometry, conv2d_backward, conv2d_forward
from modelplan.execute.net.saved import Saved
from modelplan.specs.focal_modulation import FocalModulation


def _geometry(k: int, channels: int) -> ConvGeometry:
    """Depthwise k x k, padding k // 2 on both sides (nn.Conv2d(padding=kernel_size // 2))."""
    return ConvGeometry(kernel=(k, k), pad_lo=(k // 2, k // 2), pad_hi=(k // 2, k // 2), groups=channels)


def _dw(p: dict, level: int) -> np.ndarray:
    """focal_weight_<level> (C, 1, k, k) in the conv executor's (1, k, k, C) layout."""
    return np.moveaxis(p[f"focal_weight_{level}"], 0, -1)


def focal_forward(layer: FocalModulation, p: dict, x: np.ndarray) -> tuple[np.ndarray, Saved]:
    """q * projection_context(aggregate); keeps the input, each z_l and the aggregate."""
    c, levels = (x.shape[1] - layer.focal_level - 1) // 2, layer.focal_level
    q, ctx, gates = x[:, :c], x[:, c:2 * c], x[:, 2 * c:]
    z, agg = [], np.zeros_like(q)  # the pre-GELU conv outputs z_0 .. z_{L-1}
    for level, k in enumerate(layer.kernels()):
        zl, _ = conv2d_forward(ctx, _dw(p, level), None, _geometry(k, c))
        z.append(zl)
        ctx = activation_forward("gelu", zl)
        agg = agg + ctx * gates[:, level:level + 1]
    agg = agg + activation_forward("gelu", ctx.mean(axis=(2, 3), keepdims=True)) * gates[:, levels:]
    if layer.normalize_modulator:
        agg = agg / (levels + 1)
    m = np.einsum("oc,nchw->nohw", p["context_weight"][:, :, 0, 0], agg) + p["context_bias"][None, :, None, None]
    return q * m, Saved(floats=(x, *z, agg))


def focal_backward(layer: FocalModulation, p: dict, saved: Saved, dy: np.ndarray) -> tuple[np.ndarray, dict]:
    """(dx, grads) of the forward above (module docstring)."""
    x, *z, agg = saved.floats
    c, levels = (x.shape[1] - layer.focal_level - 1) // 2, layer.focal_level
    q, c0, gates = x[:, :c], x[:, c:2 * c], x[:, 2 * c:]
    w = p["context_weight"][:, :, 0, 0]
    m = np.einsum("oc,nchw->nohw", w, agg) + p["context_bias"][None, :, None, None]
    dm = dy * q
    grads = {"context_weight": np.einsum("nohw,nchw->oc", dm, agg)[:, :, None, None], "context_bias": dm.sum(axis=(0, 2, 3))}
    da = np.einsum("oc,nohw->nchw", w, dm)  # (C, C).T @ (N, C, H, W)
    if layer.normalize_modulator:
        da = da / (levels + 1)
    ctxs = [c0] + [activation_forward("gelu", zl) for zl in z]
    mean = ctxs[-1].mean(axis=(2, 3), keepdims=True)
    dgates = np.zeros_like(gates)
    dgates[:, levels:] = (da * activation_forward("gelu", mean)).sum(axis=1, keepdims=True)
    dmean = activation_backward("gelu", mean, (da * gates[:, levels:]).sum(axis=(2, 3), keepdims=True))
    dctx = np.broadcast_to(dmean / (x.shape[2] * x.shape[3]), q.shape).copy()
    for level in reversed(range(levels)):
        dctx = dctx + da * gates[:, level:level + 1]
        dgates[:, level:level + 1] = (da * ctxs[level + 1]).sum(axis=1, keepdims=True)
        dz = activation_backward("gelu", z[level], dctx)
        k = layer.kernels()[level]
        dctx, dw, _ = conv2d_backward(Saved(floats=(ctxs[level],)), _dw(p, level), dz, _geometry(k, c), False)
        grads[f"focal_weight_{level}"] = np.moveaxis(dw, -1, 0)
    return np.concatenate([dy * m, dctx, dgates], axis=1), grads
