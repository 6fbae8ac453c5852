"""Exact parameter counts of a transformer, following PyTorch / HuggingFace module conventions.

Every count is the number of elements of the parameter tensors the HF module would create
(`sum(p.numel() for p in model.parameters())`, tied matrices once). The breakdown uses
slash-path keys whose parents are sums of their children (nanoGPT's sizing notebook):

    embedding            token, position, token_type, norm, proj (OPT project_in)
    layers               attention/{qkv, out, qk_norm}, mlp/{in, out, router, experts,
                         shared_experts, shared_gate}, norm
    final_norm
    head                 output (untied lm_head), bias, transform (BERT MLM), pooler, proj

The four top-level groups are always present (0 when absent); leaves appear only when non-zero.
`network` specs are dispatched to `modelplan.count.network` (imported lazily).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.result import ParamCount

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec

TOP_LEVEL = ("embedding", "layers", "final_norm", "head")


def norm_params(spec: "TransformerSpec", width: int) -> int:
    """One LayerNorm/RMSNorm over `width` features: gamma, plus beta when norm_bias."""
    # torch.nn.LayerNorm(width, bias=...) / HF LlamaRMSNorm(width): weight (+ bias)
    return width * (2 if spec.norm_bias else 1)


def mlp_params(spec: "TransformerSpec", ffn_hidden: int) -> tuple[int, int]:
    """(in, out) parameters of one MLP of inner width `ffn_hidden` (gated: gate + up projections)."""
    n_in = 2 if spec.gated_mlp else 1  # SwiGLU/GeGLU: gate_proj and up_proj (Shazeer 2020)
    w_in = n_in * spec.hidden * ffn_hidden + (n_in * ffn_hidden if spec.mlp_bias else 0)
    w_out = ffn_hidden * spec.hidden + (spec.hidden if spec.mlp_bias else 0)
    return w_in, w_out


def layer_params(spec: "TransformerSpec", index: int) -> dict[str, int]:
    """Leaf parameters of block `index` (0-based), keyed relative to the block (`attention/qkv`)."""
    h = spec.hidden
    qkv_width = spec.q_width + 2 * spec.kv_width  # fused or separate q, k, v projections
    out: dict[str, int] = {
        # HF q_proj/k_proj/v_proj (or fused c_attn / query_key_value): Linear(h, qkv_width)
        "attention/qkv": h * qkv_width + (qkv_width if spec.qkv_bias else 0),
        # HF o_proj / c_proj / dense: Linear(heads * head_dim, h)
        "attention/out": spec.q_width * h + (h if spec.attn_out_bias else 0),
        # Phi q_layernorm/k_layernorm, Qwen3 q_norm/k_norm: one norm over head_dim each
        "attention/qk_norm": 2 * norm_params(spec, spec.dim_head) if spec.qk_norm else 0,
    }
    moe = spec.moe
    if moe is not None and spec.is_moe_layer(index):
        expert = sum(mlp_params(spec, moe.expert_ffn_hidden))
        shared_hidden = moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden
        # router: nn.Linear(h, num_experts, bias=router_bias) (Mixtral `gate`)
        out["mlp/router"] = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
        out["mlp/experts"] = moe.num_experts * expert
        out["mlp/shared_experts"] = moe.shared_experts * sum(mlp_params(spec, shared_hidden))
        # Qwen2-MoE shared_expert_gate: nn.Linear(h, 1, bias=False)
        out["mlp/shared_gate"] = h if moe.shared_expert_gate else 0
    else:
        out["mlp/in"], out["mlp/out"] = mlp_params(spec, spec.ffn_hidden)
    out["norm"] = spec.num_norms_per_layer * norm_params(spec, h)  # input/post-attention norms
    return out


def unused_expert_params(spec: "TransformerSpec", index: int) -> int:
    """Routed-expert parameters of block `index` that one token does not touch (num_experts - top_k)."""
    moe = spec.moe
    if moe is None or not spec.is_moe_layer(index):
        return 0
    return (moe.num_experts - moe.top_k) * sum(mlp_params(spec, moe.expert_ffn_hidden))


def embedding_params(spec: "TransformerSpec") -> dict[str, int]:
    """Leaf parameters of the input side, keyed relative to `embedding/`."""
    h, e = spec.hidden, spec.embed_dim
    return {
        "token": spec.vocab * e,  # nn.Embedding(vocab, embed_dim)
        # GPT-2 wpe / BERT position_embeddings: Embedding(max_positions, h); rotary/ALiBi: none
        "position": spec.max_positions * h if spec.position == "learned" else 0,
        "token_type": spec.type_vocab * h,  # BERT token_type_embeddings: Embedding(type_vocab, h)
        "norm": norm_params(spec, h) if spec.embedding_norm else 0,  # BLOOM/BERT embedding LN
        "proj": e * h if e != h else 0,  # OPT project_in: Linear(embed_dim, h, bias=False)
    }


def head_params(spec: "TransformerSpec") -> dict[str, int]:
    """Leaf parameters of the output side, keyed relative to `head/`."""
    h, e = spec.hidden, spec.embed_dim
    return {
        "proj": h * e if e != h else 0,  # OPT project_out: Linear(h, embed_dim, bias=False)
        # BERT BertPredictionHeadTransform: dense h x h + bias, then a norm
        "transform": h * h + h + norm_params(spec, h) if spec.mlm_transform else 0,
        # lm_head: Linear(embed_dim, vocab, bias=False); tied heads reuse the token embedding
        "output": spec.vocab * e if spec.lm_head and not spec.tied_embeddings else 0,
        "bias": spec.vocab if spec.lm_head_bias else 0,
        "pooler": h * h + h if spec.pooler else 0,  # BertPooler: dense h x h + bias
    }


def with_parents(leaves: dict[str, int], top_level: tuple[str, ...] = TOP_LEVEL) -> dict[str, int]:
    """Drop zero leaves, add every parent path as the sum of its children, keep `top_level`.

    Keys come out depth-first (a parent right before its children) in the order the leaves were
    given, so a breakdown built in model order reads top to bottom like the model.
    """
    tree: dict[str, int] = {key: 0 for key in top_level}
    for path, value in leaves.items():
        if value == 0:
            continue
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            key = "/".join(parts[:depth])
            tree[key] = tree.get(key, 0) + value
    seen = {key: i for i, key in enumerate(tree)}  # first-seen position of every path

    def order(path: str) -> tuple[int, ...]:
        parts = path.split("/")
        return tuple(seen["/".join(parts[:d])] for d in range(1, len(parts) + 1))

    return {key: tree[key] for key in sorted(tree, key=order)}


def count_params(spec) -> ParamCount:
    """Exact parameter counts of a transformer (or a network spec, dispatched lazily)."""
    if spec.kind == "network":
        from modelplan.count.network import count_network_params

        return count_network_params(spec)
    leaves: dict[str, int] = {}
    for key, value in embedding_params(spec).items():
        leaves[f"embedding/{key}"] = value
    per_layer: list[int] = []
    unused = 0
    for index in range(spec.layers):
        block = layer_params(spec, index)
        per_layer.append(sum(block.values()))
        unused += unused_expert_params(spec, index)
        for key, value in block.items():
            leaves[f"layers/{key}"] = leaves.get(f"layers/{key}", 0) + value
    leaves["final_norm"] = norm_params(spec, spec.hidden) if spec.final_norm else 0
    for key, value in head_params(spec).items():
        leaves[f"head/{key}"] = value
    breakdown = with_parents(leaves)
    total = sum(breakdown[key] for key in TOP_LEVEL)
    return ParamCount(
        total=total,
        trainable=total,
        active=total - unused,  # MoE: every routed expert except the top_k a token uses
        breakdown=breakdown,
        per_layer=per_layer,
    )
