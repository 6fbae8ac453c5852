"""Exact parameters, forward FLOPs, kept activation bytes and tensor-parallel shards of
DeepSeek-V4's attention (`modelplan.specs.compressed_attention`), keyed relative to the block:

    attention/{q/down, q/norm, q/up, kv, kv/norm, out/groups, out/proj, sinks}   every block
    attention/compressor, attention/indexer                                       csa / hca blocks

Parameters follow transformers 5.24 `DeepseekV4Attention`, `DeepseekV4HCACompressor`,
`DeepseekV4CSACompressor` and `DeepseekV4Indexer` (every linear bias-free). FLOPs count the
GEMMs: the projections, QK^T and PV of the single shared K = V head over the window's keys plus
the compressed keys a query reads (full-square convention: min(s, window) window keys, all
s / m' HCA keys, min(index_topk, s / m) CSA keys), the grouped output (a block-diagonal bmm:
heads d x d_g in all), the compressors' kv / gate projections, the indexer's projections, its
q . K scores over every s / m compressed key and their head-weighted sum (DeepseekV4IndexerScorer).
The windows' softmax pooling, rotary, the sinks and the top-k are element-wise (not counted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def _split(n: int, parts: int) -> int:
    return -(-n // parts)


def compressor_params(spec: "TransformerSpec", kind: str) -> dict[str, int]:
    """A block's compressor and (csa) indexer: kv_proj and gate_proj Linear(h, c d), position_bias
    (rate, c d) and kv_norm (d), with c = 2 for csa's overlapping windows, 1 for hca; the indexer
    the same at index_head_dim plus q_b_proj Linear(r, H^I d^I) and weights_proj Linear(h, H^I)."""
    ca, h, d = spec.compressed_attention, spec.hidden, spec.dim_head
    if kind == "none":
        return {}
    copies, rate = (2, ca.csa_rate) if kind == "csa" else (1, ca.hca_rate)
    out = {"attention/compressor": 2 * h * copies * d + rate * copies * d + d}
    if kind == "csa":
        di, hi = ca.index_head_dim, ca.index_heads
        out["attention/indexer"] = 2 * h * 2 * di + rate * 2 * di + di + ca.q_lora_rank * hi * di + h * hi
    return out


def compressed_attention_params(spec: "TransformerSpec", kind: str) -> dict[str, int]:
    """One block's attention (DeepseekV4Attention) with its compressor of `kind`."""
    ca, h, d, a = spec.compressed_attention, spec.hidden, spec.dim_head, spec.heads
    r, out_rank = ca.q_lora_rank, ca.o_groups * ca.o_lora_rank
    return {
        "attention/q/down": h * r,  # q_a_proj Linear(h, r)
        "attention/q/norm": r,  # q_a_norm RMSNorm(r); q_b_norm is weight-free
        "attention/q/up": r * a * d,  # q_b_proj Linear(r, heads d)
        "attention/kv": h * d,  # kv_proj Linear(h, d): the one K = V head
        "attention/kv/norm": d,  # kv_norm RMSNorm(d)
        "attention/out/groups": a * d * ca.o_lora_rank,  # o_a_proj: weight (g d_g, heads d / g)
        "attention/out/proj": out_rank * h,  # o_b_proj Linear(g d_g, h)
        "attention/sinks": a,  # sinks (heads,)
        **compressor_params(spec, kind),
    }


def compressed_keys(spec: "TransformerSpec", kind: str, seq_len: int) -> int:
    """Compressed keys one query reads: s / m' (hca), its top-k of s / m (csa), none."""
    ca = spec.compressed_attention
    if kind == "hca":
        return seq_len // ca.hca_rate
    if kind == "csa":
        return min(ca.index_topk, seq_len // ca.csa_rate)
    return 0


def compressed_attention_flops(spec: "TransformerSpec", kind: str, tokens: int, seq_len: int) -> dict[str, int]:
    """One block's forward FLOPs over `tokens` tokens in sequences of `seq_len`."""
    ca, h, d, a = spec.compressed_attention, spec.hidden, spec.dim_head, spec.heads
    r, out_rank = ca.q_lora_rank, ca.o_groups * ca.o_lora_rank
    keys = min(seq_len, spec.sliding_window or seq_len) + compressed_keys(spec, kind, seq_len)
    out = {
        "attention/q/down": 2 * tokens * h * r, "attention/q/up": 2 * tokens * r * a * d,
        "attention/kv": 2 * tokens * h * d,
        "attention/score": 2 * tokens * keys * a * 2 * d,  # QK^T and PV per head, K = V of width d
        "attention/out/groups": 2 * tokens * a * d * ca.o_lora_rank,  # g bmm (t, heads d / g) @ (heads d / g, d_g)
        "attention/out/proj": 2 * tokens * out_rank * h,
    }
    if kind != "none":
        copies = 2 if kind == "csa" else 1
        out["attention/compressor"] = 2 * tokens * h * 2 * copies * d  # kv_proj and gate_proj
    if kind == "csa":
        di, hi, entries = ca.index_head_dim, ca.index_heads, seq_len // ca.csa_rate
        out["attention/indexer/proj"] = 2 * tokens * (2 * h * 2 * di + r * hi * di + h * hi)
        out["attention/indexer/score"] = 2 * tokens * entries * hi * (di + 1)  # q . K per head, weighted sum
    return out


def compressed_attention_kept(spec: "TransformerSpec", kind: str, d_bytes: int) -> tuple[int, int]:
    """(replicated, tp-sharded) bytes per token kept for backward (eager autograd, 16-bit values):
    the query latent (q_a_norm's and q_b_proj's inputs, 2 r), the K = V head before and after its
    norm and rotary (2 d), per head the query before and after its norm / rotary and the core
    output before and after the inverse rotary (4 heads d), o_b_proj's input (g d_g); a compressor
    keeps its kv and gate projections (2 c d), an indexer its kv and gate (4 d^I), its queries
    (H^I d^I) and head weights (H^I)."""
    ca, d, a = spec.compressed_attention, spec.dim_head, spec.heads
    replicated = 2 * ca.q_lora_rank + 2 * d + ca.o_groups * ca.o_lora_rank
    if kind != "none":
        replicated += 2 * (2 if kind == "csa" else 1) * d
    if kind == "csa":
        replicated += 4 * ca.index_head_dim + ca.index_heads * ca.index_head_dim + ca.index_heads
    return d_bytes * replicated, d_bytes * 4 * a * d


def compressed_attention_shard(spec: "TransformerSpec", kind: str, tp: int, sp: bool) -> tuple[int, int]:
    """(local, partial-over-tp) elements on one tp rank: q_b_proj, the sinks and the grouped o_a_proj
    split with the heads (its groups over tp), o_b_proj row-parallel over its g d_g inputs; the
    query latent, the K = V head, their norms, the compressor and the indexer replicated (their
    gradients partial sums over tp: no engine splits them)."""
    ca, h, d = spec.compressed_attention, spec.hidden, spec.dim_head
    p = compressed_attention_params(spec, kind)
    heads = _split(spec.heads, tp)
    split = ca.q_lora_rank * heads * d + heads + heads * d * ca.o_lora_rank
    split += _split(ca.o_groups * ca.o_lora_rank, tp) * h
    replicated = sum(p.values()) - p["attention/q/up"] - p["attention/sinks"] - p["attention/out/groups"] \
        - p["attention/out/proj"]
    return replicated + split, replicated if tp > 1 else 0


def compressed_attention_gemms(spec: "TransformerSpec", kind: str, tp: int, tokens: int) -> list[tuple[str, int, int, int]]:
    """(name, m, n, k) of the block's weight GEMMs on one tp rank (the layout above), the output
    projection last."""
    ca, h, d = spec.compressed_attention, spec.hidden, spec.dim_head
    heads, r = _split(spec.heads, tp), ca.q_lora_rank
    out = [("attention/q_a", tokens, r, h), ("attention/q_b", tokens, heads * d, r), ("attention/kv", tokens, d, h)]
    if kind != "none":
        out.append(("attention/compressor", tokens, 2 * (2 if kind == "csa" else 1) * d, h))
    if kind == "csa":
        di, hi = ca.index_head_dim, ca.index_heads
        out += [("attention/indexer/kv", tokens, 4 * di, h), ("attention/indexer/q", tokens, hi * di, r),
                ("attention/indexer/weights", tokens, hi, h)]
    out.append(("attention/out/groups", tokens, ca.o_lora_rank, heads * d))  # the g bmms as one (heads d x d_g in all)
    out.append(("attention/out/proj", tokens, h, _split(ca.o_groups * ca.o_lora_rank, tp)))
    return out


def compressed_cache_elements(spec: "TransformerSpec", kind: str, seq_len: int) -> int:
    """One sequence's inference cache in one block (DeepseekV4HCACache / DeepseekV4CSACache): the
    window's K = V head (d a token) and the compressed keys emitted so far (d each; csa also the
    indexer's, d^I each); the partial-window buffers are left out."""
    ca, d = spec.compressed_attention, spec.dim_head
    out = min(seq_len, spec.sliding_window or seq_len) * d
    if kind == "hca":
        out += seq_len // ca.hca_rate * d
    elif kind == "csa":
        out += seq_len // ca.csa_rate * (d + ca.index_head_dim)
    return out
