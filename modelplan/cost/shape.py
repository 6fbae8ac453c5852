"""A transformer shape for a parameter count: the Llama 3 recipe near an aspect ratio of 128.

Rule (published dense families; hidden / layers in brackets):
    heads of 128 dims         Llama 2/3, GPT-3 175B (head dim 128)
    hidden / layers ~ 128     Llama-2-7B (4096/32 = 128), Llama-2-13B (5120/40 = 128), Llama-3-8B
                              (128), GPT-3 175B (12288/96 = 128), Llama-3-405B (16384/126 = 130)
    8 KV heads (GQA)          Llama 3 8B/70B/405B; the query heads a multiple of 8 (hidden a
                              multiple of 1024) so tensor parallelism up to 8 splits them; below
                              1024 wide, hidden a multiple of 128 with one KV head per query head
    ffn = 3.5 x hidden, rounded to a multiple of 256 (SwiGLU; Llama-3-8B 14336, Llama-3-70B 28672)
    RMSNorm, rotary, no biases, untied embeddings, the Llama 3 vocabulary of 128,256
For each allowed hidden size the layer count that brings the exact parameter count closest to the
target is taken; of those, the hidden size whose aspect ratio is closest to 128 wins.
"""

from __future__ import annotations

import math

from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.specs.transformer import TransformerSpec

HEAD_DIM = 128
ASPECT_RATIO = 128
KV_HEADS = 8
FFN_MULTIPLIER = 3.5
FFN_MULTIPLE_OF = 256
WIDE = HEAD_DIM * KV_HEADS  # from here on hidden moves in steps of 1024 (heads a multiple of 8)
LLAMA3_VOCAB = 128_256


def shape(hidden: int, layers: int, vocab: int, seq_len: int) -> TransformerSpec:
    """The rule's model of width `hidden` and depth `layers`."""
    heads = hidden // HEAD_DIM
    ffn = FFN_MULTIPLE_OF * max(1, round(FFN_MULTIPLIER * hidden / FFN_MULTIPLE_OF))
    return TransformerSpec(
        name=f"llama-style-h{hidden}-l{layers}",
        source="modelplan budget shape rule (modelplan.cost.shape): Llama 3 recipe, hidden/layers ~ 128",
        layers=layers, hidden=hidden, heads=heads, kv_heads=KV_HEADS if heads % KV_HEADS == 0 else heads,
        ffn_hidden=ffn, vocab=vocab, max_positions=seq_len,
    )


def _widths(limit: int):
    """Allowed hidden sizes: 128, 256, ... 896, then 1024, 2048, ... up to `limit`."""
    yield from range(HEAD_DIM, WIDE, HEAD_DIM)
    yield from range(WIDE, max(WIDE, limit) + 1, WIDE)


def shape_for_params(target: float, vocab: int = LLAMA3_VOCAB, seq_len: int = 4096) -> TransformerSpec:
    """The rule's model whose parameter count is closest to `target` (counted exactly)."""
    if target <= 0:
        raise SpecError(f"parameter target ({target:g}) must be > 0")
    limit = int((target * ASPECT_RATIO / 12) ** (1 / 3) * 2) + WIDE  # 12 L h^2 ~ params at h = 128 L
    best, best_key = (HEAD_DIM, 1), None
    for hidden in _widths(limit):
        one, two = (count_params(shape(hidden, n, vocab, seq_len)).total for n in (1, 2))
        per_layer, rest = two - one, 2 * one - two  # identical dense blocks: total = rest + layers x per_layer
        layers = max(1, round((target - rest) / per_layer))
        key = (abs(math.log(hidden / layers / ASPECT_RATIO)), abs(rest + layers * per_layer - target))
        if best_key is None or key < best_key:
            best, best_key = (hidden, layers), key
    return shape(*best, vocab, seq_len)
