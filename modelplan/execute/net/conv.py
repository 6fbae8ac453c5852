"""Convolution (`nn.Conv1d` / `nn.Conv2d`) as one matmul over im2col columns.

A 1-d convolution runs as a 2-d one of height 1. The weight is stored (C_in/groups, kh, kw,
C_out) so that, flattened, it is the (in, out) matrix of `cols @ w`; output channels of group g
are the g-th block of C_out (torch's grouping). torch cross-correlates (no kernel flip), and so
does this: y[n, o, i, j] = sum_{c, a, b} x_pad[n, c, i*s_h + a*d_h, j*s_w + b*d_w] w[c, a, b, o].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelplan.execute.net.saved import Saved

Pair = tuple[int, int]


@dataclass(frozen=True)
class ConvGeometry:
    """Kernel, stride, dilation, padding per spatial axis (height, width) and the group count."""

    kernel: Pair
    stride: Pair = (1, 1)
    dilation: Pair = (1, 1)
    pad_lo: Pair = (0, 0)
    """Zeros before each axis."""
    pad_hi: Pair = (0, 0)
    """Zeros after each axis ('same' with an even kernel pads one more here, as torch does)."""
    groups: int = 1

    def out_size(self, h: int, w: int) -> Pair:
        """floor((L + pads - d(k-1) - 1)/s) + 1 per axis (torch.nn.Conv2d shape formula)."""
        return tuple(
            (size + lo + hi - d * (k - 1) - 1) // s + 1
            for size, lo, hi, d, k, s in zip(
                (h, w), self.pad_lo, self.pad_hi, self.dilation, self.kernel, self.stride
            )
        )


def _im2col(xp: np.ndarray, g: ConvGeometry, out: Pair) -> np.ndarray:
    """Columns (N, C, kh, kw, Ho, Wo) of a padded input xp (N, C, Hp, Wp)."""
    n, c = xp.shape[:2]
    (kh, kw), (sh, sw), (lh, lw), (ho, wo) = g.kernel, g.stride, g.dilation, out
    cols = np.empty((n, c, kh, kw, ho, wo), dtype=xp.dtype)
    for a in range(kh):
        for b in range(kw):
            cols[:, :, a, b] = xp[:, :, a * lh : a * lh + sh * ho : sh, b * lw : b * lw + sw * wo : sw]
    return cols


def _grouped(cols: np.ndarray, groups: int) -> np.ndarray:
    """(N, C, kh, kw, Ho, Wo) -> (N*Ho*Wo, groups, C/groups*kh*kw), the matmul's rows."""
    n, c, kh, kw, ho, wo = cols.shape
    rows = cols.transpose(0, 4, 5, 1, 2, 3)  # (N, Ho, Wo, C, kh, kw)
    return rows.reshape(n * ho * wo, groups, (c // groups) * kh * kw)


def _w_grouped(w: np.ndarray, groups: int) -> np.ndarray:
    """(C/g, kh, kw, C_out) -> (g, C/g*kh*kw, C_out/g)."""
    k = w.shape[0] * w.shape[1] * w.shape[2]
    return w.reshape(k, groups, w.shape[3] // groups).transpose(1, 0, 2)


def conv2d_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, g: ConvGeometry
                   ) -> tuple[np.ndarray, Saved]:
    """y (N, C_out, Ho, Wo) of x (N, C_in, H, W); keeps x (the columns are rebuilt in backward)."""
    n, _, h, width = x.shape
    out = g.out_size(h, width)
    xp = np.pad(x, ((0, 0), (0, 0), (g.pad_lo[0], g.pad_hi[0]), (g.pad_lo[1], g.pad_hi[1])))
    rows = _grouped(_im2col(xp, g, out), g.groups)
    y = np.einsum("rgk,gko->rgo", rows, _w_grouped(w, g.groups))  # (N*Ho*Wo, g, k) @ (g, k, C_out/g)
    y = y.reshape(n, *out, w.shape[3]).transpose(0, 3, 1, 2)  # (N, C_out, Ho, Wo)
    if b is not None:
        y = y + b[:, None, None]
    return np.ascontiguousarray(y), Saved(floats=(x,))


def conv2d_backward(saved: Saved, w: np.ndarray, dy: np.ndarray, g: ConvGeometry, has_bias: bool,
                    need_dx: bool = True) -> tuple[np.ndarray | None, np.ndarray, np.ndarray | None]:
    """(dx, dw, db) of conv2d_forward given dy (N, C_out, Ho, Wo)."""
    (x,) = saved.floats
    n, c, h, width = x.shape
    out = dy.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (g.pad_lo[0], g.pad_hi[0]), (g.pad_lo[1], g.pad_hi[1])))
    rows = _grouped(_im2col(xp, g, out), g.groups)  # (R, g, k)
    c_out = w.shape[3]
    dy_rows = dy.transpose(0, 2, 3, 1).reshape(-1, g.groups, c_out // g.groups)  # (R, g, C_out/g)
    dw_g = np.einsum("rgk,rgo->gko", rows, dy_rows)  # (R, g, k).T @ (R, g, C_out/g) per group
    dw = dw_g.transpose(1, 0, 2).reshape(w.shape)
    db = dy.sum(axis=(0, 2, 3)) if has_bias else None
    if not need_dx:
        return None, dw, db
    drows = np.einsum("rgo,gko->rgk", dy_rows, _w_grouped(w, g.groups))  # (R, g, C_out/g) @ (g, k, C_out/g).T
    kh, kw = g.kernel
    dcols = drows.reshape(n, *out, c, kh, kw).transpose(0, 3, 4, 5, 1, 2)  # (N, C, kh, kw, Ho, Wo)
    dxp = np.zeros_like(xp)
    (sh, sw), (lh, lw), (ho, wo) = g.stride, g.dilation, out
    for a in range(kh):
        for b in range(kw):
            dxp[:, :, a * lh : a * lh + sh * ho : sh, b * lw : b * lw + sw * wo : sw] += dcols[:, :, a, b]
    dx = dxp[:, :, g.pad_lo[0] : g.pad_lo[0] + h, g.pad_lo[1] : g.pad_lo[1] + width]
    return np.ascontiguousarray(dx), dw, db
