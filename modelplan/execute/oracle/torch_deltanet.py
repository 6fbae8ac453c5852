"""The torch oracle's gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, arXiv 2412.06464, eq. 10;
transformers' Qwen3NextGatedDeltaNet torch path), written with torch's own functions (one
depthwise F.conv1d over the concatenated [q, k, v], F.normalize, F.softplus, F.rms_norm, the
delta rule as a loop) so that autograd, not the executor's hand-written backward, gives the
gradients. Nothing here calls `layers/deltanet.py`.
"""

from __future__ import annotations


def deltanet(m, x, prefix: str):
    """The mixer of x (b, s, h) with parameters under `prefix` (named as the executor names them)."""
    torch, F, w, g = m.torch, m.F, m.w, m.spec.deltanet
    b, seq = x.shape[:2]
    hk, hv, dk, dv, k = g.key_heads, g.value_heads, g.key_head_dim, g.value_head_dim, g.conv_kernel
    qkv = torch.cat([x @ w[f"{prefix}/in_{p}/weight"] for p in "qkv"], dim=-1).transpose(1, 2)
    conv_w = torch.cat([w[f"{prefix}/conv_{p}/weight"] for p in "qkv"]).unsqueeze(1)
    qkv = F.silu(F.conv1d(qkv, conv_w, None, padding=k - 1, groups=conv_w.shape[0])[..., :seq]).transpose(1, 2)
    q, kk, v = torch.split(qkv, [hk * dk, hk * dk, hv * dv], dim=-1)
    def heads(t):  # key heads repeated to their value heads, then l2-normalised (fla's eps 1e-6 inside the sqrt)
        t = t.reshape(b, seq, hk, dk).repeat_interleave(hv // hk, dim=2)
        return t * torch.rsqrt((t * t).sum(-1, keepdim=True) + 1e-6)
    q, kk = heads(q) / dk ** 0.5, heads(kk)
    v = v.reshape(b, seq, hv, dv)
    beta = torch.sigmoid(x @ w[f"{prefix}/in_b/weight"])
    decay = -torch.exp(w[f"{prefix}/A_log"]) * F.softplus(x @ w[f"{prefix}/in_a/weight"] + w[f"{prefix}/dt_bias"])
    S = torch.zeros(b, hv, dk, dv, dtype=x.dtype)
    outs = []
    for t in range(seq):  # S' = e^g S; S = S' + k (beta (v - S'^T k))^T; o = S^T q
        S = S * torch.exp(decay[:, t])[..., None, None]
        delta = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhkv,bhk->bhv", S, kk[:, t]))
        S = S + kk[:, t, :, :, None] * delta[:, :, None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]))
    o = F.rms_norm(torch.stack(outs, dim=1), (dv,), w[f"{prefix}/gate_norm/weight"], m.spec.norm_eps)
    o = o * F.silu((x @ w[f"{prefix}/in_z/weight"]).reshape(b, seq, hv, dv))  # norm before gate
    return o.reshape(b, seq, hv * dv) @ w[f"{prefix}/out/weight"]
