"""Ring attention (cp_comm_type 'p2p'): this rank's queries against every rank's K, V block in
turn, the partial outputs merged by their log-sum-exp (online softmax, Milakov & Gimelshein
2018; Liu et al. 2023 ring attention; Transformer Engine `AttnFuncWithCPAndKVP2P` and
torch.distributed.tensor.experimental._attention `_templated_ring_attention` merge the same way).

Forward, cp steps: at step i the rank holds the K, V of cp rank j = cp_rank - i; before computing
on it, it passes the block on to the next rank (steps 0 .. cp-2: cp - 1 sends), so the send
overlaps that step's attention. Backward (TE's order): K, V go round again (cp - 1 sends); the dK,
dV accumulator of block j starts on the first rank that receives the block (j + 1), travels with
it and ends on its owner j after cp - 1 sends, where the owner's own part is added (TE: step 0
sends K, V only, the last step dK, dV only).

Each block's probabilities are kept, rescaled to the final softmax (exp(S - L)), as the eager
kernels keep theirs; backward then follows `attention.core_backward` block by block with
D = rowsum(dO * O) (FlashAttention-2, Dao 2023, alg. 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelplan.execute.context_parallel import ContextParallel


@dataclass(frozen=True)
class RingCache:
    """What backward needs of one ring forward (the K, V blocks are fetched round the ring again)."""

    q: np.ndarray  # (b, H, s/cp, d_qk), after rotary
    probs: tuple[np.ndarray, ...]  # by block j: (b, H, s/cp, s/cp), the final softmax's share
    capped: tuple[np.ndarray, ...] | None  # by block j: tanh(scores / cap) when soft-capped
    sink_probs: np.ndarray | None  # (b, H, s/cp, 1)


def _block(q: np.ndarray, kv: np.ndarray, group: int, scale: float, softcap: float | None,
           masked: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(output, lse, probs, capped) of q against one (2, b, KV, s/cp, d) K, V block under
    `masked` (s/cp, s/cp); a row with every key masked has lse -inf and output 0."""
    k, v = np.repeat(kv[0], group, axis=1), np.repeat(kv[1], group, axis=1)  # (b, KV, t, d) -> (b, H, t, d)
    scores = q @ k.transpose(0, 1, 3, 2) * scale  # (b, H, s/cp, d) @ (b, H, d, t)
    capped = None
    if softcap is not None:  # Gemma 2: cap * tanh(scores / cap)
        capped = np.tanh(scores / softcap)
        scores = softcap * capped
    scores = np.where(masked, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = np.log(total) + top  # (b, H, s/cp, 1)
    probs = e / np.where(total > 0, total, 1.0)
    return probs @ v, lse, probs, capped  # (b, H, s/cp, t) @ (b, H, t, d_v)


def _merge(out: np.ndarray, lse: np.ndarray, out_b: np.ndarray, lse_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two softmax-normalised partial outputs as one: weights exp(lse_x - logaddexp(lse, lse_b))."""
    new = np.logaddexp(lse, lse_b)
    safe = np.where(np.isfinite(new), new, 0.0)
    return np.exp(lse - safe) * out + np.exp(lse_b - safe) * out_b, new


def ring_forward(cp: ContextParallel, q: np.ndarray, k: np.ndarray, v: np.ndarray, group: int, scale: float,
                 softcap: float | None, masked: np.ndarray, sinks: np.ndarray | None
                 ) -> tuple[np.ndarray, RingCache]:
    """Attention of this rank's queries (b, H, s/cp, d) over the whole sequence, K, V (b, KV,
    s/cp, d) passed round the ring; `masked` (s/cp, s) is this rank's rows of the mask."""
    p, me, t = cp.size, cp.rank, k.shape[2]
    kv = np.stack([k, v])  # (2, b, KV, s/cp, d)
    out = lse = None
    parts: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
    for i in range(p):
        j = (me - i) % p  # the cp rank whose block this rank holds at step i
        if i > 0:
            kv = cp.recv_kv()
        if i < p - 1:
            cp.send_kv(kv)
        out_b, lse_b, probs, capped = _block(q, kv, group, scale, softcap, masked[:, j * t:(j + 1) * t])
        parts[j] = (probs, lse_b, capped)
        out, lse = (out_b, lse_b) if out is None else _merge(out, lse, out_b, lse_b)
    sink_probs = None
    if sinks is not None:  # gpt-oss: the sink logit joins the softmax with a zero value
        sink = np.broadcast_to(sinks[None, :, None, None], lse.shape)
        total = np.logaddexp(lse, sink)
        out, sink_probs, lse = out * np.exp(lse - total), np.exp(sink - total), total
    probs = tuple(parts[j][0] * np.exp(parts[j][1] - lse) for j in range(p))  # share of the final softmax
    capped = None if softcap is None else tuple(parts[j][2] for j in range(p))
    return out, RingCache(q, probs, capped, sink_probs)


def ring_backward(cp: ContextParallel, c: RingCache, k: np.ndarray, v: np.ndarray, group: int, scale: float,
                  ctx: np.ndarray, dctx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(dq (b, H, s/cp, d), dk, dv (b, KV, s/cp, d) of this rank's block, dsinks (H,) or None)
    from the merged output `ctx` O and its gradient `dctx` (b, H, s/cp, d_v)."""
    p, me = cp.size, cp.rank
    b, kv_heads, t, d = k.shape
    inner = (dctx * ctx).sum(axis=-1, keepdims=True)  # D = rowsum(dO * O)
    dsinks = None if c.sink_probs is None else -(c.sink_probs * inner).sum(axis=(0, 2, 3))  # (H,)
    kv = np.stack([k, v])  # (2, b, KV, s/cp, d)
    dq = np.zeros_like(c.q)
    own = acc = None
    for i in range(p):
        j = (me - i) % p
        if i > 0:
            kv = cp.recv_kv()
        if i < p - 1:
            cp.send_kv(kv)
        arriving = cp.recv_dkv() if i >= 2 else None  # block j's accumulator, from the rank before
        kj, vj = np.repeat(kv[0], group, axis=1), np.repeat(kv[1], group, axis=1)  # (b, H, s/cp, d)
        probs = c.probs[j]
        dprobs = dctx @ vj.transpose(0, 1, 3, 2)  # (b, H, s/cp, d_v) @ (b, H, d_v, s/cp)
        dv = probs.transpose(0, 1, 3, 2) @ dctx  # (b, H, s/cp, s/cp).T @ (b, H, s/cp, d_v)
        dscores = probs * (dprobs - inner)  # softmax backward: p * (dp - sum(dp * p))
        if c.capped is not None:
            dscores = dscores * (1.0 - c.capped[j] * c.capped[j])
        dscores = dscores * scale
        dq += dscores @ kj  # (b, H, s/cp, s/cp) @ (b, H, s/cp, d)
        dk = dscores.transpose(0, 1, 3, 2) @ c.q  # (b, H, s/cp, s/cp).T @ (b, H, s/cp, d)
        part = np.stack([dk, dv]).reshape(2, b, kv_heads, group, t, d).sum(axis=3)  # fold the GQA repeats
        if i == 0:
            own = part
        else:
            acc = part if arriving is None else arriving + part
            cp.send_dkv(acc)
    if p > 1:
        own = cp.recv_dkv() + own  # every other rank's share of this rank's block, back home
    return dq, own[0], own[1], dsinks
