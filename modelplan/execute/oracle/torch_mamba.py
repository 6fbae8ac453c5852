"""The torch oracle's Mamba mixer (Gu & Dao 2023, arXiv 2312.00752, Algorithm 2; transformers'
MambaMixer / JambaMambaMixer `slow_forward`), written with torch's own functions (a depthwise
F.conv1d, F.softplus, F.rms_norm, the recurrence as a loop) so that autograd, not the executor's
hand-written backward through time, gives the gradients. Nothing here calls `layers/mamba.py`.
"""

from __future__ import annotations


def mamba(m, x, prefix: str):
    """The mixer of x (b, s, h) with parameters under `prefix` (named as the executor names them)."""
    torch, F, w, ssm = m.torch, m.F, m.w, m.spec.ssm
    r, n, k = ssm.dt_rank, ssm.state_size, ssm.conv_kernel
    seq = x.shape[1]
    xs = m.linear(x, f"{prefix}/in_x").transpose(1, 2)  # (b, s, d) -> (b, d, s)
    z = m.linear(x, f"{prefix}/in_z")  # (b, s, d)
    conv_w = w[f"{prefix}/conv/weight"].unsqueeze(1)  # (d, 1, k): one filter per channel
    conv = F.conv1d(xs, conv_w, w.get(f"{prefix}/conv/bias"), padding=k - 1, groups=conv_w.shape[0])
    u = F.silu(conv[..., :seq]).transpose(1, 2)  # causal: the first s of s + k - 1 outputs (b, s, d)
    dt, B, C = torch.split(u @ w[f"{prefix}/x_proj/weight"], [r, n, n], dim=-1)  # (b, s, r), (b, s, N) x 2
    if ssm.bc_dt_norm:  # Jamba: dt_layernorm, b_layernorm, c_layernorm
        eps = m.spec.norm_eps
        dt = F.rms_norm(dt, (r,), w[f"{prefix}/dt_norm/weight"], eps)
        B = F.rms_norm(B, (n,), w[f"{prefix}/b_norm/weight"], eps)
        C = F.rms_norm(C, (n,), w[f"{prefix}/c_norm/weight"], eps)
    delta = F.softplus(m.linear(dt, f"{prefix}/dt_proj"))  # (b, s, d)
    A = -torch.exp(w[f"{prefix}/A_log"])  # (d, N)
    h = torch.zeros(x.shape[0], A.shape[0], n, dtype=x.dtype)  # (b, d, N)
    ys = []
    for t in range(seq):  # h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t; y_t = h_t C_t
        d_t = delta[:, t, :, None]  # (b, d, 1)
        h = torch.exp(d_t * A) * h + d_t * B[:, t, None, :] * u[:, t, :, None]
        ys.append(torch.einsum("bdn,bn->bd", h, C[:, t]))
    y = torch.stack(ys, dim=1) + u * w[f"{prefix}/D"]  # (b, s, d)
    return m.linear(y * F.silu(z), f"{prefix}/out")  # (b, s, d) -> (b, s, h), out bias included

