"""NCCL's own table-driven cost model (src/graph/tuning.cc): per (algorithm, protocol) a latency
and an algorithm bandwidth, and NCCL picks the pair of least predicted time for each call.

    time = L + n / algbw     (tuning.cc ncclTopoGetAlgoTime; n in NCCL's nBytes, which is
                              nccl-tests' size for every op this module prices)

Constants are NVIDIA/nccl master (v2.30-era, commit 5067397) as tabulated in
shared/reference/comm_hw.md §3.2. The Simple protocol's bus bandwidth is the cluster's
calibrated ring rate (`PathLinks.b_ring`: NCCL's nChannels x bwIntra / bwInter); LL and LL128
derive from it as tuning.cc does. nChannels is not in a spec: it is taken as busBw / 20 GB/s
(topo.h per-channel NVLink speed of Ampere; the topology search sets nChannels x bw = busBw), and
only enters the per-channel caps and the ring plateau test. Host CPU is assumed Intel x86
(netOverhead 1 us, the Volta llMaxBw row across nodes), as on DGX H100 / B200. Every network hop
(interLat) carries the net plugin's reported latency (`Link.nccl_net_latency_us`: InfiniBand 0,
AWS EFA 35-75 us), twice for Simple, as tuning.cc adds graph latencyInter.

What tuning.cc leaves out and `Choice.fill_s` adds after the choice: the pipeline fill of the
one-node NVLS kernel (comm/nvls_pipeline.py). What this model leaves out (measured against
nccl-tests in benchmarks/bench_comm_busbw.py): per-call launch time, which the nccl-tests and torch harnesses add to each timed call (fitted
there, not here: adding it to the planner made the published-runs bench worse); NCCL's smaller
ring chunks and fewer channels at medium sizes (enqueue.cc calcCollChunking / topoGetAlgoInfo),
which tuning.cc corrects only for trees.
"""

from __future__ import annotations

from math import ceil
from typing import Any, NamedTuple

from modelplan.comm.nvls_pipeline import nvls_concurrent_ops, nvls_fill_bytes
from modelplan.comm.ops import Algo, Collective

PathLinks = Any  # modelplan.comm.topology.PathLinks (which imports this module's nccl_arch)

LL, LL128, SIMPLE = "ll", "ll128", "simple"
PROTOCOLS = (LL, LL128, SIMPLE)
"""NCCL's protocols, in tuning.cc's order (NCCL_PROTO_LL, NCCL_PROTO_LL128, NCCL_PROTO_SIMPLE)."""

VOLTA, AMPERE, HOPPER, BLACKWELL = "volta", "ampere", "hopper", "blackwell"

# tuning.cc baseLat[algo][proto] (us), LL / LL128 / Simple
BASE_LAT_US = {Algo.TREE: (6.8, 14.0, 8.4), Algo.RING: (6.6, 14.0, 8.4), Algo.NVLS: (0.0, 0.0, 0.0),
               "pat": (8.0, 8.0, 8.0)}
# tuning.cc hwLat[NCCL_HW_NVLINK][algo][proto] (us per hop); NVLS only has Simple
NVLINK_LAT_US = {Algo.TREE: (0.6, 1.25, 4.0), Algo.RING: (0.6, 1.9, 3.4), Algo.NVLS: (0.0, 0.0, 25.0),
                 "pat": (0.0, 0.0, 4.0)}
# tuning.cc hwLat[NCCL_HW_PCI][algo][proto] (us per hop)
PCI_LAT_US = {Algo.TREE: (1.0, 1.9, 4.0), Algo.RING: (1.0, 2.5, 5.7), "pat": (0.0, 0.0, 4.0)}
# tuning.cc hwLat[NCCL_HW_NET][algo][proto] (us per hop)
NET_LAT_US = {Algo.TREE: (5.0, 8.5, 14.0), Algo.RING: (2.7, 4.0, 14.0), Algo.NVLS: (0.0, 0.0, 18.0),
              "pat": (0.0, 0.0, 14.0)}
NET_OVERHEAD_US = 1.0  # tuning.cc getNetOverhead: Intel x86 / default 1 us (AMD 2 us), x3 for Simple

# tuning.cc llMaxBws[arch][1 node, 2 nodes, >2 nodes] (GB/s)
LL_MAX_BW = {VOLTA: (39.0, 39.0, 20.4), AMPERE: (87.7, 22.5, 19.0), HOPPER: (141.0, 45.0, 35.0),
             BLACKWELL: (282.0, 90.0, 70.0)}
LL_MAX_BW_MULTINODE = VOLTA  # tuning.cc: across nodes an Intel host reads the Volta row (AMD: Ampere)
# tuning.cc perChMaxRingLL128Bws[arch] (GB/s per channel)
RING_LL128_BW = {VOLTA: 20.0, AMPERE: 20.0, HOPPER: 36.7, BLACKWELL: 40.0}
# tuning.cc perChMaxTreeLL128Bws[arch][1, 2, >2 nodes] (GB/s per channel)
TREE_LL128_BW = {VOLTA: (20.0, 20.0, 20.0), AMPERE: (20.0, 20.0, 20.0), HOPPER: (36.7, 36.7, 29.0),
                 BLACKWELL: (55.6, 31.67, 20.0)}
# tuning.cc perChMaxTreeBws[arch][1, 2, >2 nodes] (GB/s per channel)
TREE_BW = {VOLTA: (26.5, 18.5, 10.0), AMPERE: (24.0, 23.6, 17.8), HOPPER: (38.7, 41.4, 36.0),
           BLACKWELL: (70.0, 42.8, 24.0)}
CHANNEL_GBPS = 20.0  # topo.h SM80_NVLINK_BW: per-channel speed used to count channels (see module doc)
MAX_CHANNELS = 64  # NCCL MAXCHANNELS
LL128_EFF = 0.92  # tuning.cc: ring LL128 busBw x 0.92 (~120/128); tree Simple busBw x 0.92
TREE_LL_EFF = 1 / 3.8  # tuning.cc: tree LL busBw x 1/3.8
TREE_LL128_EFF_1NODE, TREE_LL128_EFF = 7 / 9, 120 / 128  # tuning.cc: tree LL128 one node / nodes
PAT_EFF = 0.75  # tuning.cc: PAT busBw x 0.75
PLATEAU = 1.4  # tuning.cc ncclTopoGetAlgoTime: ring Simple multi-node AllReduce latency x1.4 (sm80+)

# tuning.cc treeCorrectionFactor[proto][log2(nBytes >> 6)], 64 B .. 256 MiB (master: 24 entries;
# ncclTopoGetAlgoTime applies the first 23 to Tree AllReduce, all 24 to NVLSTree on Blackwell x86)
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
TREE_CORRECTION_SIZES = 23  # tuning.cc: Tree AllReduce reads logSize < 23


def nccl_arch(accelerator_name: str) -> str:
    """tuning.cc's architecture row for an NVIDIA accelerator name ('' for others: RCCL, TPU)."""
    name = accelerator_name.strip().upper()
    for prefix, arch in (("GB", BLACKWELL), ("B", BLACKWELL), ("GH", HOPPER), ("H", HOPPER),
                         ("A", AMPERE), ("V", VOLTA)):
        if name.startswith(prefix) and name[len(prefix):len(prefix) + 1].isdigit():
            return arch
    return ""


class Choice(NamedTuple):
    """One (algorithm, protocol) of NCCL's table for one op and group, size-independent parts."""

    algo: Algo
    proto: str
    lat_s: float
    algbw_Bps: float
    """NCCL's algorithm bandwidth (bytes/s): time = lat + n / algbw."""
    plateau_bytes: float
    """From this size the latency is x PLATEAU (ring Simple multi-node AllReduce); inf: never."""
    tree_row: int
    """TREE_CORRECTION row applied to algbw (-1: none)."""
    fill_ops: int = 0
    """NVLS one node: nChannels x nHeads, whose pipeline fill `fill_s` adds (0: none; nvls_pipeline)."""

    def fill_s(self, n: float) -> float:
        """Seconds the kernel's pipeline adds to `time_s` (not part of NCCL's choice: nvls_pipeline)."""
        return nvls_fill_bytes(n, self.fill_ops) / self.algbw_Bps if self.fill_ops else 0.0

    def run_time_s(self, n: float) -> float:
        """Predicted seconds of the call once chosen: tuning.cc's time plus the pipeline fill."""
        return self.time_s(n) + self.fill_s(n)

    def time_s(self, n: float) -> float:
        """Predicted seconds for n bytes (tuning.cc ncclTopoGetAlgoTime, one op per launch). The tree
        correction is a step table, so tuning.cc's time can drop at a table boundary (3 MiB slower
        than 4 MiB); a call is never slower than a larger one of the same algorithm (it could be
        padded), so the lower envelope over the larger table boundaries is taken."""
        t = self._raw_time_s(n)
        if self.tree_row >= 0 and n < 64 << 23:
            # first boundary above n: 64 x 2^j. The m-th one (m >= 3) is > 2^(m-1) n and would need a
            # correction ratio > 4 to be faster; the table's is at most 1 / 0.4, so two suffice
            j = (int(n) >> 6).bit_length()
            for b in range(j, min(j + 2, 24)):
                t = min(t, self._raw_time_s(64 << b))
        return t

    def _raw_time_s(self, n: float) -> float:
        bw = self.algbw_Bps
        if self.tree_row >= 0 and n >= 64:
            log_size = (int(n) >> 6).bit_length() - 1
            if log_size < TREE_CORRECTION_SIZES:
                bw *= TREE_CORRECTION[self.tree_row][log_size]
        lat = self.lat_s * PLATEAU if n >= self.plateau_bytes else self.lat_s
        return lat + n / bw


def _node_index(k: int) -> int:
    return 0 if k == 1 else 1 if k == 2 else 2


def n_channels(busbw_Bps: float) -> int:
    """Channels NCCL would open for this bus bandwidth (module doc: busBw / 20 GB/s)."""
    return max(2, min(MAX_CHANNELS, ceil(busbw_Bps / (CHANNEL_GBPS * 1e9) - 1e-9)))


def net_hop_us(table: dict, algo: Algo | str, i: int, net_lat_us: float) -> float:
    """tuning.cc interLat: hwLat[NET][algo][proto] + the net plugin's latency (graph latencyInter),
    added a second time for Simple ("the flush extra latency")."""
    return table[algo][i] + net_lat_us * (2 if PROTOCOLS[i] == SIMPLE else 1)


def choices(op: Collective, L: PathLinks, arch: str, nvlink: bool = True,
            algos: frozenset[Algo] | None = None, protos: tuple[str, ...] = PROTOCOLS,
            net_lat_us: float = 0.0) -> tuple[Choice, ...]:
    """tuning.cc's (algorithm, protocol) table for `op` on this group, restricted to `algos`
    (None: all NCCL runs) and `protos`. Ring for every reducing/gathering op; tree and NVLS for
    AllReduce; PAT for AllGather / ReduceScatter with one rank per node. `net_lat_us`: the net
    plugin's reported latency (IB 0; AWS EFA 35-75 us), part of every network hop."""
    p, g, k = L.p, L.g, L.k
    ni = _node_index(k)
    bus = L.b_ring / 1e9  # GB/s: Simple ring busBw = nChannels x bw
    nch = n_channels(L.b_ring)
    intra_tab = NVLINK_LAT_US if nvlink else PCI_LAT_US
    ll_max = LL_MAX_BW[arch][0] if k == 1 else LL_MAX_BW[LL_MAX_BW_MULTINODE][ni]
    if op is Collective.ALL_REDUCE:
        nsteps, inter_steps = 2 * (p - 1), 2 * (k - 1)  # tuning.cc nsteps / nInterSteps
    elif op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        nsteps, inter_steps = p - 1, k - 1
    else:  # Broadcast / Reduce: tuning.cc nsteps = nRanks
        nsteps, inter_steps = p, k
    out: list[Choice] = []

    def want(a: Algo | str) -> bool:
        return algos is None or a in algos

    if want(Algo.RING):
        for i, proto in enumerate(PROTOCOLS):
            if proto not in protos:
                continue
            if proto == LL:
                bw = min(ll_max, 0.5 * bus)  # tuning.cc: ring LL min(llMaxBw, busBw / 2)
            elif proto == LL128:
                bw = min(LL128_EFF * bus, nch * RING_LL128_BW[arch])  # tuning.cc ring LL128
            else:
                bw = bus
            base = BASE_LAT_US[Algo.RING][i]
            intra = intra_tab[Algo.RING][i]
            # with one GPU per node tuning.cc reads the tree's network hop latency
            inter = net_hop_us(NET_LAT_US, Algo.TREE if g == 1 else Algo.RING, i, net_lat_us)
            if op in (Collective.BROADCAST, Collective.REDUCE):
                # tuning.cc: base + hwLat[hw] (same channels; hwLat, not interLat: no plugin latency)
                lat = base + (NET_LAT_US[Algo.RING][i] if k > 1 else intra)
            else:
                if k > 1:  # tuning.cc: intra hops pay at least the net overhead (x3 for Simple)
                    intra = max(intra, NET_OVERHEAD_US * (3 if proto == SIMPLE else 1))
                lat = base + (nsteps - inter_steps) * intra + inter_steps * inter
            plateau = (64.0 * nch * p if proto == SIMPLE and k > 1 and op is Collective.ALL_REDUCE
                       else float("inf"))  # tuning.cc: nBytes / (nChannels nRanks) >= 64
            out.append(Choice(Algo.RING, proto, lat * 1e-6, bw * p / nsteps * 1e9, plateau, -1))
    if op is Collective.ALL_REDUCE and want(Algo.TREE):
        tree = min(LL128_EFF * bus, nch * TREE_BW[arch][ni])  # tuning.cc tree AllReduce busBw
        lg_k = k.bit_length() - 1  # tuning.cc log2i(nNodes): floor
        for i, proto in enumerate(PROTOCOLS):
            if proto not in protos:
                continue
            if proto == LL:
                bw = min(tree * TREE_LL_EFF, ll_max)
            elif proto == LL128:
                eff = TREE_LL128_EFF_1NODE if k == 1 else TREE_LL128_EFF
                bw = min(tree * eff, nch * TREE_LL128_BW[arch][ni])
            else:
                bw = tree
            lat = BASE_LAT_US[Algo.TREE][i] + 2 * ((g - 1) * intra_tab[Algo.TREE][i]
                                                   + lg_k * net_hop_us(NET_LAT_US, Algo.TREE, i, net_lat_us))
            out.append(Choice(Algo.TREE, proto, lat * 1e-6, bw * 0.5 * 1e9, float("inf"), i))
    if (op is Collective.ALL_REDUCE and want(Algo.NVLS) and SIMPLE in protos and k == 1
            and L.nvls_min and p >= L.nvls_min):
        # NVLS (Simple only): the cluster's NVLS rate and latency (alphabeta.all_reduce_nvls):
        # busbw = b_nvls 2(p-1)/(p+1), so algbw = busbw p / (2(p-1)) = b_nvls p/(p+1)
        out.append(Choice(Algo.NVLS, SIMPLE, L.a_nvls, L.b_nvls * p / (p + 1), float("inf"), -1,
                          nvls_concurrent_ops(arch, p)))
    if (op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER) and g == 1 and k > 1
            and want("pat") and SIMPLE in protos):
        lg_k = k.bit_length() - 1
        # tuning.cc PAT: base + log2i(nNodes) x interLat / 3.5 + 2.8 x nRanks; busBw x 0.75, Simple only
        # (with one GPU per node interLat reads the tree's network hop)
        lat = BASE_LAT_US["pat"][2] + lg_k * net_hop_us(NET_LAT_US, Algo.TREE, 2, net_lat_us) / 3.5 + 2.8 * p
        out.append(Choice(Algo.PAT, SIMPLE, lat * 1e-6, PAT_EFF * bus * 1e9, float("inf"), -1))
    return tuple(out)
