"""The Mamba-2 (SSD) mixer (Dao & Gu 2024, arXiv 2405.21060, sec. 7) as transformers' Mamba2Mixer /
BambaMixer / NemotronHMamba2Mixer compute it without fused kernels (their torch fallback path),
with its backward. The SSD recurrence runs sequentially (the chunked algorithm is the same sum).

Parameters (relative names): in_z|in_x|in_B|in_C|in_dt /weight (h, width) and /bias (HF in_proj's
five parts: d, d, G N, G N, H), conv_x|conv_B|conv_C /weight (width, k) and /bias (HF conv1d over
[x, B, C], depthwise causal), dt_bias, A_log, D (H), gate_norm/weight (d) of the gated RMSNorm (`norm` is the block's pre-norm), and
out/weight (d, h) (its bias is the caller's). Forward on x (b, s, h), head h in group h // (H/G):

    z = x W_z;  x', B, C = silu(conv(x W_x)), silu(conv(x W_B)), silu(conv(x W_C))
    delta = softplus(x W_dt + dt_bias),  A = -exp(A_log)        (b, s, H)
    S_t = exp(delta_t A) S_{t-1} + delta_t x'_t B_t^T,  y_t = S_t C_t + D x'_t   (per head, P x N)
    out = gated_rmsnorm(y * silu(z)) W_out   (RMS over each group of d / G channels; norm_before_gate false)

Under tensor parallelism heads and groups split (Megatron-core MambaMixer: in_proj column-parallel,
ngroups / tp groups a rank, out_proj row-parallel): every piece above is local to a rank, whose
heads use only its own groups, and out_proj's output is a partial sum the caller reduces. The
gated norm then stays within a rank only when tp divides G (`check_tp`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from modelplan.execute.layers.linear import linear_backward, linear_forward
from modelplan.execute.layers.mamba import _silu, _silu_grad, _softplus, causal_conv, causal_conv_backward
from modelplan.execute.layers.norm import NormCache, norm_backward, norm_forward

PARTS = ("x", "B", "C")
"""The conv1d's inputs, in HF's channel order."""


@dataclass(frozen=True)
class Mamba2Shape:
    """The mixer's sizes on one tensor-parallel rank (heads and groups local)."""

    heads: int
    head_dim: int
    groups: int
    state: int
    gated_norm: bool
    eps: float


def check_tp(heads: int, groups: int, tp: int) -> str | None:
    """Why tp cannot split this mixer the way Megatron-core does (None: it can)."""
    if heads % tp:
        return f"tp ({tp}) must divide mamba2.heads ({heads})"
    if groups % tp:
        return (f"tp ({tp}) must divide mamba2.groups ({groups}): the gated RMSNorm normalises each group of "
                f"d_inner / groups channels, which would span ranks (Megatron-core needs ngroups % tp == 0)")
    return None


@dataclass(frozen=True)
class Mamba2Cache:
    """What mamba_ssm's fused mamba_split_conv1d_scan_combined keeps for backward (ssd_combined.py
    save_for_backward: the in_proj output zxbcdt, the scan output and the norm's rstd per group;
    count/mixers.kept_bytes_per_token prices the same): the conv outputs, delta, the states and
    the normalised product are recomputed in backward."""

    x: np.ndarray
    pre: dict  # in_proj's x, B, C (the conv inputs)
    z: np.ndarray
    dt_raw: np.ndarray  # in_proj's dt + dt_bias (b, s, H)
    y: np.ndarray  # scan output incl. D x' (b, s, d)
    rstd: np.ndarray | None  # 1 / rms of each group of the gated product (b, s, G, 1)


def _heads(a: np.ndarray, n: int) -> np.ndarray:
    """(b, s, n * w) -> (b, s, n, w)."""
    return a.reshape(a.shape[:2] + (n, -1))


def _scan(shape: Mamba2Shape, delta, A, xh, Bh):
    """(exp(delta A) (b, s, H), every state S_t (b, s, H, P, N))."""
    a = np.exp(delta * A)
    bx = delta[..., None, None] * xh[..., None] * Bh[:, :, :, None, :]
    states = np.empty_like(bx)
    S = np.zeros(bx.shape[:1] + bx.shape[2:])
    for t in range(bx.shape[1]):
        S = a[:, t, :, None, None] * S + bx[:, t]
        states[:, t] = S
    return a, states


def _by_head(a: np.ndarray, shape: Mamba2Shape) -> np.ndarray:
    """B or C (b, s, G N) repeated to the heads (b, s, H, N) (HF repeat_interleave H / G)."""
    return np.repeat(_heads(a, shape.groups), shape.heads // shape.groups, axis=2)


def _to_groups(d: np.ndarray, shape: Mamba2Shape) -> np.ndarray:
    """Gradient of _by_head: (b, s, H, N) summed back to (b, s, G N)."""
    b, s, _, n = d.shape
    return d.reshape(b, s, shape.groups, shape.heads // shape.groups, n).sum(axis=3).reshape(b, s, -1)


def mamba2_forward(x: np.ndarray, p: Mapping[str, np.ndarray], shape: Mamba2Shape) -> tuple[np.ndarray, Mamba2Cache]:
    """The mixer of x (b, s, h) up to out_proj, bias excluded (partial over tp)."""
    H = shape.heads
    z = linear_forward(x, p["in_z/weight"], p.get("in_z/bias"))
    pre = {k: linear_forward(x, p[f"in_{k}/weight"], p.get(f"in_{k}/bias")) for k in PARTS}
    conv = {k: causal_conv(pre[k], p[f"conv_{k}/weight"], p.get(f"conv_{k}/bias")) for k in PARTS}
    xs, B, C = (_silu(conv[k]) for k in PARTS)
    dt_raw = linear_forward(x, p["in_dt/weight"], p.get("in_dt/bias")) + p["dt_bias"]
    delta = _softplus(dt_raw)  # (b, s, H)
    _, states = _scan(shape, delta, -np.exp(p["A_log"]), _heads(xs, H), _by_head(B, shape))
    yh = np.einsum("bshpn,bshn->bshp", states, _by_head(C, shape)) + _heads(xs, H) * p["D"][:, None]
    y = yh.reshape(xs.shape)
    gated = y * _silu(z)
    rstd = None
    if shape.gated_norm:  # RMS over each group's d / G channels, then the d-wide weight
        normed, norm = norm_forward("rmsnorm", _heads(gated, shape.groups), None, None, shape.eps)
        gated, rstd = normed.reshape(y.shape) * p["gate_norm/weight"], norm.inv_std
    out = gated @ p["out/weight"]  # (b, s, d) @ (d, h)
    return out, Mamba2Cache(x, {k: pre[k] for k in PARTS}, z, dt_raw, y, rstd)


def mamba2_backward(c: Mamba2Cache, p: Mapping[str, np.ndarray], shape: Mamba2Shape, dout: np.ndarray
                    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads) of mamba2_forward; grads has the keys of p except out/bias."""
    H = shape.heads
    grads: dict[str, np.ndarray] = {}
    conv = {k: causal_conv(c.pre[k], p[f"conv_{k}/weight"], p.get(f"conv_{k}/bias")) for k in PARTS}  # recomputed
    xs, B, C = (_silu(conv[k]) for k in PARTS)
    delta = _softplus(c.dt_raw)
    A = -np.exp(p["A_log"])
    xh, Bh, Ch = _heads(xs, H), _by_head(B, shape), _by_head(C, shape)
    a, states = _scan(shape, delta, A, xh, Bh)
    gz = _silu(c.z)
    gated = c.y * gz
    if shape.gated_norm:
        norm = NormCache(_heads(gated, shape.groups) * c.rstd, c.rstd, "rmsnorm", c.y.shape[-1] // shape.groups)
        normed = norm.x_hat.reshape(c.y.shape)
        dgn, grads["out/weight"], _ = linear_backward(normed * p["gate_norm/weight"], p["out/weight"], dout, False)
        grads["gate_norm/weight"] = (dgn * normed).reshape(-1, normed.shape[-1]).sum(axis=0)
        dg, _, _ = norm_backward(norm, None, _heads(dgn * p["gate_norm/weight"], shape.groups), False)
        dgated = dg.reshape(c.y.shape)
    else:
        dgated, grads["out/weight"], _ = linear_backward(gated, p["out/weight"], dout, False)
    dy = _heads(dgated * gz, H)  # (b, s, H, P)
    dz = dgated * c.y * _silu_grad(c.z)
    grads["D"] = (dy * xh).sum(axis=(0, 1, 3))
    dxh = dy * p["D"][:, None]
    dCh = np.einsum("bshp,bshpn->bshn", dy, states)
    da = np.empty_like(a)
    dbx = np.empty_like(states)
    g = np.zeros(states.shape[:1] + states.shape[2:])  # dL/dS_t carried back in time (b, H, P, N)
    for t in reversed(range(states.shape[1])):
        g = g + dy[:, t, :, :, None] * Ch[:, t, :, None, :]
        prev = states[:, t - 1] if t > 0 else 0.0
        da[:, t] = (g * prev).sum(axis=(-1, -2))
        dbx[:, t] = g
        g = g * a[:, t, :, None, None]
    dsa = da * a  # d(delta A), a = exp(delta A)
    grads["A_log"] = (dsa * delta).sum(axis=(0, 1)) * A  # dA/dA_log = A
    ddelta = dsa * A + np.einsum("bshpn,bshp,bshn->bsh", dbx, xh, Bh)
    dxh = dxh + np.einsum("bshpn,bsh,bshn->bshp", dbx, delta, Bh)
    dBh = np.einsum("bshpn,bsh,bshp->bshn", dbx, delta, xh)
    ddt = ddelta * -np.expm1(-delta)  # softplus'(u) = sigmoid(u) = 1 - exp(-softplus(u))
    grads["dt_bias"] = ddt.sum(axis=(0, 1))
    dparts = {"x": dxh.reshape(xs.shape), "B": _to_groups(dBh, shape), "C": _to_groups(dCh, shape)}
    dx = np.zeros_like(c.x)
    for k in PARTS:
        dconv = dparts[k] * _silu_grad(conv[k])
        dpre, grads[f"conv_{k}/weight"] = causal_conv_backward(c.pre[k], p[f"conv_{k}/weight"], dconv)
        if f"conv_{k}/bias" in p:
            grads[f"conv_{k}/bias"] = dconv.sum(axis=(0, 1))
        dparts[k] = dpre
    dparts["z"], dparts["dt"] = dz, ddt
    for k, d in dparts.items():
        dxi, grads[f"in_{k}/weight"], db = linear_backward(c.x, p[f"in_{k}/weight"], d, f"in_{k}/bias" in p)
        dx += dxi
        if db is not None:
            grads[f"in_{k}/bias"] = db
    return dx, grads
