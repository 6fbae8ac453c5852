"""Exact bytes each rank sends and receives, per algorithm: what the executor's ledger must show.

Message size `nbytes` follows nccl-tests (see `modelplan.comm.cost`). Schedules, fixed here so
the in-process simulator and the ledger check agree:

* ring: rank r sends to group rank r+1 and receives from r-1. AllReduce = ReduceScatter after
  which rank r holds chunk r, then AllGather starting from chunk r. AllReduce chunks follow
  numpy's `array_split` over `nbytes // itemsize` elements (the first count % p chunks one
  element longer), so with p | count every chunk is n/p and each rank sends 2(p-1)/p*n.
  AllGather/ReduceScatter blocks are equal: nbytes must be a multiple of p.
  Broadcast/Reduce = a chain root, root+1, ..., root+p-1 (data flows down it, or up it).
* binomial (MPICH): relative rank v = (r - root) mod p receives from v - lowbit(v) and sends to
  v + m for every power of two m < lowbit(v) (m < p for the root) with v + m < p; Reduce is
  the mirror; AllReduce = binomial Reduce to `root` + binomial Broadcast from it.
* recursive_doubling (p a power of two): AllReduce exchanges the whole buffer with r ^ m for
  m = 1, 2, ..., p/2; AllGather exchanges the blocks gathered so far, largest distance first.
* halving_doubling (p a power of two): ReduceScatter halves the chunks kept, partner r ^ m for
  m = 1, 2, ..., p/2, keeping the chunks whose bit m matches r's (ending with chunk r);
  AllReduce follows it with the mirror AllGather (m = p/2, ..., 1).
* pairwise / direct all-to-all: rank r sends its p-1 blocks of n/p to the others.
* direct send_recv: group rank `root` sends the whole buffer to root+1.
* dissemination barrier: ceil(lg p) rounds of empty messages.
"""

from __future__ import annotations

from modelplan.comm.alphabeta import invalid_reason
from modelplan.comm.ops import Algo, Collective, parse_algo, parse_collective
from modelplan.errors import SpecError

_EXACT = {
    Collective.ALL_REDUCE: {Algo.RING, Algo.BINOMIAL, Algo.RECURSIVE_DOUBLING, Algo.HALVING_DOUBLING},
    Collective.ALL_GATHER: {Algo.RING, Algo.RECURSIVE_DOUBLING},
    Collective.REDUCE_SCATTER: {Algo.RING, Algo.HALVING_DOUBLING},
    Collective.BROADCAST: {Algo.RING, Algo.BINOMIAL},
    Collective.REDUCE: {Algo.RING, Algo.BINOMIAL},
    Collective.ALL_TO_ALL: {Algo.PAIRWISE, Algo.DIRECT},
    Collective.SEND_RECV: {Algo.DIRECT},
    Collective.BARRIER: {Algo.DISSEMINATION},
}
"""(op, algorithm) pairs with a fixed per-rank schedule (tree and hierarchical depend on the
placement NCCL builds, so only estimates exist for them)."""


def chunk_sizes(nbytes: int, parts: int, itemsize: int = 1) -> list[int]:
    """Bytes of each of `parts` chunks, split like numpy.array_split over whole elements."""
    count, rest = divmod(nbytes, itemsize)
    if rest:
        raise SpecError(f"nbytes ({nbytes}) must be a multiple of itemsize ({itemsize})")
    q, r = divmod(count, parts)
    return [(q + 1 if i < r else q) * itemsize for i in range(parts)]


def _binomial_children(v: int, p: int) -> int:
    """Children of relative rank v in an MPICH binomial tree over p ranks."""
    low = v & -v if v else p  # the root may send at every power of two below p
    return sum(1 for m in (1 << j for j in range(max(p - 1, 1).bit_length())) if m < low and v + m < p)


def _halving_rs(chunks: list[int], r: int) -> tuple[int, int]:
    """(sent, received) by rank r in recursive-halving ReduceScatter, masks 1, 2, ..., p/2."""
    p = len(chunks)
    kept, sent, received = list(range(p)), 0, 0
    m = 1
    while m < p:
        mine = [i for i in kept if (i & m) == (r & m)]
        sent += sum(chunks[i] for i in kept if (i & m) != (r & m))
        received += sum(chunks[i] for i in mine)
        kept, m = mine, m * 2
    return sent, received


def _check(op: Collective, algo: Algo, p: int, group_rank: int, root: int) -> None:
    if p < 1:
        raise SpecError(f"group_size ({p}) must be >= 1")
    if not 0 <= group_rank < p:
        raise SpecError(f"group_rank ({group_rank}) must be in [0, {p})")
    if not 0 <= root < p:
        raise SpecError(f"root ({root}) must be a group rank in [0, {p})")
    if algo not in _EXACT[op]:
        names = ", ".join(sorted(a.value for a in _EXACT[op]))
        raise SpecError(f"no exact per-rank schedule for {algo.value} {op.value} (exact: {names})")
    if p > 1 and algo is not Algo.HIERARCHICAL:
        reason = invalid_reason(op, algo, p, p, 1)
        if reason is not None:
            raise SpecError(reason)


def _equal_blocks(op: Collective, nbytes: int, p: int) -> int:
    if nbytes % p:
        raise SpecError(f"{op.value} nbytes ({nbytes}) must be a multiple of group_size ({p}): "
                        f"it is {p} equal blocks")
    return nbytes // p


def bytes_per_rank(op: Collective | str, algo: Algo | str, nbytes: int, group_size: int,
                   group_rank: int = 0, root: int = 0, itemsize: int = 1) -> tuple[int, int]:
    """(bytes sent, bytes received) by `group_rank` in one collective; exact integers.

    `root` is a group rank (Broadcast/Reduce root, binomial AllReduce root, send_recv sender);
    `itemsize` only matters for how ring/halving AllReduce cut an uneven buffer into chunks.
    """
    op, algo = parse_collective(op), parse_algo(algo)
    p, r, n = group_size, group_rank, int(nbytes)
    _check(op, algo, p, r, root)
    if n < 0:
        raise SpecError(f"nbytes ({n}) must be >= 0")
    if p == 1 or op is Collective.BARRIER:
        return 0, 0
    v = (r - root) % p
    if op is Collective.ALL_REDUCE:
        if algo is Algo.RING:
            c = chunk_sizes(n, p, itemsize)
            # ReduceScatter: send all but chunk r, receive all but chunk r-1;
            # AllGather: send all but chunk r+1, receive all but chunk r
            return 2 * n - c[r] - c[(r + 1) % p], 2 * n - c[(r - 1) % p] - c[r]
        if algo is Algo.RECURSIVE_DOUBLING:
            rounds = (p - 1).bit_length()
            return rounds * n, rounds * n
        if algo is Algo.HALVING_DOUBLING:
            sent, received = _halving_rs(chunk_sizes(n, p, itemsize), r)
            return sent + received, received + sent  # the AllGather mirrors the ReduceScatter
        # binomial: Reduce to root (send n once unless root) then Broadcast (receive n once)
        kids = _binomial_children(v, p)
        return (kids + (v != 0)) * n, ((v != 0) + kids) * n
    if op is Collective.ALL_GATHER:
        block = _equal_blocks(op, n, p)
        return n - block, n - block  # ring and recursive doubling: every other block once
    if op is Collective.REDUCE_SCATTER:
        block = _equal_blocks(op, n, p)
        return n - block, n - block
    if op in (Collective.BROADCAST, Collective.REDUCE):
        if algo is Algo.RING:
            sent, received = (n if v != p - 1 else 0), (n if v != 0 else 0)
        else:
            sent, received = _binomial_children(v, p) * n, (n if v != 0 else 0)
        return (sent, received) if op is Collective.BROADCAST else (received, sent)
    if op is Collective.ALL_TO_ALL:
        block = _equal_blocks(op, n, p)
        return n - block, n - block
    # send_recv: root sends to root+1
    return (n if v == 0 else 0), (n if v == 1 else 0)


def rounds_per_rank(op: Collective | str, algo: Algo | str, group_size: int,
                    group_rank: int = 0, root: int = 0) -> int:
    """Communication rounds `group_rank` takes part in (LedgerEntry.steps; ring AllReduce: 2(p-1))."""
    op, algo = parse_collective(op), parse_algo(algo)
    p, r = group_size, group_rank
    _check(op, algo, p, r, root)
    if p == 1:
        return 0
    v = (r - root) % p
    lg = (p - 1).bit_length()
    if algo is Algo.RING:
        if op in (Collective.BROADCAST, Collective.REDUCE):
            return (v != 0) + (v != p - 1)  # receive from the previous, send to the next
        return 2 * (p - 1) if op is Collective.ALL_REDUCE else p - 1
    if algo is Algo.BINOMIAL:
        one = _binomial_children(v, p) + (v != 0)
        return 2 * one if op is Collective.ALL_REDUCE else one
    if algo is Algo.HALVING_DOUBLING:
        return 2 * lg if op is Collective.ALL_REDUCE else lg
    if algo in (Algo.RECURSIVE_DOUBLING, Algo.DISSEMINATION):
        return lg
    if op is Collective.ALL_TO_ALL:
        return p - 1
    return 1 if v in (0, 1) else 0  # send_recv

