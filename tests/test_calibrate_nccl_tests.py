"""`modelplan calibrate --from`: nccl-tests output read back, fitted and written as a profile.

The outputs are written here in nccl-tests' layout (src/common.cu: the `# Rank` lines, the column
header, one row per size ending in the out-of-place and in-place time/algbw/busbw/#wrong groups)
from a known line, time_us = alpha + size * busbw_factor / busbw with nccl-tests' busbw factors
(doc/PERFORMANCE.md: AllReduce 2(n-1)/n, AllGather (n-1)/n); the fit must give that line back,
and `comm` over the profile must price a size with it.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.ops import Collective
from modelplan.errors import ModelplanError
from modelplan.execute.calibrate_nccl_tests import read_nccl_tests

runner = CliRunner()


def nccl_tests_text(op_line: str | None, ranks: int, hosts: int, alpha_us: float, busbw_gbps: float,
                    factor: float, *, root_column: bool = True, prefix: str = "",
                    version: str | None = "2.21.5+cuda12.4") -> str:
    """An nccl-tests output whose out-of-place times follow alpha + size * factor / busbw."""
    lines = [f"# Collective test starting: {op_line}"] if op_line else []
    lines += ["# nThread 1 nGpus 1 minBytes 1024 maxBytes 1073741824 step: 4(factor) warmup "
              "iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    per_host = ranks // hosts
    lines += [f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on    node-{r // per_host:02d} device "
              f"{r % per_host:2d} [0x{r:02x}] NVIDIA H100 80GB HBM3" for r in range(ranks)]
    if version:
        lines.append(f"node-00:4000:4000 [0] NCCL INFO NCCL version {version}")
    lines += ["#", "#       size         count      type   redop" + ("    root" if root_column else "")
              + "     time   algbw   busbw #wrong     time   algbw   busbw #wrong"]
    size = 1024
    while size <= 2**30:
        t = alpha_us + size * factor / (busbw_gbps * 1e3)  # us: GB/s = 1e3 B/us
        alg = size / t / 1e3
        root = "      -1" if root_column else ""
        lines.append(f"{size:>12} {size // 4:>13}     float     sum{root} {t:10.2f} {alg:7.2f} "
                     f"{alg * factor:7.2f}    N/A {t * 1.01:10.2f} {alg:7.2f} {alg * factor:7.2f}    N/A")
        size *= 4
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 100.0", "#"]
    return "\n".join(prefix + line for line in lines) + "\n"


def test_fit_gives_back_the_line_and_comm_prices_with_it(tmp_path):
    # 8 ranks on one host, alpha 20 us, busbw 300 GB/s, AllReduce factor 2 * 7 / 8 = 1.75
    src = tmp_path / "out.txt"
    src.write_text(nccl_tests_text("all_reduce_perf", 8, 1, 20.0, 300.0, 1.75))
    profile = tmp_path / "profile.toml"
    result = runner.invoke(app, ["calibrate", "--from", str(src), "--extends", "dgx-h100", "-o",
                                 str(profile), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["world_size"] == 8 and doc["scope"] == "intra" and doc["library"] == "NCCL 2.21.5+cuda12.4"
    large = [f for f in doc["fits"] if f["min_bytes"] == 2**20][0]
    assert large["alpha_us"] == pytest.approx(20.0, rel=1e-3)
    assert large["bandwidth_gbps"] == pytest.approx(300.0, rel=1e-3)
    result = runner.invoke(app, ["comm", "all_reduce", "-n", "8", "-c", str(profile), "-s", "1G", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)["rows"][0]
    # 20 us + 2^30 B * 1.75 / 300e9 B/s = 6283.5 us
    assert row["algo"] == "fitted"
    assert row["time_us"] == pytest.approx(20 + 2**30 * 1.75 / 300e3, rel=1e-3)
    table = runner.invoke(app, ["comm", "all_reduce", "-n", "8", "-c", str(profile), "-s", "1G"])
    assert "rows marked 'fitted': the cluster's measured collective_fits" in table.output, table.output
    assert "nccl-tests (out.txt), 8 ranks on 1 host" in table.output


def test_old_layout_mpi_prefix_two_hosts_and_file_name():
    # nccl-tests before 2.10 print no root column; Open MPI --tag-output prefixes each line; 16
    # ranks over 2 hosts is an inter-node group; the collective comes from the file name
    text = nccl_tests_text(None, 16, 2, 40.0, 45.0, 15 / 16, root_column=False,
                           prefix="[1,0]<stdout>:", version="2.18.3")
    run = read_nccl_tests(text, "t", "all_gather_perf_2nodes.log")
    assert (run.op, run.ranks, run.scope, run.library) == (Collective.ALL_GATHER, 16, "inter", "NCCL 2.18.3")
    assert len(run.measurements) == 11 and run.measurements[0].size_bytes == 1024
    # out-of-place time of 1 GiB: 40 + 2^30 * (15/16) / 45e3 us (not the in-place column, 1 % slower)
    assert run.measurements[-1].time_s == pytest.approx((40 + 2**30 * 15 / 16 / 45e3) * 1e-6, rel=1e-5)


def test_releases_before_group_and_the_library_code():
    """Rank lines before nccl-tests 2.11 carry no Group field (`#   Rank  0 Pid 71327 on host
    device 0 [0x1a] Tesla V100-SXM3-32GB`); 2.14 on print `nccl-library=NNNNN`, NCCL_VERSION_CODE
    major*10000 + minor*100 + patch (nccl.h), read when no `NCCL version` line is there:
    23003 -> 2.30.3."""
    text = nccl_tests_text("all_reduce_perf", 4, 1, 20, 300, 1.5, version=None).replace(" Group  0", "")
    run = read_nccl_tests(text, "t")
    assert (run.ranks, run.library) == (4, "NCCL (version not printed)")
    run = read_nccl_tests("# nccl-tests version 2.18.3 nccl-headers=23003 nccl-library=23003\n" + text, "t")
    assert run.library == "NCCL 2.30.3"


@pytest.mark.parametrize("text, name, op, message", [
    (nccl_tests_text("all_reduce_perf", 8, 1, 20, 300, 1.75) * 2, "x.txt", None, "holds 2 nccl-tests runs"),
    (nccl_tests_text("all_reduce_perf", 1, 1, 20, 300, 0.0), "x.txt", None, "1 '#  Rank"),
    (nccl_tests_text(None, 8, 1, 20, 300, 1.75), "results.txt", None, "name it with --op"),
    (nccl_tests_text("all_reduce_perf", 8, 1, 20, 300, 1.75), "x.txt", Collective.ALL_GATHER, "contradicts"),
    (nccl_tests_text("hypercube_perf", 8, 1, 20, 300, 1.75), "x.txt", None, "hypercube_perf"),
    ("# nThread 1\n", "all_reduce.txt", None, "no nccl-tests data row"),
    (nccl_tests_text("all_reduce_perf", 8, 1, 20, 300, 1.75).replace("    20.01", "      nan"),
     "x.txt", None, "out-of-place time"),
])
def test_bad_outputs_are_one_line_errors(text, name, op, message):
    with pytest.raises(ModelplanError, match=message) as exc:
        read_nccl_tests(text, "--from x", name, op)
    assert "\n" not in str(exc.value)


def test_cli_refusals(tmp_path):
    a = tmp_path / "all_reduce_perf.txt"
    a.write_text(nccl_tests_text("all_reduce_perf", 8, 1, 20, 300, 1.75))
    b = tmp_path / "all_gather_perf.txt"
    b.write_text(nccl_tests_text("all_gather_perf", 16, 2, 20, 300, 15 / 16))
    for args, message in [
        (["--from", str(a), "-b", "1M"], "--min-size measures this machine"),
        (["--from", str(a), "--np", "8"], "--np measures this machine"),
        (["--from", str(a), "--from", str(b)], "one profile holds one group size"),
        (["--from", str(a), "--from", str(a)], "a second all_reduce output"),
        (["--from", str(tmp_path / "missing.txt")], "no such file"),
    ]:
        result = runner.invoke(app, ["calibrate", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and "Traceback" not in result.output, result.output
