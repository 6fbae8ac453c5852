"""Exact parameters, forward FLOPs and kept activation bytes of hyper-connections
(`modelplan.specs.hyperconn.HyperConnSpec`), keyed as count.params keys them:

    hyper_connections                 in every block: attn_hc and ffn_hc
    head/hyper_connections            the final collapse of the streams (DeepseekV4HyperHead)

Parameters follow transformers 5.24 `DeepseekV4HyperConnection` / `HYV4HyperConnection` /
`DeepseekV4HyperHead`. FLOPs count the matmuls FlopCounterMode sees: each module's fn projection
(t, n h) @ (n h, mixes) and, with mHC, its stream mix comb^T @ x, an (n, n) @ (n, h) matmul per
token (DeepseekV4DecoderLayer.forward: torch.matmul(comb.transpose(-1, -2), hidden_states)); the
collapse sum_j pre_j x_j, the expansion post_i f(.) and the Sinkhorn iterations over n x n are
element-wise (not counted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec

MODULES_PER_BLOCK = 2
"""attn_hc and ffn_hc (DeepseekV4DecoderLayer / HYV4DecoderLayer)."""
FP32_BYTES = 4


def hc_block_params(spec: "TransformerSpec") -> dict[str, int]:
    """One block's two modules: fn (mixes, n h), base (mixes) and scale (3 with comb, else 2)."""
    hc = spec.hyper_connections
    if hc is None:
        return {}
    nh = hc.streams * spec.hidden
    if hc.lowrank is not None:  # Qwen4ExpTextGatedResidual: hc_norm (n h), down, up, block_inject_weight (n, n h)
        return {"hyper_connections": MODULES_PER_BLOCK * (nh + 2 * nh * hc.lowrank + nh * hc.streams)}
    one = hc.mixes * nh + hc.mixes + (3 if hc.comb else 2)
    return {"hyper_connections": MODULES_PER_BLOCK * one}


def hc_head_params(spec: "TransformerSpec") -> dict[str, int]:
    """DeepseekV4HyperHead: hc_fn (n, n h), hc_base (n), hc_scale (1); a mean head has none."""
    hc = spec.hyper_connections
    if hc is None or hc.head == "mean":
        return {}
    n = hc.streams
    if hc.lowrank is not None:  # Qwen4ExpTextModel.hyper_connection_mixer: no injection
        return {"hyper_connections": n * spec.hidden * (1 + 2 * hc.lowrank)}
    return {"hyper_connections": n * n * spec.hidden + n + 1}


def hc_block_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """One block's forward FLOPs: two fn projections and, with mHC, two stream mixes."""
    hc = spec.hyper_connections
    if hc is None:
        return {}
    n, h = hc.streams, spec.hidden
    if hc.lowrank is not None:  # down (t, n h) @ (n h, r), up (t, r) @ (r, n h), inject (t, n h) @ (n h, n)
        return {"hyper_connections/proj": MODULES_PER_BLOCK * 2 * tokens * n * h * (2 * hc.lowrank + n)}
    out = {"hyper_connections/proj": MODULES_PER_BLOCK * 2 * tokens * n * h * hc.mixes}  # (t, n h) @ (n h, mixes)
    if hc.comb:
        out["hyper_connections/mix"] = MODULES_PER_BLOCK * 2 * tokens * n * n * h  # (n, n) @ (n, h) per token
    return out


def hc_head_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """The head's projection (t, n h) @ (n h, n)."""
    hc = spec.hyper_connections
    if hc is None or hc.head == "mean":
        return {}
    if hc.lowrank is not None:
        return {"hyper_connections": 2 * tokens * hc.streams * spec.hidden * 2 * hc.lowrank}
    return {"hyper_connections": 2 * tokens * hc.streams * spec.hidden * hc.streams}


def hc_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """Bytes per token the two modules keep for backward (eager autograd, 16-bit streams of `d`
    bytes): each keeps its n h input streams (read by the collapse and the mix), their fp32 copy
    (the weight-free RMSNorm's input) and, with mHC, the normed fp32 copy fn reads
    (DeepseekV4HyperConnection.forward; HYV4HyperConnection multiplies fn's output by the norm's
    per-token scale instead: one fp32 copy). Not split by tensor parallelism."""
    hc = spec.hyper_connections
    if hc is None:
        return 0
    nh = hc.streams * spec.hidden
    if hc.lowrank is not None:  # Qwen4-Exp: the streams, the normed streams and the sigmoid mix weights (n h each), r
        return MODULES_PER_BLOCK * d * (3 * nh + hc.lowrank)
    copies = 2 if hc.comb else 1
    return MODULES_PER_BLOCK * (d * nh + copies * FP32_BYTES * nh)


def hc_gemm_shapes(spec: "TransformerSpec", tokens: int) -> list[tuple[str, int, int, int, int]]:
    """(name, m, n, k, batch) of a block's hyper-connection GEMMs (the FLOPs above), every tp
    rank whole over its tokens."""
    hc = spec.hyper_connections
    if hc is None:
        return []
    n, h = hc.streams, spec.hidden
    if hc.lowrank is not None:
        return [(f"hyper_connections/{m}_{part}", tokens, width, k, 1) for m in ("attn", "ffn")
                for part, width, k in (("down", hc.lowrank, n * h), ("up", n * h, hc.lowrank), ("inject", n, n * h))]
    out = [(f"hyper_connections/{m}_proj", tokens, hc.mixes, n * h, 1) for m in ("attn", "ffn")]
    if hc.comb:
        out += [(f"hyper_connections/{m}_mix", n, h, n, tokens) for m in ("attn", "ffn")]
    return out


def residual_width(spec: "TransformerSpec") -> int:
    """Values per token of the residual stream between blocks: n h with hyper-connections (the
    [B, S, n, h] hidden_states DeepseekV4DecoderLayer reads and returns), else h. A fully
    recomputed block keeps this input; a pipeline stage sends it."""
    hc = spec.hyper_connections
    return spec.hidden * (hc.streams if hc is not None else 1)
