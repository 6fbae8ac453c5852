"""The torch oracle's attention, latent attention and routers for today's families, written from
their papers and transformers' modelling code with torch's own functions (autograd does the
backward). Nothing here calls the executor's layers.

- Attention: scores q k^T * scale (Vaswani et al. 2017; Gemma's query_pre_attn_scalar), Gemma 2's
  soft-cap c tanh(s / c), a causal mask narrowed to a sliding window (HF: q - k < window) or a
  chunk (Llama 4), gpt-oss's sink logit concatenated to every row of the softmax and dropped,
  q/k norms per head or over the projection (F.rms_norm / F.layer_norm), OLMo's clamp, RoFormer
  rotary on the leading dims of each head (partial rotary) or none (NoPE blocks).
- MLA (DeepSeek-V2 eq. 9-19): query latent (or plain q), KV latent with its rotary key shared by
  the heads, per-head keys and values from the latent.
- Routers: softmax over the top-k logits (Mixtral eq. 1-2), softmax over all experts then top-k
  (Qwen-MoE, optionally renormalised), DeepSeek-V3's sigmoid scores picked on score + bias within
  the best groups (sum of a group's best two) and renormalised, times the routed scaling.
"""

from __future__ import annotations

import math

from modelplan.specs.transformer import TransformerSpec

ROPE_BASE = 10000.0  # Su et al. 2021, sec. 3.4.2


def rotary(torch, x, dims: int, base: float | None = None):
    """RoFormer rotation of the first `dims` of x (b, heads, s, d), channel j paired with j + dims/2;
    base: the spec's rope_theta (None: Su et al.'s 10000)."""
    seq, half = x.shape[2], dims // 2
    theta = (base or ROPE_BASE) ** (-2.0 * torch.arange(half, dtype=torch.float64) / dims)
    angle = torch.outer(torch.arange(seq, dtype=torch.float64), theta)  # (s, dims/2)
    z = torch.complex(x[..., :half], x[..., half:dims]) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag, x[..., dims:]], dim=-1)


def allowed(torch, seq: int, spec: TransformerSpec, mixer: str):
    """(s, s) True where query i may see key j."""
    i = torch.arange(seq)[:, None]
    j = torch.arange(seq)[None, :]
    ok = j <= i if spec.causal else torch.ones(seq, seq, dtype=torch.bool)
    if mixer == "sliding_attention":
        ok = ok & ((i - j < spec.sliding_window) if spec.causal else ((i - j).abs() < spec.sliding_window))
    if mixer == "chunked_attention":
        ok = ok & (i // spec.attention_chunk == j // spec.attention_chunk)
    return ok


def core(torch, spec: TransformerSpec, mixer: str, q, k, v, sinks=None):
    """softmax over the visible keys (and a sink) of the (soft-capped) scaled scores, times v."""
    scale = spec.attention_scale if spec.attention_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-1, -2) * scale  # (b, H, s, s)
    if spec.attn_logit_softcap is not None:
        scores = spec.attn_logit_softcap * torch.tanh(scores / spec.attn_logit_softcap)
    scores = scores.masked_fill(~allowed(torch, q.shape[2], spec, mixer), float("-inf"))
    if sinks is not None:
        sink = sinks.reshape(1, -1, 1, 1).expand(*scores.shape[:3], 1)
        probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    return probs @ v


def qk_norm(torch, spec: TransformerSpec, t, w: dict, name: str):
    """The q (or k) norm of t: (b, s, n*d) for the all-heads scope, (b, n, s, d) per head."""
    F = torch.nn.functional
    weight, bias = w.get(f"{name}/weight"), w.get(f"{name}/bias")
    if spec.qk_norm_scope == "head" and spec.qk_norm_weight == "per_head":  # (n, d) over positions
        weight = None if weight is None else weight[:, None, :]
        bias = None if bias is None else bias[:, None, :]
    width = (t.shape[-1],)
    if spec.norm == "layernorm":
        y = F.layer_norm(t, width, eps=spec.norm_eps)
    else:
        y = F.rms_norm(t, width, eps=spec.norm_eps)
    y = y if weight is None else y * weight
    return y if bias is None else y + bias


def attention(model, x, prefix: str, mixer: str):
    """q/k/v attention of x (b, s, h) with the spec's options."""
    torch, s, w = model.torch, model.spec, model.w
    b, seq, _ = x.shape
    d, heads, kv = s.dim_head, s.heads, s.num_kv_heads
    q, k, v = (model.linear(x, f"{prefix}/{n}") for n in "qkv")  # (b, s, n*d)
    if s.qk_norm_in(mixer) and s.qk_norm_scope == "all_heads":
        q, k = qk_norm(torch, s, q, w, f"{prefix}/q_norm"), qk_norm(torch, s, k, w, f"{prefix}/k_norm")
    q = q.view(b, seq, heads, d).transpose(1, 2)  # (b, H, s, d)
    k = k.view(b, seq, kv, d).transpose(1, 2)
    v = v.view(b, seq, kv, d).transpose(1, 2)
    if s.qk_norm_in(mixer) and s.qk_norm_scope == "head":
        q, k = qk_norm(torch, s, q, w, f"{prefix}/q_norm"), qk_norm(torch, s, k, w, f"{prefix}/k_norm")
    if s.qkv_clip is not None:
        q, k, v = (t.clamp(-s.qkv_clip, s.qkv_clip) for t in (q, k, v))
    if s.rotary_in(mixer):
        dims = int(d * s.rotary_fraction)
        q, k = rotary(torch, q, dims, s.rope_theta), rotary(torch, k, dims, s.rope_theta)
    k = k.repeat_interleave(heads // kv, dim=1)  # GQA: query head i reads kv head i // (H / KV)
    v = v.repeat_interleave(heads // kv, dim=1)
    ctx = core(torch, s, mixer, q, k, v, w.get(f"{prefix}/sinks"))
    ctx = ctx.transpose(1, 2).reshape(b, seq, heads * d)
    if f"{prefix}/gate/weight" in model.w:  # Qwen3-Next: attn_output * sigmoid(gate) before o_proj
        ctx = ctx * model.torch.sigmoid(model.linear(x, f"{prefix}/gate"))
    return model.linear(ctx, f"{prefix}/out")


def latent_attention(model, x, prefix: str, mixer: str):
    """MLA of x (b, s, h)."""
    torch, s, w = model.torch, model.spec, model.w
    F, mla = torch.nn.functional, s.mla
    b, seq, _ = x.shape
    H, dn, dr, dv, dc = s.heads, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim, mla.kv_lora_rank
    if mla.q_lora_rank is None:
        q = model.linear(x, f"{prefix}/q")
    else:
        latent = F.rms_norm(model.linear(x, f"{prefix}/q_a"), (mla.q_lora_rank,), w[f"{prefix}/q_a_norm/weight"],
                            s.norm_eps)
        q = model.linear(latent, f"{prefix}/q_b")
    q = q.view(b, seq, H, dn + dr).transpose(1, 2)  # (b, H, s, d_h + d_R)
    kv = model.linear(x, f"{prefix}/kv_a")  # (b, s, d_c + d_R)
    latent = F.rms_norm(kv[..., :dc], (dc,), w[f"{prefix}/kv_a_norm/weight"], s.norm_eps)
    up = model.linear(latent, f"{prefix}/kv_b").view(b, seq, H, dn + dv).transpose(1, 2)
    k_rope = rotary(torch, kv[..., dc:].unsqueeze(1), dr, s.rope_theta).expand(b, H, seq, dr)
    q = torch.cat([q[..., :dn], rotary(torch, q[..., dn:], dr, s.rope_theta)], dim=-1)
    k = torch.cat([up[..., :dn], k_rope], dim=-1)
    ctx = core(torch, s, mixer, q, k, up[..., dn:])
    return model.linear(ctx.transpose(1, 2).reshape(b, seq, H * dv), f"{prefix}/out")


def route(torch, spec: TransformerSpec, logits, score_bias):
    """(weights (T, k), experts (T, k)) of the spec's router on logits (T, E)."""
    moe = spec.moe
    E, k = moe.num_experts, moe.top_k
    if moe.router == "topk_softmax" or (moe.router == "softmax" and moe.norm_topk_prob):
        chosen, experts = torch.topk(logits, k, dim=-1)  # Mixtral: softmax over the top-k logits
        return torch.softmax(chosen, dim=-1) * moe.routed_scaling, experts
    scores = torch.softmax(logits, dim=-1) if moe.router == "softmax" else torch.sigmoid(logits)
    choice = scores.detach() + (score_bias if score_bias is not None else 0.0)
    if moe.router_groups > 1:
        grouped = choice.view(-1, moe.router_groups, E // moe.router_groups)
        if moe.router_score_correction:  # DeepSeek-V3 noaux_tc: a group's best two
            group = grouped.topk(2, dim=-1).values.sum(dim=-1)
        else:  # DeepSeek-V2 group_limited_greedy: a group's best
            group = grouped.max(dim=-1).values
        keep = torch.zeros_like(group, dtype=torch.bool)
        keep.scatter_(1, group.topk(moe.router_group_top_k, dim=-1).indices, True)
        choice = choice.masked_fill(~keep.repeat_interleave(E // moe.router_groups, dim=1), float("-inf"))
    experts = torch.topk(choice, k, dim=-1).indices
    weights = scores.gather(1, experts)
    if moe.norm_topk_prob:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + (1e-20 if moe.router == "sigmoid" else 0.0))
    return weights * moe.routed_scaling, experts


def clamped_swiglu(torch, gate, up, limit: float = 7.0, alpha: float = 1.702):
    """gpt-oss GptOssExperts: min(gate, 7) * sigmoid(1.702 min(gate, 7)) * (clamp(up, -7, 7) + 1)."""
    g = gate.clamp(max=limit)
    return g * torch.sigmoid(alpha * g) * (up.clamp(-limit, limit) + 1)
