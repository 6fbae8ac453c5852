"""Alpha-beta time, bytes and steps of every (collective, algorithm) on a two-level cluster.

Message size `n` follows nccl-tests (doc/PERFORMANCE.md, src/*.cu GetBw): AllReduce, Broadcast,
Reduce, SendRecv: the per-rank buffer; AllGather: the whole gathered output; ReduceScatter: the
whole input; AllToAll: the whole per-rank send buffer (p blocks, one to itself).

Each formula reads a `PathLinks` L: p ranks on k nodes, g per node; alpha `ai`/`ae` per
intra/inter-node hop, bytes/s `bi` (a GPU's links), `bi_pair` (one peer), `be` (one NIC) and
`b_ring` (a multi-channel ring's per-rank rate); `call_s` is paid once per call. Reduction
compute (gamma) is left out: NCCL fuses it into the copy and HBM is 5-10x faster than the
links (comm_hw.md §2.3). Recursive algorithms use a node-aware order: recursive halving
pairs ranks inside a node first, recursive doubling pairs across nodes first, so only the
1/g shard crosses nodes (the same volume as the hierarchical scheme, with lg latencies).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from modelplan.comm.ops import Algo, Collective
from modelplan.comm.topology import PathLinks


class Estimate(NamedTuple):
    """One collective under one algorithm (plain floats; the hot path builds only this)."""

    time_s: float
    sent: float
    """Bytes sent by the busiest rank."""
    received: float
    """Bytes received by the busiest rank."""
    steps: int
    """Sequential communication rounds (the critical path)."""
    inter_bytes: float
    """Bytes per rank through its NIC (0 inside one node)."""


def ceil_lg(x: int) -> int:
    """ceil(log2 x) for x >= 1."""
    return (x - 1).bit_length()


def _split(L: PathLinks) -> tuple[int, int]:
    """(intra, inter) rounds of a lg-p recursive algorithm: ceil(lg k) rounds cross nodes."""
    return L.lg_p - L.lg_k, L.lg_k


# ---- AllReduce --------------------------------------------------------------------------


def all_reduce_ring(n: float, L: PathLinks) -> Estimate:
    """Ring RS + ring AG: 2(p-1) steps, 2(p-1)/p*n per rank (Thakur et al. 2005; NCCL)."""
    p, k = L.p, L.k
    inter_steps = 2 * (k - 1)  # NCCL tuning.cc: nInterSteps = 2(nNodes-1) for ring AllReduce
    lat = L.call_s + (2 * (p - 1) - inter_steps) * L.ai + inter_steps * L.ae
    vol = 2 * (p - 1) / p * n
    return Estimate(lat + vol / L.b_ring, vol, vol, 2 * (p - 1), vol / L.g if k > 1 else 0.0)


def all_reduce_tree(n: float, L: PathLinks) -> Estimate:
    """Double binary tree over nodes, chain inside a node: latency 2((g-1)ai + lg k*ae),
    2n per rank (reduce n up, broadcast n down); NCCL tuning.cc Tree latency, comm_hw.md §2.4."""
    r_e = L.lg_k
    lat = L.call_s + 2 * ((L.g - 1) * L.ai + r_e * L.ae)
    vol = 2.0 * n
    return Estimate(lat + vol / L.b_ring, vol, vol, 2 * (L.g - 1 + r_e), vol / L.g if L.k > 1 else 0.0)


def all_reduce_binomial(n: float, L: PathLinks) -> Estimate:
    """Binomial reduce + binomial broadcast: 2 ceil(lg p)(alpha + n beta) (Thakur et al. 2005)."""
    r_i, r_e = _split(L)
    one = r_i * (L.ai + n / L.bi_pair) + r_e * (L.ae + n / L.be)
    rounds = L.lg_p
    return Estimate(L.call_s + 2 * one, rounds * n, rounds * n, 2 * rounds, 2 * r_e * n)


def all_reduce_recursive_doubling(n: float, L: PathLinks) -> Estimate:
    """lg p rounds exchanging the whole vector: lg p (alpha + n beta) (Thakur et al. 2005)."""
    r_i, r_e = _split(L)
    t = L.call_s + r_i * (L.ai + n / L.bi_pair) + r_e * (L.ae + n / L.be)
    rounds = r_i + r_e
    return Estimate(t, rounds * n, rounds * n, rounds, r_e * n)


def all_reduce_halving_doubling(n: float, L: PathLinks) -> Estimate:
    """Rabenseifner: 2 lg p alpha + 2(p-1)/p n beta (Thakur et al. 2005), node-aware order."""
    r_i, r_e = _split(L)
    g, k = L.g, L.k
    intra = (g - 1) / g * n  # halving inside the node first
    inter = (k - 1) / k * n / g  # then across nodes on the 1/g shard
    t = L.call_s + 2 * (r_i * L.ai + r_e * L.ae) + 2 * (intra / L.bi_pair + inter / L.be)
    vol = 2 * (intra + inter)
    return Estimate(t, vol, vol, 2 * (r_i + r_e), 2 * inter)


def all_reduce_hierarchical(n: float, L: PathLinks) -> Estimate:
    """Ring RS in the node, ring AR of n/g across nodes, ring AG in the node (comm_hw.md §2.6):
    2(g-1)ai + 2(k-1)ae + 2(g-1)/g n/bi + 2(k-1)/k (n/g)/be."""
    g, k = L.g, L.k
    intra = 2 * (g - 1) / g * n
    inter = 2 * (k - 1) / k * n / g
    t = L.call_s + 2 * (g - 1) * L.ai + 2 * (k - 1) * L.ae + intra / L.bi + inter / L.be
    return Estimate(t, intra + inter, intra + inter, 2 * (g - 1) + 2 * (k - 1), inter)


def all_reduce_nvls(n: float, L: PathLinks) -> Estimate:
    """NVLink SHARP in one node: each GPU sends its n to the switch, which reduces, and gets n/p
    back (multimem.ld_reduce); then sends n/p, which the switch multicasts, getting n back
    (multimem.st): n(p+1)/p each way per GPU at nvlsEfficiency of the link (comm_hw.md §3.1)."""
    p = L.p
    # busbw = B_intra x nvlsEfficiency x 2(p-1)/(p+1): NCCL tuning.cc nvlsEfficiency (comm_hw.md
    # §3.1) on n(p+1)/p bytes per direction instead of the ring's 2(p-1)/p n
    busbw_Bps = L.b_nvls * 2 * (p - 1) / (p + 1)
    vol = (p + 1) / p * n
    # time = latency + 2(p-1)/p n / busbw; NCCL tuning.cc: NVLS latency, no base latency added
    return Estimate(L.a_nvls + 2 * (p - 1) / p * n / busbw_Bps, vol, vol, 2, 0.0)


# ---- AllGather / ReduceScatter (n = whole gathered output / whole input) -----------------


def gather_ring(n: float, L: PathLinks) -> Estimate:
    """Ring AllGather or ReduceScatter: (p-1) alpha + (p-1)/p n beta (Thakur et al. 2005);
    k-1 of the steps cross nodes (NCCL tuning.cc nInterSteps)."""
    p, k = L.p, L.k
    lat = L.call_s + (p - k) * L.ai + (k - 1) * L.ae
    vol = (p - 1) / p * n
    return Estimate(lat + vol / L.b_ring, vol, vol, p - 1, vol / L.g if k > 1 else 0.0)


def gather_recursive(n: float, L: PathLinks) -> Estimate:
    """Recursive doubling AllGather / recursive halving ReduceScatter: lg p alpha + (p-1)/p n
    beta (Thakur et al. 2005); node-aware, so (k-1)/k n/g crosses nodes and (g-1)/g n stays."""
    r_i, r_e = _split(L)
    g, k = L.g, L.k
    intra = (g - 1) / g * n
    inter = (k - 1) / k * n / g
    t = L.call_s + r_i * L.ai + r_e * L.ae + intra / L.bi_pair + inter / L.be
    return Estimate(t, intra + inter, intra + inter, r_i + r_e, inter)


def gather_hierarchical(n: float, L: PathLinks) -> Estimate:
    """Two-level ring: (k-1) ae + (k-1)/k (n/g)/be + (g-1) ai + (g-1)/g n/bi (comm_hw.md §2.6)."""
    g, k = L.g, L.k
    intra = (g - 1) / g * n
    inter = (k - 1) / k * n / g
    t = L.call_s + (g - 1) * L.ai + (k - 1) * L.ae + intra / L.bi + inter / L.be
    return Estimate(t, intra + inter, intra + inter, (g - 1) + (k - 1), inter)


# ---- Broadcast / Reduce (n = buffer) ------------------------------------------------------


def rooted_ring(n: float, L: PathLinks) -> Estimate:
    """Pipelined chain (NCCL ring Broadcast/Reduce): p-1 hops of latency + n / busbw, bus factor
    1 (NCCL tuning.cc; comm_hw.md §2.4 pipelined chain, large-segment limit)."""
    p, k = L.p, L.k
    lat = L.call_s + (p - k) * L.ai + (k - 1) * L.ae
    return Estimate(lat + n / L.b_ring, n, n, p - 1, n / L.g if k > 1 else 0.0)


def rooted_binomial(n: float, L: PathLinks) -> Estimate:
    """Binomial tree: ceil(lg p)(alpha + n beta) (Thakur et al. 2005); the root's first
    ceil(lg k) rounds go to other nodes, the rest stay inside them."""
    r_i, r_e = _split(L)
    t = L.call_s + r_i * (L.ai + n / L.bi_pair) + r_e * (L.ae + n / L.be)
    rounds = r_i + r_e
    return Estimate(t, rounds * n, n, rounds, r_e * n)


# ---- AllToAll (n = whole per-rank send buffer), SendRecv, Barrier -------------------------


def all_to_all_pairwise(n: float, L: PathLinks) -> Estimate:
    """p-1 rounds of one n/p block each: (p-1) alpha + (p-1)/p n beta (Thakur et al. 2005);
    p-g of the rounds go through the NIC, g-1 stay in the node."""
    p, g = L.p, L.g
    block = n / p
    be = L.be_a2a or L.be  # oversubscribed fabric: comm/fabric.py
    t = L.call_s + (g - 1) * (L.ai + block / L.bi_pair) + (p - g) * (L.ae + block / be)
    vol = (p - 1) * block
    return Estimate(t, vol, vol, p - 1, (p - g) * block)


def all_to_all_direct(n: float, L: PathLinks) -> Estimate:
    """All blocks posted at once: alpha + max((p-g)/p n / B_nic, (g-1)/p n / B_intra); a GPU's
    off-node blocks share its one NIC (nccl-tests#267; comm_hw.md §2.6)."""
    p, g = L.p, L.g
    inter = (p - g) / p * n
    intra = (g - 1) / p * n
    alpha = L.ae if L.k > 1 else L.ai
    t = L.call_s + alpha + max(inter / (L.be_a2a or L.be), intra / L.bi)
    return Estimate(t, inter + intra, inter + intra, 1, inter)


def send_recv_direct(n: float, L: PathLinks) -> Estimate:
    """One message: alpha + n beta over the pair's link (NVLink in a node, one NIC across).

    With p > 2, as nccl-tests' sendrecv, each rank sends n to the next and receives n from the
    previous at once; the slowest pair (one crossing nodes, if any) sets the time."""
    if L.k > 1:
        return Estimate(L.call_s + L.ae + n / L.be, n, n, 1, n)
    return Estimate(L.call_s + L.ai + n / L.bi_pair, n, n, 1, 0.0)


def barrier_dissemination(n: float, L: PathLinks) -> Estimate:
    """ceil(lg p) rounds of empty messages (Hensgen et al. 1988); once the group spans nodes
    every round has a pair crossing a node boundary."""
    rounds = L.lg_p
    alpha = L.ae if L.k > 1 else L.ai
    return Estimate(L.call_s + rounds * alpha, 0.0, 0.0, rounds, 0.0)


Formula = Callable[[float, PathLinks], Estimate]

FORMULAS: dict[Collective, dict[Algo, Formula]] = {
    Collective.ALL_REDUCE: {
        Algo.RING: all_reduce_ring,
        Algo.TREE: all_reduce_tree,
        Algo.HALVING_DOUBLING: all_reduce_halving_doubling,
        Algo.RECURSIVE_DOUBLING: all_reduce_recursive_doubling,
        Algo.BINOMIAL: all_reduce_binomial,
        Algo.HIERARCHICAL: all_reduce_hierarchical,
        Algo.NVLS: all_reduce_nvls,
    },
    Collective.ALL_GATHER: {
        Algo.RING: gather_ring,
        Algo.RECURSIVE_DOUBLING: gather_recursive,
        Algo.HIERARCHICAL: gather_hierarchical,
        Algo.PAT: gather_recursive,  # bytes and lg-p steps; NVIDIA clusters time it by comm.nccl_tuning
    },
    Collective.REDUCE_SCATTER: {
        Algo.RING: gather_ring,
        Algo.HALVING_DOUBLING: gather_recursive,
        Algo.HIERARCHICAL: gather_hierarchical,
        Algo.PAT: gather_recursive,
    },
    Collective.BROADCAST: {Algo.RING: rooted_ring, Algo.BINOMIAL: rooted_binomial},
    Collective.REDUCE: {Algo.RING: rooted_ring, Algo.BINOMIAL: rooted_binomial},
    Collective.ALL_TO_ALL: {Algo.DIRECT: all_to_all_direct, Algo.PAIRWISE: all_to_all_pairwise},
    Collective.SEND_RECV: {Algo.DIRECT: send_recv_direct},
    Collective.BARRIER: {Algo.DISSEMINATION: barrier_dissemination},
}
"""The algorithms each collective supports, in NCCL's order of preference for ties."""

NCCL_ALGOS: dict[Collective, frozenset[Algo]] = {
    Collective.ALL_REDUCE: frozenset({Algo.RING, Algo.TREE, Algo.NVLS}),
    Collective.ALL_GATHER: frozenset({Algo.RING, Algo.PAT}),
    Collective.REDUCE_SCATTER: frozenset({Algo.RING, Algo.PAT}),
    Collective.ALL_TO_ALL: frozenset({Algo.DIRECT}),
    Collective.SEND_RECV: frozenset({Algo.DIRECT}),
    Collective.BARRIER: frozenset({Algo.DISSEMINATION}),
}
"""What NCCL runs (tuning.cc without NVLSTree/CollNet, which are not modelled); ring otherwise.
NVLS is AllReduce only here: NCCL's NVLS AllGather/ReduceScatter are not modelled (measured AG/RS
on 8xH200 stay on ring, comm_hw.md §1.2)."""

POWER_OF_TWO_ONLY = frozenset({Algo.RECURSIVE_DOUBLING, Algo.HALVING_DOUBLING})
"""Algorithms modelled for power-of-two group sizes only."""


def invalid_reason(op: Collective, algo: Algo, p: int, g: int, k: int,
                   nvls_min_ranks: int = 0) -> str | None:
    """Why `algo` cannot run `op` on this group shape, or None when it can.

    nvls_min_ranks: the cluster's fewest ranks for NVLS in one node (0: no NVLS)."""
    table = FORMULAS[op]
    if algo not in table:
        names = ", ".join(a.value for a in table)
        return f"{op.value} has no '{algo.value}' algorithm (one of {names}, auto)"
    if algo in POWER_OF_TWO_ONLY and p & (p - 1):
        return f"{algo.value} needs a power-of-two group size, not {p}"
    if algo is Algo.HIERARCHICAL and (k < 2 or g < 2):
        return f"hierarchical needs >= 2 nodes with >= 2 ranks each, not {k} node(s) x {g}"
    if algo is Algo.PAT and (g != 1 or k < 2):
        return f"pat runs with one rank per node on >= 2 nodes, not {k} node(s) x {g}"
    if algo is Algo.NVLS:
        # NVLSTree (NVLS in each node + a tree across nodes) is not modelled
        if nvls_min_ranks == 0:
            return "nvls needs a node whose intra link has NVLink SHARP (intra.nvls = true)"
        if k > 1:
            return f"nvls runs inside one node; this group spans {k} nodes (NVLSTree is not modelled)"
        if p < nvls_min_ranks:
            return f"nvls needs >= {nvls_min_ranks} ranks (intra.nvls_min_ranks), not {p}"
    return None
