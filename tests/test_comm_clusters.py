"""Presets pinned to published figures, and loading clusters from names and files."""

import pytest

from modelplan.comm.clusters import load_accelerator, load_cluster
from modelplan.comm.cost import collective_cost
from modelplan.errors import PresetNotFound, SpecError
from modelplan.presets import preset_names

CLUSTERS = ["dgx-1v", "dgx-a100", "dgx-a100-40gb", "dgx-h100", "dgx-h200", "dgx-b200", "mi300x-node"]
ACCELERATORS = ["v100", "a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "mi300x"]


def test_all_presets_shipped():
    """Every accelerator and cluster preset the issue asks for exists."""
    assert set(ACCELERATORS) <= set(preset_names("accelerators"))
    assert set(CLUSTERS) <= set(preset_names("clusters"))


@pytest.mark.parametrize("name", CLUSTERS)
def test_cluster_presets_load_and_cite(name):
    """Each cluster preset validates and cites its source, as do its links."""
    c = load_cluster(name)
    assert c.source and c.intra.source and c.inter.source and c.accelerator.source


@pytest.mark.parametrize("name, bf16, memory_gb, hbm_tbps", [
    ("a100-80gb", 312.0, 80, 2.039),   # NVIDIA A100 datasheet (dense), via glennklockwood.com
    ("a100-40gb", 312.0, 40, 1.555),
    ("h100-sxm", 989.4, 80, 3.35),     # H100 SXM5 dense BF16 (the 1979 headline is sparse)
    ("h200", 989.0, 141, 4.8),
    ("b200", 2250.0, 180, 8.0),
    ("mi300x", 1307.4, 192, 5.3),      # ROCm MI300X docs
])
def test_accelerator_presets_match_datasheets(name, bf16, memory_gb, hbm_tbps):
    """Dense BF16 peak, memory and bandwidth as published (comm_hw.md §4.1)."""
    a = load_accelerator(name)
    assert (a.peak_tflops["bf16"], a.memory_gb, a.memory_bw_tbps) == (bf16, memory_gb, hbm_tbps)


def test_v100_has_fp16_not_bf16():
    """V100 has no BF16 tensor cores: 125 TFLOP/s FP16 only (NVIDIA tensor-core post)."""
    a = load_accelerator("v100")
    assert "bf16" not in a.peak_tflops and a.peak_tflops["fp16"] == 125.0


def test_a100_matmul_efficiency_is_mamf_over_peak():
    """A100 MAMF 271.2 of 312 TFLOP/s (stas00/ml-engineering) = 0.869."""
    assert load_accelerator("a100-80gb").matmul_efficiency == pytest.approx(271.2 / 312, abs=1e-3)


@pytest.mark.parametrize("name, nvlink_busbw", [
    ("dgx-a100", 12 * 20.0),   # NCCL topo.h: 12 Ampere NVLinks x 20 GB/s
    ("dgx-h100", 18 * 20.6),   # 18 Hopper NVLinks x 20.6 GB/s
    ("dgx-b200", 18 * 40.1),   # 18 Blackwell NVLinks x 40.1 GB/s
    ("dgx-1v", 6 * 20.0),      # 6 Volta NVLinks x 20 GB/s
])
def test_nvlink_efficiency_from_nccl_topology_constants(name, nvlink_busbw):
    """Achievable NVLink bandwidth = NCCL's per-link constant x link count."""
    c = load_cluster(name)
    assert c.intra.bandwidth_gbps * c.intra.efficiency == pytest.approx(nvlink_busbw, rel=2e-3)


def test_dgx_a100_nics():
    """DGX A100: 8 x HDR 200 Gb/s for 8 GPUs = 25 GB/s per GPU (NVIDIA/nccl#812)."""
    assert load_cluster("dgx-a100").inter.bandwidth_gbps == 25.0


def test_cluster_file_names_accelerator(tmp_path):
    """A cluster TOML may name its accelerator preset."""
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\naccelerator = "h100-sxm"\ngpus_per_node = 4\nnodes = 2\n'
                 '[intra]\nname = "nvl"\nbandwidth_gbps = 450\nlatency_us = 3\n'
                 '[inter]\nname = "ib"\nbandwidth_gbps = 50\nlatency_us = 10\n')
    c = load_cluster(str(f))
    assert (c.accelerator.name, c.gpus_per_node, c.max_gpus) == ("H100-SXM5-80GB", 4, 8)


def test_cluster_file_embeds_accelerator(tmp_path):
    """...or embed it as a table."""
    f = tmp_path / "emb.toml"
    f.write_text('name = "emb"\ngpus_per_node = 2\n'
                 '[accelerator]\nname = "x"\nmemory_gb = 16\nmemory_bw_tbps = 1\n'
                 '[accelerator.peak_tflops]\nbf16 = 100\n'
                 '[intra]\nname = "a"\nbandwidth_gbps = 100\nlatency_us = 1\n'
                 '[inter]\nname = "b"\nbandwidth_gbps = 10\nlatency_us = 5\n')
    assert load_cluster(str(f)).accelerator.peak_tflops == {"bf16": 100.0}


def test_calibrated_profile_extends_preset_and_overrides_collective(tmp_path):
    """A calibrate profile: extends dgx-h100 and adds a fitted inter-node all_reduce; auto then
    uses alpha + n * 2(p-1)/p / busbw: 50 us + 1e9 * 1.875 / 100e9 s = 18.8 ms for p=16."""
    f = tmp_path / "profile.toml"
    f.write_text('extends = "dgx-h100"\nname = "my-h100"\n'
                 '[[collective_fits]]\nop = "all_reduce"\nscope = "inter"\n'
                 'alpha_us = 50.0\nbusbw_gbps = 100.0\nsource = "modelplan calibrate"\n')
    c = load_cluster(str(f))
    assert c.intra.bandwidth_gbps == 450.0  # inherited
    cost = collective_cost("all_reduce", 10**9, 16, 8, c)
    assert cost.algo.value == "fitted"
    assert cost.time_s == pytest.approx(50e-6 + 1e9 * 1.875 / 100e9)


def test_fit_applies_only_to_its_scope(tmp_path):
    """An inter-node fit leaves intra-node groups to the analytic model."""
    f = tmp_path / "profile.toml"
    f.write_text('extends = "dgx-h100"\n[[collective_fits]]\nop = "all_reduce"\nscope = "inter"\n'
                 'alpha_us = 50.0\nbusbw_gbps = 100.0\n')
    assert collective_cost("all_reduce", 10**9, 8, 8, load_cluster(str(f))).algo.value != "fitted"


def test_fit_for_exact_group_size_wins(tmp_path):
    """A fit measured at ranks=16 beats the size-independent one for a group of 16."""
    f = tmp_path / "profile.toml"
    f.write_text('extends = "dgx-h100"\n'
                 '[[collective_fits]]\nop = "all_gather"\nscope = "inter"\nalpha_us = 0\nbusbw_gbps = 100\n'
                 '[[collective_fits]]\nop = "all_gather"\nscope = "inter"\nranks = 16\nalpha_us = 0\nbusbw_gbps = 50\n')
    cost = collective_cost("all_gather", 16 * 10**9, 16, 8, load_cluster(str(f)))
    assert cost.busbw_gbps == pytest.approx(50.0)


def test_forced_fitted_without_fit():
    """Asking for the fitted model on a cluster without fits is a one-line error."""
    with pytest.raises(SpecError, match=r"cluster 'dgx-h100' has no fitted all_reduce for intra-node groups"):
        collective_cost("all_reduce", 1024, 8, 8, load_cluster("dgx-h100"), algo="fitted")


def test_unknown_preset_suggests_close_names():
    """A misspelt preset gets a suggestion."""
    with pytest.raises(PresetNotFound, match=r"unknown cluster preset 'dgx-h10'.*did you mean.*dgx-h100"):
        load_cluster("dgx-h10")


def test_missing_file():
    """A path that does not exist is named."""
    with pytest.raises(SpecError, match=r"nope\.toml: no such file"):
        load_cluster("nope.toml")


def test_bad_field_is_one_line(tmp_path):
    """A negative bandwidth is reported with its field path."""
    f = tmp_path / "bad.toml"
    f.write_text('extends = "dgx-a100"\n[inter]\nbandwidth_gbps = -1\n')
    with pytest.raises(SpecError) as info:
        load_cluster(str(f))
    assert "inter.bandwidth_gbps" in str(info.value) and "\n" not in str(info.value)


def test_duplicate_fit_rejected(tmp_path):
    """Two fits for the same op, scope and size are ambiguous."""
    f = tmp_path / "dup.toml"
    fit = '[[collective_fits]]\nop = "all_reduce"\nscope = "intra"\nalpha_us = 1\nbusbw_gbps = 1\n'
    f.write_text('extends = "dgx-a100"\n' + fit + fit)
    with pytest.raises(SpecError, match="two fits for op 'all_reduce', scope 'intra'"):
        load_cluster(str(f))


def test_fit_op_names_match_collectives():
    """The spec's CollectiveName literal lists exactly the Collective enum's values."""
    from typing import get_args

    from modelplan.comm.ops import Collective
    from modelplan.specs.hardware import CollectiveName

    assert set(get_args(CollectiveName)) == {c.value for c in Collective}
