"""The planner's GEMMs for the relative-position and long-input attention options
(`specs/relative_attention.py`), one micro-batch on one tensor-parallel rank: the same products
count/relative_attention.py counts, with the heads split over tp like the block's own attention
(Megatron-LM layout: the position projections column-parallel, each rank scoring its local heads).
LED's global projections run for global tokens only (none by default): no GEMM."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.relative_attention import scored_positions
from modelplan.plan.kernel_types import Gemm

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.specs.transformer import TransformerSpec

_ATTENTION = ("full_attention", "sliding_attention", "chunked_attention")


def relative_gemms(spec: "TransformerSpec", block: "Block", tp: int, micro_batch: int, seq_len: int) -> list[Gemm]:
    """DeBERTa: per sequence, the P relative embeddings through each position projection
    (P, h) @ (h, q / tp), and per local head the c2p / p2c scores (s, d) @ (d, P) (He et al. 2021
    eq. 4); LongT5 transient-global: the one-hot aggregation (s/g, s) @ (s, h), the summaries' k / v
    (s/g, h) @ (h, 2 kv / tp) and each local head's QK^T and AV over them (Guo et al. 2022 sec. 3.1.2)."""
    x = spec.extras.relative if spec.extras is not None else None
    if x is None or block.mixer not in _ATTENTION:
        return []
    out, d, local_heads = [], spec.dim_head, spec.heads // tp
    disentangled = x.disentangled
    if disentangled is not None:
        projected = int(disentangled.c2p) + int(disentangled.p2c)
        positions = scored_positions(disentangled, seq_len)
        out += [Gemm("attention/relative/proj", positions, projected * spec.q_width // tp, spec.hidden, micro_batch),
                Gemm("attention/relative/score", seq_len, positions, d, micro_batch * local_heads * projected)]
    if x.transient_global and not block.cross:
        summaries = seq_len // x.transient_global
        out += [Gemm("attention/relative/global_aggregate", summaries, spec.hidden, seq_len, micro_batch),
                Gemm("attention/relative/global_kv", summaries, 2 * spec.kv_width // tp, spec.hidden, micro_batch),
                Gemm("attention/relative/global_score", seq_len, summaries, d, micro_batch * local_heads),
                Gemm("attention/relative/global_context", seq_len, d, summaries, micro_batch * local_heads)]
    return out
