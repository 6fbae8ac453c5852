"""Kernels and tensor-parallel shard of an RWKV-4 block's mixers on one tp rank.

Time mixing split by channel (key, value, receptance column-parallel, output row-parallel,
time_decay / time_first with their channels); channel mixing as a Megatron MLP (key
column-parallel, value row-parallel) with its receptance gate Linear(h, h) column-parallel
(the gate multiplies the row-parallel output after its reduction: counted as split). The
token-shift mixes (h each) are replicated. The WKV recurrence, token shift and gating are
memory-bound passes priced at HBM rate.
"""

from __future__ import annotations

from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.specs.transformer import TransformerSpec


def rwkv_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, d: int):
    """(gemms, elementwise, out_proj) of an RWKV-4 block, channels split over tp."""
    m, h, tokens = spec.rwkv, spec.hidden, b * s_q
    a, i, hl = -(-m.attention_hidden // tp), -(-m.intermediate // tp), -(-h // tp)
    gemms = [Gemm("rwkv/time_mix/kvr", tokens, 3 * a, h), Gemm("rwkv/time_mix/output", tokens, h, a),
             Gemm("rwkv/channel_mix/key", tokens, i, h), Gemm("rwkv/channel_mix/receptance", tokens, hl, h)]
    ew = [Elementwise("rwkv/token_shift", tokens * 5 * h, 2 * d, 3 * d),  # 5 mixed inputs
          # WKV: reads k, v, r, writes the gated output; bwd reads them and dy, writes dk, dv, dr
          Elementwise("rwkv/wkv", tokens * a, 4 * d, 7 * d),
          Elementwise("rwkv/channel_mix/act", tokens * i, 2 * d, 3 * d)]  # squared ReLU
    return gemms, ew, Gemm("rwkv/channel_mix/value", tokens, h, i)  # row-parallel


def rwkv_shard(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements): the five token-shift mixes are replicated."""
    m, h = spec.rwkv, spec.hidden
    a, i, hl = -(-m.attention_hidden // tp), -(-m.intermediate // tp), -(-h // tp)
    mixes = 5 * h
    numel = 4 * h * a + 2 * a + 2 * h * i + h * hl + mixes
    return numel, mixes if tp > 1 else 0
