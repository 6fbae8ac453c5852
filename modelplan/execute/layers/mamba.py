"""The Mamba mixer (Gu & Dao 2023, arXiv 2312.00752, Algorithm 2) as transformers' MambaMixer /
JambaMambaMixer compute it without the fused kernels (`slow_forward`), with its backward.

Parameters (relative names): in_x|in_z /weight (h, d) and /bias (HF in_proj's two halves),
conv/weight (d, k) and /bias (depthwise causal Conv1d), x_proj/weight (d, r + 2N), dt_proj/weight
(r, d) and /bias, A_log (d, N), D (d), out/weight (d, h) (its bias is the caller's), and Jamba's
dt_norm|b_norm|c_norm /weight. Forward on x (b, s, h):

    u = silu(conv(x W_x)),  z = x W_z
    dt, B, C = split(u W_xproj)      (Jamba: each RMS-normalised)
    delta = softplus(dt W_dt + b_dt),  A = -exp(A_log)
    h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t,   y_t = h_t C_t + D u_t
    out = (y * silu(z)) W_out

Under tensor parallelism the d channels split (Megatron-core's Mamba mixer): in_x, in_z, conv,
dt_proj, A_log, D by channel, x_proj and out_proj by their input channels. x_proj's output (dt,
B, C of all channels) is then a partial sum: `reduce` all-reduces it in forward and its gradient
in backward (None: one device).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from modelplan.comm.regions import Region

from modelplan.execute.layers.linear import linear_backward, linear_forward
from modelplan.execute.layers.norm import norm_backward, norm_forward

Reduce = Callable[[np.ndarray, str], np.ndarray]
X_PROJ_LABEL = Region.TP_MAMBA_X_PROJ


@dataclass(frozen=True)
class MambaShape:
    """The mixer's sizes (d_inner local to a tensor-parallel rank)."""

    inner: int
    state: int
    dt_rank: int
    kernel: int
    bc_dt_norm: bool
    eps: float


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def _silu_grad(x: np.ndarray) -> np.ndarray:
    s = 1.0 / (1.0 + np.exp(-x))
    return s * (1.0 + x * (1.0 - s))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def causal_conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """Depthwise causal conv over the sequence: out[:, t, c] = sum_j w[c, j] x[:, t - k + 1 + j, c]."""
    b, s, d = x.shape
    k = w.shape[1]
    padded = np.concatenate([np.zeros((b, k - 1, d)), x], axis=1)  # (b, s + k - 1, d)
    out = sum(padded[:, j:j + s] * w[:, j] for j in range(k))
    return out if bias is None else out + bias


def causal_conv_backward(x: np.ndarray, w: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dw) of causal_conv."""
    b, s, d = x.shape
    k = w.shape[1]
    padded = np.concatenate([np.zeros((b, k - 1, d)), x], axis=1)
    dpadded = np.zeros_like(padded)
    dw = np.zeros_like(w)
    for j in range(k):
        dw[:, j] = (padded[:, j:j + s] * dy).sum(axis=(0, 1))
        dpadded[:, j:j + s] += dy * w[:, j]
    return dpadded[:, k - 1:], dw


@dataclass(frozen=True)
class MambaCache:
    """What the fused selective-scan kernel keeps (sec. 3.3.2): its inputs and output, not the
    (b, s, d, N) states, which backward recomputes; SiLU outputs and the gated product are
    recomputed too."""

    x: np.ndarray
    xs: np.ndarray  # x W_x (b, s, d), the conv input
    conv: np.ndarray  # conv output before SiLU
    z: np.ndarray
    proj: np.ndarray  # x_proj output after the reduce (b, s, r + 2N): dt, B, C
    norms: dict
    dt_in: np.ndarray  # time-step input of dt_proj (Jamba: normalised; else a view of proj)
    B: np.ndarray  # (b, s, N)
    C: np.ndarray
    delta: np.ndarray  # softplus(dt W_dt + b_dt) (b, s, d)
    y: np.ndarray  # scan output incl. D u (b, s, d)


def _scan(delta: np.ndarray, A: np.ndarray, B: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exp(delta A), every state h_t), both (b, s, d, N): h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t."""
    a = np.exp(delta[..., None] * A)
    bu = delta[..., None] * B[:, :, None, :] * u[..., None]
    states = np.empty_like(a)
    h = np.zeros(a.shape[:1] + a.shape[2:])  # (b, d, N)
    for t in range(a.shape[1]):
        h = a[:, t] * h + bu[:, t]
        states[:, t] = h
    return a, states


def mamba_forward(x: np.ndarray, p: Mapping[str, np.ndarray], shape: MambaShape, reduce: Reduce | None = None
                  ) -> tuple[np.ndarray, MambaCache]:
    """The mixer of x (b, s, h) up to out_proj, bias excluded."""
    r, N = shape.dt_rank, shape.state
    xs = linear_forward(x, p["in_x/weight"], p.get("in_x/bias"))  # (b, s, h) @ (h, d)
    z = linear_forward(x, p["in_z/weight"], p.get("in_z/bias"))
    conv = causal_conv(xs, p["conv/weight"], p.get("conv/bias"))
    u = _silu(conv)
    proj = u @ p["x_proj/weight"]  # (b, s, d) @ (d, r + 2N): partial over tp
    proj = proj if reduce is None else reduce(proj, X_PROJ_LABEL)
    dt, B, C = proj[..., :r], proj[..., r:r + N], proj[..., r + N:]
    norms = {}
    if shape.bc_dt_norm:  # Jamba dt_layernorm, b_layernorm, c_layernorm (RMSNorm)
        dt, norms["dt"] = norm_forward("rmsnorm", dt, p["dt_norm/weight"], None, shape.eps)
        B, norms["b"] = norm_forward("rmsnorm", B, p["b_norm/weight"], None, shape.eps)
        C, norms["c"] = norm_forward("rmsnorm", C, p["c_norm/weight"], None, shape.eps)
    delta = _softplus(linear_forward(dt, p["dt_proj/weight"], p["dt_proj/bias"]))  # (b, s, r) @ (r, d)
    _, states = _scan(delta, -np.exp(p["A_log"]), B, u)  # A = -exp(A_log) (d, N)
    y = np.einsum("bsdn,bsn->bsd", states, C) + u * p["D"]
    out = (y * _silu(z)) @ p["out/weight"]  # (b, s, d) @ (d, h)
    return out, MambaCache(x, xs, conv, z, proj, norms, dt, B, C, delta, y)


def mamba_backward(c: MambaCache, p: Mapping[str, np.ndarray], shape: MambaShape, dout: np.ndarray,
                   reduce: Reduce | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx, grads) of mamba_forward; grads has the keys of p except out/bias."""
    r, N = shape.dt_rank, shape.state
    grads: dict[str, np.ndarray] = {}
    u, A = _silu(c.conv), -np.exp(p["A_log"])
    a, states = _scan(c.delta, A, c.B, u)  # recomputed, as the fused kernel's backward does
    gated = c.y * _silu(c.z)
    dgated, grads["out/weight"], _ = linear_backward(gated, p["out/weight"], dout, False)
    dy = dgated * _silu(c.z)
    dz = dgated * c.y * _silu_grad(c.z)
    du = dy * p["D"]
    grads["D"] = (dy * u).sum(axis=(0, 1))
    dC = np.einsum("bsd,bsdn->bsn", dy, states)
    da = np.empty_like(a)
    dbu = np.empty_like(a)
    g = np.zeros(a.shape[:1] + a.shape[2:])  # dL/dh_t carried back in time (b, d, N)
    for t in reversed(range(c.x.shape[1])):
        g = g + dy[:, t, :, None] * c.C[:, t, None, :]
        prev = states[:, t - 1] if t > 0 else 0.0
        da[:, t] = g * prev
        dbu[:, t] = g
        g = g * a[:, t]
    dsa = da * a  # d(delta A): a = exp(delta A)
    ddelta = (dsa * A).sum(axis=-1) + (dbu * c.B[:, :, None, :] * u[..., None]).sum(axis=-1)
    grads["A_log"] = (dsa * c.delta[..., None]).sum(axis=(0, 1)) * A  # dA/dA_log = A
    dB = (dbu * c.delta[..., None] * u[..., None]).sum(axis=2)
    du = du + (dbu * c.delta[..., None] * c.B[:, :, None, :]).sum(axis=-1)
    ddt_raw = ddelta * -np.expm1(-c.delta)  # softplus'(x) = sigmoid(x) = 1 - exp(-softplus(x))
    ddt, grads["dt_proj/weight"], grads["dt_proj/bias"] = linear_backward(c.dt_in, p["dt_proj/weight"], ddt_raw, True)
    dproj = np.concatenate([ddt, dB, dC], axis=-1)  # partial over tp: each rank's channels
    dproj = dproj if reduce is None else reduce(dproj, X_PROJ_LABEL)
    if shape.bc_dt_norm:
        parts = [dproj[..., :r], dproj[..., r:r + N], dproj[..., r + N:]]
        for i, name in enumerate(("dt", "b", "c")):
            parts[i], grads[f"{name}_norm/weight"], _ = norm_backward(c.norms[name], p[f"{name}_norm/weight"],
                                                                      parts[i], False)
        dproj = np.concatenate(parts, axis=-1)
    grads["x_proj/weight"] = u.reshape(-1, u.shape[-1]).T @ dproj.reshape(-1, dproj.shape[-1])  # (d, T) @ (T, r+2N)
    du = du + dproj @ p["x_proj/weight"].T  # (b, s, r + 2N) @ (r + 2N, d)
    dconv = du * _silu_grad(c.conv)
    dxs, grads["conv/weight"] = causal_conv_backward(c.xs, p["conv/weight"], dconv)
    if "conv/bias" in p:
        grads["conv/bias"] = dconv.sum(axis=(0, 1))
    dx = np.zeros_like(c.x)
    for name, d in (("in_x", dxs), ("in_z", dz)):
        dxi, grads[f"{name}/weight"], db = linear_backward(c.x, p[f"{name}/weight"], d, f"{name}/bias" in p)
        dx += dxi
        if db is not None:
            grads[f"{name}/bias"] = db
    return dx, grads
