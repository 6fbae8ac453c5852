"""Every accelerator and cluster preset loads, cites its source and plans; the hardware added for
infrastructure choices is pinned to its datasheet figures (each row names the datasheet)."""

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import load_accelerator, load_cluster
from modelplan.comm.cost import collective_cost
from modelplan.presets import load_preset, preset_names
from modelplan.specs.hardware import Accelerator

NEW_ACCELERATORS = ["h100-pcie", "h100-nvl", "h800", "h20", "gh200", "gb200", "b300", "gb300", "l40s",
                    "a800", "mi250x", "mi325x", "mi355x"]
NEW_CLUSTERS = ["dgx-h800", "hgx-h20", "dgx-b300", "gb200-nvl72", "gb300-nvl72", "mi325x-node", "aws-p4d", "aws-p5",
                "aws-p5en", "aws-p6-b200", "azure-ndv5", "gcp-a3", "gcp-a3-mega"]
DEFAULT_MATMUL_EFFICIENCY = Accelerator.model_fields["matmul_efficiency"].default


def test_new_presets_are_shipped():
    """The accelerators and clusters this hardware list promises exist as presets."""
    assert set(NEW_ACCELERATORS) <= set(preset_names("accelerators"))
    assert set(NEW_CLUSTERS) <= set(preset_names("clusters"))


@pytest.mark.parametrize("name", preset_names("accelerators"))
def test_every_accelerator_preset_loads_and_cites(name):
    """Each accelerator preset validates, cites a source and names its architecture."""
    a = load_accelerator(name)
    assert a.source and a.architecture is not None
    assert a.board_power_w is None or a.power_source


@pytest.mark.parametrize("name", preset_names("clusters"))
def test_every_cluster_preset_loads_and_cites(name):
    """Each cluster preset validates and cites its source, its links' and its accelerator's."""
    c = load_cluster(name)
    assert c.source and c.intra.source and c.inter.source and c.accelerator.source
    assert c.host is None or c.host.source


# name, dense TFLOP/s (bf16, fp8 or None), memory GB, HBM TB/s, board W; the source each row checks
@pytest.mark.parametrize("name, bf16, fp8, memory_gb, hbm_tbps, watts", [
    ("h100-pcie", 756.0, 1513.0, 80, 2.0, 350),     # NVIDIA H100 datasheet, PCIe (1513 / 3026 sparse); PB-11133-001 350 W
    ("h100-nvl", 835.5, 1670.5, 94, 3.9, 400),      # NVIDIA H100 datasheet, NVL (1,671 / 3,341 sparse), 350-400 W
    ("h800", 989.4, 1978.9, 80, 3.35, 700),         # NVIDIA H800 datasheet (1,979 / 3,958 sparse)
    ("h20", 148.0, 296.0, 96, 4.0, 400),            # NVIDIA H20 spec sheet as printed by SemiAnalysis 2023-11
    ("gh200", 989.0, 1979.0, 141, 4.8, 1000),       # NVIDIA GH200 specs via stas00 tables; module 450-1000 W
    ("gb200", 2500.0, 5000.0, 186, 8.0, 1200),      # GB200 NVL72 specs: 13.4 TB, 576 TB/s over 72 GPUs
    ("b300", 2250.0, 4500.0, 288, 8.0, None),       # NVIDIA DGX B300 datasheet via stas00 tables
    ("gb300", 2500.0, 5000.0, 288, 8.0, 1400),      # GB300 NVL72 specs (21 TB over 72); 1.4 kW GPUs
    ("l40s", 362.05, 733.0, 48, 0.864, 350),        # NVIDIA L40S datasheet (733 / 1,466 sparse)
    ("a800", 312.0, None, 80, 2.039, 400),          # NVIDIA A800 datasheet (A100's compute)
    ("mi250x", 191.5, None, 64, 1.6384, 280),       # AMD MI250X specs per OAM / 2 GCDs (383, 128 GB, 560 W)
    ("mi325x", 1307.4, 2614.9, 256, 6.0, 1000),     # AMD MI325X specifications
    ("mi355x", 2516.6, 5033.2, 288, 8.0, 1400),     # AMD MI355X specifications (2.5 / 5.0 PFLOPS)
])
def test_accelerator_figures_match_the_datasheet(name, bf16, fp8, memory_gb, hbm_tbps, watts):
    """Dense BF16 and FP8 peaks, HBM capacity, bandwidth and board power as the datasheet states."""
    a = load_accelerator(name)
    assert (a.peak_tflops["bf16"], a.peak_tflops.get("fp8"), a.memory_gb, a.memory_bw_tbps,
            a.board_power_w) == (bf16, fp8, memory_gb, hbm_tbps, watts)


def test_h800_and_a800_keep_their_parents_compute():
    """H800 and A800 are H100 SXM5 and A100 SXM4 80GB with NVLink cut (NVIDIA H800 / A800
    datasheets): every dense peak, the memory and its bandwidth are the parent's."""
    for child, parent in [("h800", "h100-sxm"), ("a800", "a100-80gb")]:
        c, p = load_accelerator(child), load_accelerator(parent)
        assert (c.peak_tflops, c.memory_gb, c.memory_bw_tbps, c.sm_count) == (
            p.peak_tflops, p.memory_gb, p.memory_bw_tbps, p.sm_count)


def test_mi250x_preset_is_one_gcd():
    """MI250X: 383 TFLOP/s BF16, 128 GB and 220 CUs per OAM (AMD MI250X specifications) are two
    GCDs, each its own device: the preset holds half of each."""
    a = load_accelerator("mi250x")
    assert (2 * a.peak_tflops["bf16"], 2 * a.memory_gb, 2 * a.sm_count) == (383.0, 128, 220)


@pytest.mark.parametrize("name, mamf, peak", [
    ("gh200", 828.6, 989.0),      # stas00/ml-engineering MAMF table (900 W 141 GiB GH200)
    ("gb200", 1822.0, 2500.0),
    ("b300", 1769.0, 2250.0),
    ("mi325x", 784.9, 1307.4),    # TunableOp on, 1000 W
    ("mi355x", 1565.0, 2516.6),   # TunableOp off, ROCm 7.0.2
])
def test_matmul_efficiency_is_measured_mamf_over_peak(name, mamf, peak):
    """Where a MAMF is published the efficiency is MAMF / dense peak (stas00/ml-engineering)."""
    assert load_accelerator(name).matmul_efficiency == pytest.approx(mamf / peak, abs=1e-3)


@pytest.mark.parametrize("name", ["h100-pcie", "h100-nvl", "h20", "gb300", "l40s", "mi250x"])
def test_unmeasured_parts_take_the_documented_default(name):
    """No published MAMF: the preset states no efficiency of its own, so the field default applies
    (Accelerator.matmul_efficiency), and it says so in the file."""
    raw = load_preset("accelerators", name)
    assert "matmul_efficiency" not in raw and "matmul_efficiency_fp8" not in raw
    assert load_accelerator(name).matmul_efficiency == DEFAULT_MATMUL_EFFICIENCY == 0.8


def test_dgx_h800_nvlink_is_400_bidirectional():
    """H800: NVLink 400 GB/s bidirectional (NVIDIA H800 datasheet) = 200 per direction = 8 Hopper
    links, which NCCL drives at 8 x 20.6 GB/s (topo.h); NICs 8 x 400 Gb/s CX7 (arXiv 2505.09343)."""
    c = load_cluster("dgx-h800")
    assert 2 * c.intra.bandwidth_gbps == 400.0
    assert c.intra.bandwidth_gbps * c.intra.efficiency == pytest.approx(8 * 20.6, rel=2e-3)
    assert c.inter.bandwidth_gbps == 400 / 8


def test_dgx_h800_nvls_allreduce_matches_the_measured_215():
    """8x H800 AllReduce measured 215 GB/s busbw (NVIDIA/nccl#1374); the preset's NVLS model
    (164.8 GB/s x 0.85 x 2(p-1)/(p+1)) lands within 5 % without being fitted to it."""
    busbw = collective_cost("all_reduce", 16 * 2**30, 8, 8, load_cluster("dgx-h800"), "nvls").busbw_gbps
    assert busbw == pytest.approx(215.0, rel=0.05)


def test_gb200_nvl72_rack_layout():
    """GB200 NVL72: 4 GPUs per compute tray, 72 on one NVLink domain of 130 TB/s = 72 x 1.8 TB/s
    bidirectional (NVIDIA GB200 NVL72 specifications), one 400 Gb/s CX-7 per GPU (comm_hw.md 4.2)."""
    c = load_cluster("gb200-nvl72")
    assert (c.gpus_per_node, c.domain_gpus) == (4, 72)
    assert 72 * 2 * c.intra.bandwidth_gbps / 1000 == pytest.approx(130, rel=0.01)
    assert c.inter.bandwidth_gbps == 400 / 8


def test_gb300_nvl72_has_800g_nics():
    """GB300 NVL72: ConnectX-8 800 Gb/s per GPU (NVIDIA GB300 NVL72 specifications) = 100 GB/s."""
    c = load_cluster("gb300-nvl72")
    assert (c.domain_gpus, c.inter.bandwidth_gbps, c.accelerator.name) == (72, 800 / 8, "GB300-288GB")


def test_dgx_b300_keeps_b200_nvlink_with_800g_nics():
    """DGX B300: NVLink5 1.8 TB/s per GPU as B200 (900 per direction, 18 x 40.1 GB/s in NCCL topo.h)
    and one 800 Gb/s ConnectX-8 per GPU (NVIDIA DGX B300 datasheet)."""
    c = load_cluster("dgx-b300")
    assert 2 * c.intra.bandwidth_gbps == 1800.0 and c.intra.nvls
    assert c.intra.bandwidth_gbps * c.intra.efficiency == pytest.approx(18 * 40.1, rel=2e-3)
    assert (c.inter.bandwidth_gbps, c.accelerator.name) == (800 / 8, "B300-SXM-288GB")


@pytest.mark.parametrize("name, node_gbps, net_latency_us, protocols", [
    ("aws-p4d", 400, 75.0, ("simple",)),    # AWS P4: 400 Gbps EFA; aws-ofi-nccl platform-aws.cpp 75 us
    ("aws-p5", 3200, 75.0, ("simple",)),    # AWS P5: 3200 Gbps EFAv2
    ("aws-p5en", 3200, 35.0, ("simple",)),  # AWS P5en: 3200 Gbps EFAv3; 35 us
    ("aws-p6-b200", 3200, 35.0, ("simple",)),  # AWS P6-B200: 3200 Gbps EFAv4; 35 us
    ("azure-ndv5", 3200, 0.0, ("ll", "ll128", "simple")),  # Azure ND H100 v5: 8 x 400 Gb/s CX7 IB
    ("gcp-a3", 800, 0.0, ("ll", "ll128", "simple")),       # GCP a3-highgpu-8g: 4 x 200 Gbps GPU NICs
    ("gcp-a3-mega", 1600, 0.0, ("ll", "ll128", "simple")), # GCP a3-megagpu-8g: 8 x 200 Gbps GPU NICs
])
def test_cloud_node_networks_as_published(name, node_gbps, net_latency_us, protocols):
    """Per-GPU NIC share = the instance's published network / 8 GPUs, in GB/s; EFA's plugin latency
    and Simple-only protocol (aws/aws-ofi-nccl#76, #850) where the network is EFA."""
    c = load_cluster(name)
    assert c.inter.bandwidth_gbps == node_gbps / 8 / 8
    assert (c.inter.nccl_net_latency_us, c.inter.nccl_protocols) == (net_latency_us, protocols)


runner = CliRunner()


@pytest.mark.parametrize("name", NEW_CLUSTERS)
def test_plan_runs_on_every_new_cluster(name):
    """`modelplan plan --gpus 16` finds a plan on each new cluster (two 8-GPU nodes, four trays)."""
    result = runner.invoke(app, ["plan", "gpt2", "--gpus", "16", "--cluster", name, "--batch", "64",
                                 "--seq", "1024", "--top", "1"])
    assert result.exit_code == 0, result.output
    assert "Step time" in result.output


def test_plan_puts_tp_across_trays_inside_the_nvl72_domain(tmp_path):
    """TP 8 on gb200-nvl72 spans two 4-GPU trays of one NVLink domain: allowed; the same rack
    declared without the domain (nvlink_domain_gpus = 4, a tray) rejects it (tp must divide 4)."""
    args = ["plan", "llama-2-7b", "--gpus", "16", "--batch", "64", "--seq", "4096", "--tp", "8", "--top", "1"]
    ok = runner.invoke(app, args + ["--cluster", "gb200-nvl72"])
    assert ok.exit_code == 0, ok.output
    trays = tmp_path / "trays.toml"
    trays.write_text('extends = "gb200-nvl72"\nname = "trays"\nnvlink_domain_gpus = 4\n')
    bad = runner.invoke(app, args + ["--cluster", str(trays)])
    assert bad.exit_code != 0
    assert "tp (8) must divide the 4 GPUs of an NVLink domain" in bad.output


@pytest.mark.parametrize("name, mib", [
    ("gb200", 189471),   # nvidia-smi on GB200 trays: "0MiB / 189471MiB"
    ("h800", 81559),     # H100 SXM5 80GB HBM3's NVML total (Modal's table), the same memory
    ("a800", 81920),     # A100 80GB's NVML total (Modal's table), the same memory
])
def test_usable_memory_is_what_nvml_reports(name, mib):
    """The planner's memory budget is the driver's total (MiB = 2**20 bytes), not memory_gb x 1e9."""
    assert load_accelerator(name).memory_capacity_bytes == mib * 2**20


def test_new_switches_carry_nccl_nvls_constants():
    """NVSwitch / NVLink Switch presets flag NVLS with tuning.cc's nvlsEfficiency (Hopper 0.85,
    Blackwell 0.74) and the measured first group size (5 on H200, 6 on B200: comm_hw.md §1.2);
    A100 NVSwitch and AMD xGMI have none."""
    for names, min_ranks, eff in [(["dgx-h800", "hgx-h20", "aws-p5", "aws-p5en", "azure-ndv5", "gcp-a3"], 5, 0.85),
                                  (["dgx-b300", "gb200-nvl72", "gb300-nvl72"], 6, 0.74)]:
        for name in names:
            intra = load_cluster(name).intra
            assert (intra.nvls, intra.nvls_min_ranks, intra.nvls_efficiency) == (True, min_ranks, eff), name
    for name in ["aws-p4d", "mi325x-node"]:
        assert load_cluster(name).intra.nvls is False


@pytest.mark.parametrize("name, nbytes, busbw", [
    ("aws-p5en", 4 * 2**30, 364.9),      # 4 nodes x 8 H200 (p5en, EFA), ring AllReduce 4 GiB
    ("aws-p6-b200", 16 * 2**30, 381.8),  # 4 nodes x 8 B200 (8x400G EFA), AllReduce 16 GiB
])
def test_efa_nodes_match_published_four_node_allreduce(name, nbytes, busbw):
    """The EFA presets, built from instance specs and aws-ofi-nccl's constants only, land within
    5 % of the 4-node AllReduce busbw stas00/ml-engineering measured (comm_hw.md §1.2)."""
    got = collective_cost("all_reduce", nbytes, 32, 8, load_cluster(name)).busbw_gbps
    assert got == pytest.approx(busbw, rel=0.05)


def test_tp_error_on_nvl72_names_the_domain_not_the_tray():
    """tp 16 does not divide the 72 GPUs of gb200-nvl72's NVLink domain (NVIDIA GB200 NVL72
    specifications: 72 GPUs in one NVLink domain, 4 per compute tray): the error counts the domain's
    72 GPUs, not a tray's 4."""
    args = ["plan", "llama-2-7b", "--gpus", "144", "--batch", "256", "--seq", "4096", "--tp", "16", "--top", "1",
            "--cluster", "gb200-nvl72"]
    bad = runner.invoke(app, args)
    assert bad.exit_code != 0
    assert "tp (16) must divide the 72 GPUs of an NVLink domain" in bad.output
    assert "Traceback" not in bad.output
