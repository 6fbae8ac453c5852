"""Properties of the cost model over the shipped presets (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from modelplan.comm.clusters import load_cluster
from modelplan.comm.cost import TUNED_ALGOS, TUNED_OPS, collective_time_s, valid_algos
from modelplan.comm.ops import Collective
from modelplan.comm.topology import cluster_links

PRESETS = ["dgx-1v", "dgx-a100", "dgx-h100", "dgx-b200", "mi300x-node"]
LINKS = {name: cluster_links(load_cluster(name)) for name in PRESETS}

clusters = st.sampled_from(PRESETS)
ops = st.sampled_from(list(Collective))
sizes = st.integers(min_value=0, max_value=2**36)
node_sizes = st.sampled_from([1, 2, 4, 8])  # ranks of the group per node (divides 8)
node_counts = st.integers(min_value=1, max_value=64)


@settings(max_examples=300, deadline=None)
@given(clusters, ops, sizes, sizes, node_sizes, node_counts)
def test_time_is_monotone_in_size(name, op, n1, n2, g, k):
    """A bigger message never takes less time, under every valid algorithm and under auto."""
    p = g * k
    if p < 2:
        return
    lo, hi = sorted((n1, n2))
    for algo in valid_algos(op, p, g, LINKS[name]) + ["auto", "nccl"]:
        assert collective_time_s(op, lo, p, g, LINKS[name], algo) <= collective_time_s(op, hi, p, g, LINKS[name], algo)


# Not mi300x-node: there one xGMI link (64 GB/s x 0.698) is slower than a 400G NIC (50 x 0.94),
# so a GPU pair really does talk faster through the network than over the mesh.
switched = st.sampled_from([name for name in PRESETS if name != "mi300x-node"])


@settings(max_examples=300, deadline=None)
@given(switched, ops, sizes, st.sampled_from([2, 4, 8]), st.integers(min_value=1, max_value=16))
def test_spreading_over_more_nodes_never_helps(name, op, n, g, k):
    """The same group of p ranks placed g/2 per node (twice the nodes) is never faster, for
    auto, nccl and every algorithm valid in both placements."""
    p = g * k
    if p < 2:
        return
    links = LINKS[name]
    packed, spread = set(valid_algos(op, p, g, links)), set(valid_algos(op, p, g // 2, links))
    for algo in sorted(packed & spread) + ["auto", "nccl"]:
        t_packed = collective_time_s(op, n, p, g, links, algo)
        t_spread = collective_time_s(op, n, p, g // 2, links, algo)
        assert t_spread >= t_packed * (1 - 1e-12), algo


@settings(max_examples=300, deadline=None)
@given(clusters, ops, sizes, node_sizes, node_counts)
def test_auto_is_never_slower_than_any_algorithm(name, op, n, g, k):
    """auto returns the fastest valid algorithm: no single algorithm beats it; on an NVIDIA
    cluster only among the algorithms NCCL runs (ring, tree, nvls, pat), as NCCL picks."""
    p = g * k
    if p < 2:
        return
    links = LINKS[name]
    t_auto = collective_time_s(op, n, p, g, links, "auto")
    for algo in valid_algos(op, p, g, links):
        if links.nccl_arch and op in TUNED_OPS and algo not in TUNED_ALGOS:
            continue
        assert t_auto <= collective_time_s(op, n, p, g, links, algo) * (1 + 1e-12)
