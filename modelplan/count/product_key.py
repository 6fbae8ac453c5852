"""Exact parameters, forward FLOPs and kept activation bytes of the product-key expert memory
(`modelplan.specs.product_key`, transformers 5.24 DogeCDMoE), keyed relative to the block:

    mlp/pk_router, mlp/pk_experts
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def pk_params(spec: "TransformerSpec") -> dict[str, int]:
    """router_gate Linear(h, 2 num_keys, bias=False); down_embed and up_embed Embedding(E, h)."""
    pk, h = spec.product_key_experts, spec.hidden
    if pk is None:
        return {}
    return {"mlp/pk_router": h * 2 * pk.num_keys, "mlp/pk_experts": 2 * pk.num_experts * h}


def pk_unused_params(spec: "TransformerSpec") -> int:
    """Expert vectors one token does not read: (E - top_k) x 2h."""
    pk = spec.product_key_experts
    return 0 if pk is None else (pk.num_experts - pk.top_k) * 2 * spec.hidden


def pk_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """The router GEMM (t, h) @ (h, 2 keys); per token (k, h) @ (h,) for the expert weights and
    (1, k) @ (k, h) for the output (DogeCDMoE.forward's two matmuls); the key-sum top-k is
    element-wise (not counted)."""
    pk, h = spec.product_key_experts, spec.hidden
    if pk is None:
        return {}
    return {"mlp/pk_router": 2 * tokens * h * 2 * pk.num_keys, "mlp/pk_experts": 2 * tokens * 2 * pk.top_k * h}


def pk_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """Bytes per token autograd keeps (`d` a value): the gathered down and up rows (2 top_k h),
    the expert scores before and after the activation (2 top_k) and the router logits (2 keys)."""
    pk = spec.product_key_experts
    return 0 if pk is None else d * (2 * pk.top_k * spec.hidden + 2 * pk.top_k + 2 * pk.num_keys)
