"""nccl-tests outputs read into calibrate's points (modelplan/execute/nccl_tests_log.py) and
`modelplan calibrate --from-nccl-tests`. Expected values are the logs' own columns and, for the
fit, a log written on an exact line (hand-worked: time = alpha + size x factor / busbw)."""

import tomllib

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import load_cluster
from modelplan.comm.cost import collective_time_s
from modelplan.comm.ops import Collective
from modelplan.errors import ModelplanError
from modelplan.execute.nccl_tests_log import merge_runs, parse_nccl_tests

RUNNER = CliRunner()

# oracle-quickstart/oci-gpu-quickstarts 2631bee nvidia/GB300/README-GB300.md lines 326-343 (3 rows)
A2A_4 = """\
# Collective test starting: alltoall_perf
# nThread 1 nGpus 1 minBytes 524288 maxBytes 17179869184 step: 2(factor) warmup iters: 1 iters: 50 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid 568623 on   GPU-3882 device  0 [0008:06:00] NVIDIA GB300
#  Rank  1 Group  0 Pid 568624 on   GPU-3882 device  1 [0009:06:00] NVIDIA GB300
#  Rank  2 Group  0 Pid 568625 on   GPU-3882 device  2 [0018:06:00] NVIDIA GB300
#  Rank  3 Group  0 Pid 568628 on   GPU-3882 device  3 [0019:06:00] NVIDIA GB300
NCCL version 2.28.7+cuda13.0
#
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
      524288         32768     float    none      -1    14.50   36.15   27.11      0    13.74   38.15   28.61    N/A
     1048576         65536     float    none      -1    16.76   62.56   46.92      0    16.53   63.44   47.58    N/A
 17179869184    1073741824     float    none      -1    20527  836.92  627.69      0    18929  907.60  680.70    N/A
"""

# aws-samples/awsome-distributed-training 88c2e71b micro-benchmarks/nccl-tests/README.md lines
# 152-155 (2 x p4de, 16 ranks): srun's "0: " prefix, no rank lines, no "Collective test" line
AR_P4DE = """\
0:    268435456      67108864     float     sum      -1   7201.7   37.27   69.89      0   7227.9   37.14   69.64      0
0:    536870912     134217728     float     sum      -1    13552   39.62   74.28      0    13548   39.63   74.30      0
0:   1073741824     268435456     float     sum      -1    26217   40.96   76.79      0    26194   40.99   76.86      0
0:   2147483648     536870912     float     sum      -1    51406   41.78   78.33      0    51406   41.77   78.33      0
"""


def test_a_current_log_gives_its_collective_ranks_hosts_and_out_of_place_times():
    run = parse_nccl_tests(A2A_4, "a2a.log")
    assert (run.op, run.ranks, run.hosts, run.library) == (
        Collective.ALL_TO_ALL, 4, frozenset({"GPU-3882"}), "NCCL 2.28.7+cuda13.0")
    # the first time column (out-of-place), not the in-place 13.74 / 16.53 / 18929
    assert [(m.size_bytes, m.count, m.time_s) for m in run.points] == [
        (524288, 32768, pytest.approx(14.50e-6)), (1048576, 65536, pytest.approx(16.76e-6)),
        (17179869184, 1073741824, pytest.approx(20527e-6))]
    assert {m.repeats for m in run.points} == {50}  # the header's iters


def test_a_prefixed_log_without_rank_lines_takes_the_file_name_and_the_busbw_factor():
    """16 ranks from busbw / algbw = 78.33 / 41.78 = 1.875 = 2 (p-1)/p (nccl-tests PERFORMANCE.md)."""
    run = parse_nccl_tests(AR_P4DE, "runs/all_reduce_perf_p4de.log")
    assert (run.op, run.ranks, run.hosts) == (Collective.ALL_REDUCE, 16, frozenset())
    assert run.points[-1].time_s == pytest.approx(51406e-6)
    # reduce_perf inside all_reduce_perf is not a second collective; reduce_perf alone is Reduce
    unnamed = A2A_4.replace("# Collective test starting: alltoall_perf\n", "")
    assert parse_nccl_tests(unnamed, "reduce_perf.txt").op is Collective.REDUCE
    with pytest.raises(ModelplanError, match="reduce's busbw factor does not give the group size"):
        parse_nccl_tests(AR_P4DE, "reduce_perf.txt")


@pytest.mark.parametrize("text,name,message", [
    ("# nothing measured\n", "all_reduce_perf.log", "no nccl-tests result rows"),
    (AR_P4DE, "results.log", "cannot tell the collective"),
    (AR_P4DE + AR_P4DE, "all_reduce_perf.log", "appears twice"),
    # busbw / algbw = 1.7 = 2 (p-1)/p at p = 6.67 ranks
    (AR_P4DE.replace("69.89", "63.36").replace("74.28", "67.35").replace("76.79", "69.63")
     .replace("78.33", "71.03"), "all_reduce_perf.log", "fits no whole group size"),
])
def test_bad_logs_are_refused_with_a_reason(text, name, message):
    with pytest.raises(ModelplanError, match=message):
        parse_nccl_tests(text, name)


def test_runs_of_different_group_sizes_or_two_of_one_collective_are_refused():
    a2a, ar = parse_nccl_tests(A2A_4, "a.log"), parse_nccl_tests(AR_P4DE, "all_reduce_perf.log")
    with pytest.raises(ModelplanError, match="b.log: 4 ranks, but a.log has 16"):
        merge_runs([("a.log", ar), ("b.log", a2a)])
    with pytest.raises(ModelplanError, match="a second all_to_all run"):
        merge_runs([("a.log", a2a), ("b.log", a2a)])


def _line_log(alpha_us: float, busbw_gbps: float) -> str:
    """An 8-rank all_reduce_perf log whose out-of-place times lie on alpha + size x 2(p-1)/p / busbw."""
    rows = []
    for size in (1 << 20, 1 << 24, 1 << 28):
        time_us = alpha_us + size * 2 * 7 / 8 / (busbw_gbps * 1e3)
        algbw = size / time_us / 1e3
        rows.append(f"{size:>12} {size // 4:>12}  float  sum  -1  {time_us:.3f}  {algbw:.3f}  "
                    f"{algbw * 1.75:.3f}  0  {time_us:.3f}  {algbw:.3f}  {algbw * 1.75:.3f}  0")
    ranks = "\n".join(f"#  Rank {r} Group 0 Pid {100 + r} on node-a device {r} [0x00] NVIDIA H100" for r in range(8))
    return "# Collective test starting: all_reduce_perf\n" + ranks + "\n" + "\n".join(rows) + "\n"


def test_calibrate_fits_a_log_on_a_line_exactly_and_comm_prices_with_the_profile(tmp_path):
    """30 us + size x 1.75 / 200 GB/s: the profile's fit is alpha 30 us, busbw 200 GB/s, and
    `comm` on the profile gives 30 + 2^26 x 1.75 / 200e3 = 617.2 us at 64 MiB (not measured)."""
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(_line_log(30.0, 200.0))
    profile = tmp_path / "p.toml"
    result = RUNNER.invoke(app, ["calibrate", "--from-nccl-tests", str(log), "--split", "0",
                                 "--extends", "dgx-h100", "-o", str(profile)])
    assert result.exit_code == 0, result.output
    (fit,) = tomllib.loads(profile.read_text())["collective_fits"]
    assert (fit["op"], fit["scope"], fit["ranks"]) == ("all_reduce", "intra", 8)
    assert (fit["alpha_us"], fit["busbw_gbps"]) == (pytest.approx(30.0, rel=1e-3), pytest.approx(200.0, rel=1e-3))
    t = collective_time_s("all_reduce", 1 << 26, 8, None, load_cluster(str(profile)))
    assert t == pytest.approx((30.0 + (1 << 26) * 1.75 / 200e3) * 1e-6, rel=1e-3)


def test_calibrate_from_logs_refuses_what_it_cannot_place(tmp_path):
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(AR_P4DE)
    result = RUNNER.invoke(app, ["calibrate", "--from-nccl-tests", str(log)])
    assert result.exit_code != 0 and "say --scope intra or --scope inter" in result.output
    result = RUNNER.invoke(app, ["calibrate", "--from-nccl-tests", str(log), "--scope", "both"])
    assert result.exit_code != 0 and "--scope ('both') must be intra or inter" in result.output
    result = RUNNER.invoke(app, ["calibrate", "--from-nccl-tests", str(tmp_path / "missing.log")])
    assert result.exit_code != 0 and "no such file" in result.output and "Traceback" not in result.output
    assert RUNNER.invoke(app, ["calibrate", "--from-nccl-tests", str(log), "--scope", "inter"]).exit_code == 0
