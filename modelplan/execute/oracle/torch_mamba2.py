"""The torch oracle's Mamba-2 (SSD) mixer (Dao & Gu 2024, arXiv 2405.21060, sec. 7; transformers'
Mamba2Mixer torch path), written with torch's own functions (one depthwise F.conv1d over the
concatenated [x, B, C] as HF's conv1d, F.softplus, the recurrence as a loop, the gated RMSNorm
per group with F.rms_norm) so that autograd, not the executor's hand-written backward, gives the
gradients. Nothing here calls `layers/mamba2.py`.
"""

from __future__ import annotations


def mamba2(m, x, prefix: str):
    """The mixer of x (b, s, h) with parameters under `prefix` (named as the executor names them)."""
    torch, F, w, s = m.torch, m.F, m.w, m.spec.mamba2
    b, seq = x.shape[:2]
    H, P, G, N, k = s.heads, s.head_dim, s.groups, s.state_size, s.conv_kernel
    z = m.linear(x, f"{prefix}/in_z")
    xbc = torch.cat([m.linear(x, f"{prefix}/in_{p}") for p in "xBC"], dim=-1).transpose(1, 2)  # (b, conv_dim, s)
    conv_w = torch.cat([w[f"{prefix}/conv_{p}/weight"] for p in "xBC"]).unsqueeze(1)  # (conv_dim, 1, k)
    conv_b = torch.cat([w[f"{prefix}/conv_{p}/bias"] for p in "xBC"]) if s.conv_bias else None
    xbc = F.silu(F.conv1d(xbc, conv_w, conv_b, padding=k - 1, groups=conv_w.shape[0])[..., :seq]).transpose(1, 2)
    u, B, C = torch.split(xbc, [s.inner, G * N, G * N], dim=-1)
    u = u.reshape(b, seq, H, P)
    B = B.reshape(b, seq, G, N).repeat_interleave(H // G, dim=2)  # head h reads group h // (H / G)
    C = C.reshape(b, seq, G, N).repeat_interleave(H // G, dim=2)
    delta = F.softplus(m.linear(x, f"{prefix}/in_dt") + w[f"{prefix}/dt_bias"])  # (b, s, H)
    A = -torch.exp(w[f"{prefix}/A_log"])
    state = torch.zeros(b, H, P, N, dtype=x.dtype)
    ys = []
    for t in range(seq):  # S_t = exp(delta_t A) S_{t-1} + delta_t x_t B_t^T; y_t = S_t C_t + D x_t
        d_t = delta[:, t]
        state = torch.exp(d_t * A)[..., None, None] * state + (d_t[..., None] * u[:, t])[..., None] * B[:, t, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", state, C[:, t]))
    y = (torch.stack(ys, dim=1) + u * w[f"{prefix}/D"][:, None]).reshape(b, seq, s.inner)
    y = y * F.silu(z)
    if s.gated_norm:  # RMSNormGated, norm_before_gate false: RMS over each group of d_inner / G
        y = F.rms_norm(y.reshape(b, seq, G, -1), (s.inner // G,), None, m.spec.norm_eps).reshape(b, seq, -1)
        y = y * w[f"{prefix}/gate_norm/weight"]
    return m.linear(y, f"{prefix}/out")
