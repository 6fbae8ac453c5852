"""The model against published nccl-tests bus bandwidths (benchmarks/published_busbw.toml,
collected in shared/reference/comm_hw.md §1.2 from nccl-tests/NCCL issues and stas00/ml-engineering).

Presets take their NVLink efficiency from NCCL's topology constants and their NIC efficiency
from per-NIC measurements (nccl-tests#290, #267), not from these rows, so the check can fail.
"""

import tomllib
from pathlib import Path

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.comm.cost import collective_cost
from modelplan.comm.sizes import parse_size

ROWS = tomllib.loads(
    (Path(__file__).resolve().parents[1] / "benchmarks" / "published_busbw.toml").read_text()
)["row"]
CHECKED = [r for r in ROWS if r["check"]]
TOLERANCE = 0.15


# a row's overrides of the preset's inter-node link (fewer NICs, EFA's protocols and plugin latency)
ROW_INTER = {"inter_bandwidth_gbps": "bandwidth_gbps", "inter_protocols": "nccl_protocols",
             "inter_net_latency_us": "nccl_net_latency_us"}


def _busbw(row: dict, algo: str) -> float:
    cluster = load_cluster(row["cluster"])
    update = {field: row[key] for key, field in ROW_INTER.items() if key in row}
    if update:
        cluster = cluster.model_copy(update={"inter": cluster.inter.model_copy(update=update)})
    return collective_cost(row["op"], parse_size(row["size"]), row["ranks"], row.get("ranks_per_node"),
                           cluster, algo).busbw_gbps


def test_harness_terms_are_fitted_on_in_sample_rows_only():
    """Every `fit_harness` row is marked in-sample, so the out-of-sample rows test the fitted
    per-call terms (benchmarks/bench_comm_busbw.py harness_terms)."""
    fitting = [r for r in ROWS if r.get("fit_harness")]
    assert fitting and all(r.get("sample") == "in" for r in fitting)
    assert {r.get("harness", "nccl-tests") for r in fitting} == {"nccl-tests", "torch-blocking"}


def test_efa_rows_carry_the_aws_plugin_latency():
    """The rows measured over AWS EFA (p5en, p6-b200) carry aws-ofi-nccl's reported net latency,
    35 us (aws/aws-ofi-nccl src/platform-aws.cpp, platform entry "p5en/p6-b200")."""
    efa = [r for r in ROWS if r["label"].startswith(("4 nodes x 8 B200", "4 nodes x 8 H200 (p5en"))]
    assert len(efa) == 8 and {r.get("inter_net_latency_us") for r in efa} == {35.0}


def test_the_issue_rows_are_present():
    """DGX A100 intra 232.5 and inter 192, H100/H200 ~367, B200 682, 4-node B200 382 are checked."""
    published = {(r["cluster"], r["ranks"], r["busbw_gbps"]) for r in CHECKED}
    for key in [("dgx-a100", 8, 232.5), ("dgx-a100", 16, 192.0), ("dgx-h200", 8, 367.4),
                ("dgx-b200", 8, 682.0), ("dgx-b200", 32, 381.8)]:
        assert key in published


@pytest.mark.parametrize("row", CHECKED, ids=lambda r: f"{r['label']} {r['size']}")
def test_nccl_algorithms_match_published_busbw(row):
    """Restricted to what NCCL runs (ring/tree/NVLS), or to the row's pinned algorithm (ring for
    measurements with NVLS off), large-message busbw is within 15%."""
    assert _busbw(row, row.get("algo", "nccl")) == pytest.approx(row["busbw_gbps"], rel=TOLERANCE)


def test_the_nvls_rows_are_checked_and_unpinned():
    """The NVLS rows of comm_hw.md §1.2 (8xH100 480, 8xH200 481.2, 8xB200 846) are checked and
    priced with NCCL's own choice, not a pinned algorithm."""
    nvls = {(r["cluster"], r["busbw_gbps"]) for r in CHECKED if "NVLS" in r["label"] and "algo" not in r}
    assert nvls == {("dgx-h100", 480.0), ("dgx-h200", 481.2), ("dgx-b200", 846.0)}


@pytest.mark.parametrize(
    "row", [r for r in CHECKED if "inter_bandwidth_gbps" not in r], ids=lambda r: f"{r['label']} {r['size']}"
)
def test_auto_matches_published_busbw(row):
    """auto (any modelled algorithm, or the row's pinned one) is within 15% of the shipped presets'
    measurements too."""
    assert _busbw(row, row.get("algo", "auto")) == pytest.approx(row["busbw_gbps"], rel=TOLERANCE)


def _bench():
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_comm_busbw.py"
    spec = importlib.util.spec_from_file_location("bench_comm_busbw", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_harness_term_is_the_mean_gap_of_its_fit_rows():
    """Two in-sample rows measured 10 us and 30 us slower than the model fit a 20 us term: busbw
    back-solved from time = model + gap (size x 2(p-1)/p / busbw, nccl-tests PERFORMANCE.md)."""
    bench = _bench()
    rows = []
    for gap_s in (10e-6, 30e-6):
        row = {"label": "t", "cluster": "dgx-h100", "op": "all_reduce", "ranks": 8, "size": "1M",
               "busbw_gbps": 1.0, "sample": "in", "fit_harness": True, "harness": "h"}
        model_s = bench.model_cost(row).time_s
        row["busbw_gbps"] = 2**20 * 2 * 7 / 8 / (model_s + gap_s) / 1e9
        rows.append(row)
    (term_s, n), = bench.harness_terms(rows).values()
    assert (term_s, n) == (pytest.approx(20e-6), 2)


def test_a_harness_fit_row_must_be_in_sample():
    bench = _bench()
    row = {"label": "t", "cluster": "dgx-h100", "op": "all_reduce", "ranks": 8, "size": "1M",
           "busbw_gbps": 1.0, "sample": "out", "fit_harness": True}
    with pytest.raises(SystemExit, match="fit_harness needs sample"):
        bench.harness_terms([row])


def test_planner_collectives_have_published_rows():
    """AllReduce, AllGather, ReduceScatter, SendRecv and AllToAll each have >= 2 published
    measurements in the table (outliers and unmodelled setups aside); Broadcast and Barrier are
    checked by the rules below and in test_comm_alphabeta.py (no measured row on a modelled preset
    was found)."""
    kept = [r for r in ROWS if not (r.get("outlier") or r.get("unmodelled"))]
    for op in ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all"):
        assert sum(r["op"] == op for r in kept) >= 2, op


def test_a_rows_ranks_per_node_places_the_group():
    """A 2-rack GB200 NVL72 AlltoAll of 2 x 64 GPUs (`ranks_per_node = 64`): half of each GPU's
    bytes cross its one 400 Gb/s NIC (47 GB/s, nccl-tests#290), so busbw = 2 x 47 x 127/128 =
    93.3 GB/s (nccl-tests#130: N/(N-1) x the per-GPU network rate; busbw = algbw (p-1)/p). Filling
    the 72-GPU domain first instead (72 + 56) sends 56/128 of the bytes out: 47 x 128/56 x 127/128
    = 106.6 GB/s, so the key must reach the model."""
    bench = _bench()
    row = {"label": "t", "cluster": "gb200-nvl72", "op": "all_to_all", "ranks": 128, "size": "8G",
           "busbw_gbps": 1.0}
    filled = bench.model_cost(row)
    placed = bench.model_cost(row | {"ranks_per_node": 64})
    assert (placed.nodes, placed.ranks_per_node) == (2, 64)
    assert placed.busbw_gbps == pytest.approx(2 * 47.0 * 127 / 128, rel=2e-3)
    assert filled.busbw_gbps == pytest.approx(47.0 * 128 / 56 * 127 / 128, rel=2e-3)


def test_unmodelled_rows_name_their_reason_and_are_never_checked():
    """A row the model cannot represent says why and stays out of the checks (bench_comm_busbw.py
    band_summary leaves it out too)."""
    for row in ROWS:
        if "unmodelled" in row:
            assert row["unmodelled"].strip() and not row["check"]


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_all_to_all_across_nodes_follows_nccls_one_nic_rule(nodes):
    """NCCL maintainer (NVIDIA/nccl-tests#130, #267): AllToAll cannot aggregate a node's NICs, so at
    large sizes busbw = N/(N-1) x the network bandwidth per GPU over N nodes (2 nodes: 2x). On DGX
    H100 (one 400G NIC per GPU at 47 GB/s, nccl-tests#290) that is 94 / 62.7 / 53.7 GB/s; the model's
    direct AllToAll gives be (p-1)/(p-g), within 10 %."""
    busbw = collective_cost("all_to_all", 2**32, 8 * nodes, 8, load_cluster("dgx-h100")).busbw_gbps
    assert busbw == pytest.approx(47.0 * nodes / (nodes - 1), rel=0.10)
