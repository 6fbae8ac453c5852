"""Exact parameters, forward FLOPs and kept activation bytes of two additions to q/k/v attention
(`TransformerSpec.head_gate`, `TransformerSpec.differential_attention`), keyed relative to the block:

    attention/{head_gate, lambda}, attention/{experts, router} (JetMoE), attention/dynamic_mask (Doge)

- head gate (transformers 5.24 `Lfm3Attention.g_proj`, `LagunaAttention.g_proj`): a bias-free
  Linear(h, heads) (one gate a head, broadcast over head_dim) or Linear(h, heads * head_dim) (one a
  channel) on the block input; o_proj reads attn * sigmoid(g) (LFM3) or attn * softplus(g) (Laguna);
  Beam's gate_proj is per-channel with a learned (heads,) gate_bias (`head_gate_bias`) added to g.
- differential attention (Ye et al. 2024, arXiv 2410.05258; `DiffLlamaAttention`): lambda_q1,
  lambda_k1, lambda_q2, lambda_k2, (head_dim,) each; the forward calls the attention kernel twice
  with the same Q and K, each time on half of V repeated to the kv heads, so the scores and the
  context are computed twice; the lambda combination and the weight-free groupnorm are element-wise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.cca import cca_flops, cca_kept_bytes, cca_params
from modelplan.count.qsa import qsa_kept_bytes, qsa_params

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def gate_width(spec: "TransformerSpec", heads: int | None = None) -> int:
    """Output features of g_proj for `heads` heads (all by default): heads, or heads * head_dim."""
    heads = spec.heads if heads is None else heads
    if spec.head_gate is None:
        return 0
    return heads if spec.head_gate == "head" else heads * spec.dim_head


def extra_attention_params(spec: "TransformerSpec") -> dict[str, int]:
    """g_proj and the lambda vectors of one attention block."""
    out = {}
    if spec.head_gate is not None:
        out["attention/head_gate"] = spec.hidden * gate_width(spec)  # g_proj: Linear(h, width, bias=False)
        if spec.head_gate_bias:  # BeamAttention.gate_bias: nn.Parameter(zeros(num_attention_heads))
            out["attention/head_gate"] += spec.heads
    if spec.differential_attention:
        out["attention/lambda"] = 4 * spec.dim_head  # lambda_q1, lambda_k1, lambda_q2, lambda_k2: (head_dim,)
    if spec.dynamic_mask:  # DogeAttention: A (kv,), dt_proj Linear(kv d, kv, bias=attention_bias)
        kv = spec.num_kv_heads
        out["attention/dynamic_mask"] = kv + spec.v_width * kv + (kv if spec.qkv_bias else 0)
    return {**out, **cca_params(spec), **qsa_params(spec)}  # ZAYA's q/k convs (count/cca.py), Qwen4-Exp's QSA (count/qsa.py)


def moa_params(spec: "TransformerSpec") -> dict[str, int]:
    """JetMoE's mixture of attention experts (JetMoeAttention, JetMoeMoA): kv_proj Linear(h, 2 kv d,
    bias=False); E experts' input_linear (kv d, h) and output_linear (h, kv d) weights; the router
    Linear(h, E, bias=False); the output bias (h)."""
    h, e, kv = spec.hidden, spec.attention_experts, spec.kv_width
    return {"attention/qkv": h * (kv + spec.v_width), "attention/experts": e * 2 * h * kv,
            "attention/router": h * e, "attention/out": h}


def unused_attention_expert_params(spec: "TransformerSpec", block) -> int:
    """MoA expert weights one token does not touch: E - top_k of the query / output pairs."""
    if spec.attention_experts is None or block.mixer not in ("full_attention", "sliding_attention"):
        return 0
    return (spec.attention_experts - spec.heads // spec.num_kv_heads) * 2 * spec.hidden * spec.kv_width


def extra_attention_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """g_proj's GEMM (t, h) @ (h, width); the MoA router's (t, h) @ (h, E) (its top_k query and
    output projections are the plain ones' heads = kv_heads x top_k)."""
    out = {}
    if spec.head_gate is not None:
        out["attention/head_gate"] = 2 * tokens * spec.hidden * gate_width(spec)
    if spec.attention_experts is not None:
        out["attention/router"] = 2 * tokens * spec.hidden * spec.attention_experts
    if spec.dynamic_mask:  # Doge dt_proj: (t, kv d) @ (kv d, kv); the mask's exp / top-k are element-wise
        out["attention/dynamic_mask"] = 2 * tokens * spec.v_width * spec.num_kv_heads
    return {**out, **cca_flops(spec, tokens)}  # ZAYA's q/k convs (count/cca.py)


def attention_calls(spec: "TransformerSpec") -> int:
    """Attention-kernel calls a block makes over the same Q and K: 2 for differential attention
    (DiffLlamaAttention.forward calls attention_interface once per half of V), else 1."""
    return 2 if spec.differential_attention else 1


def extra_attention_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """Bytes per token (tp-sharded) autograd keeps for the additions, `d` bytes a value: the gate
    logits and the ungated core output for attn * gate(g); the second call's output (its fused
    kernel also keeps Q, K, V, already counted) and the groupnorm's input."""
    out = 0
    if spec.head_gate is not None:
        out += d * (gate_width(spec) + spec.q_width)
    if spec.differential_attention:
        out += d * 2 * spec.q_width
    return out + cca_kept_bytes(spec, d) + qsa_kept_bytes(spec, d)  # ZAYA's convs, Qwen4-Exp's QSA
