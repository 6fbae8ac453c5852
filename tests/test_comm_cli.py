"""`modelplan comm` through Typer's CliRunner: layout, JSON, options and bad input."""

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, ["comm", *args])


def test_sweep_prints_nccl_tests_columns():
    """Default sweep: nccl-tests header columns and one row per size 1K..4G, factor 2 (23 rows)."""
    result = _run("all_reduce", "--ranks", "8", "--cluster", "dgx-h100")
    assert result.exit_code == 0, result.output
    assert "size" in result.output and "algbw" in result.output and "busbw" in result.output
    rows = [line for line in result.output.splitlines() if line and not line.startswith("#")]
    assert len(rows) == 23  # 2**10 .. 2**32


def test_busbw_is_algbw_times_factor():
    """AllReduce on 8 ranks: the busbw column is 2(n-1)/n = 1.75 x algbw (nccl-tests)."""
    result = _run("all_reduce", "-n", "8", "-c", "dgx-a100", "--size", "1G", "--json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)["rows"][0]
    assert row["busbw_gbps"] == pytest.approx(1.75 * row["algbw_gbps"])


@pytest.mark.parametrize("spelling", ["allreduce", "all_reduce", "all-reduce", "AllReduce", "all_reduce_perf"])
def test_collective_spellings(spelling):
    """nccl-tests and torch spellings name the same collective."""
    result = _run(spelling, "-n", "8", "-c", "dgx-a100", "--size", "1M", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["collective"] == "all_reduce"


def test_one_size_and_count_column():
    """--size 256M with --dtype bf16: 268435456 bytes, 134217728 two-byte elements."""
    result = _run("all_gather", "-n", "8", "-c", "dgx-a100", "--size", "256M", "--dtype", "bf16", "--json")
    row = json.loads(result.output)["rows"][0]
    assert (row["size_bytes"], row["count"]) == (268435456, 134217728)


def test_forced_algorithm_and_placement_shown():
    """--algo ring and --ranks-per-node 4: 16 ranks on 4 nodes, every row ring."""
    result = _run("reduce_scatter", "-n", "16", "-c", "dgx-h100", "--ranks-per-node", "4",
                  "--algo", "ring", "-b", "1M", "-e", "16M", "--json")
    doc = json.loads(result.output)
    assert (doc["nodes"], doc["ranks_per_node"]) == (4, 4)
    assert {r["algo"] for r in doc["rows"]} == {"ring"}


def test_text_header_names_placement():
    """The text header states nodes x ranks per node and both links when crossing nodes."""
    result = _run("all_reduce", "-n", "16", "-c", "dgx-a100", "--size", "1G")
    assert "2 node(s) x 8 ranks/node" in result.output
    assert "HDR" in result.output


def test_sweep_bounds():
    """-b 1K -e 16K -f 4: sizes 1K, 4K, 16K."""
    result = _run("broadcast", "-n", "4", "-c", "dgx-a100", "-b", "1K", "-e", "16K", "-f", "4", "--json")
    assert [r["size_bytes"] for r in json.loads(result.output)["rows"]] == [1024, 4096, 16384]


def test_cluster_file(tmp_path):
    """--cluster accepts a TOML file."""
    f = tmp_path / "c.toml"
    f.write_text('extends = "dgx-h100"\nname = "mine"\n')
    result = _run("all_reduce", "-n", "8", "-c", str(f), "--size", "1M", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["cluster"] == "mine"


@pytest.mark.parametrize("args, message", [
    (["all_reduce", "-n", "0", "-c", "dgx-a100"], "--ranks (0) must be >= 2"),
    (["all_reduce", "-n", "8", "-c", "dgx-a100", "--size", "12QB"], "unknown unit 'QB'"),
    (["all_reduce", "-n", "8", "-c", "dgx-a100", "--size", "-5"], "must be >= 0"),
    (["all_reduce", "-n", "8", "-c", "no-such-box"], "unknown cluster preset 'no-such-box'"),
    (["allredux", "-n", "8", "-c", "dgx-a100"], "unknown collective 'allredux'"),
    (["all_reduce", "-n", "8", "-c", "dgx-a100", "--algo", "magic"], "unknown algorithm 'magic'"),
    (["all_reduce", "-n", "8", "-c", "dgx-a100", "--dtype", "fp7"], "--dtype 'fp7' is unknown"),
    (["all_reduce", "-n", "6", "-c", "dgx-a100", "--algo", "halving_doubling"], "power-of-two"),
    (["all_reduce", "-n", "8", "-c", "dgx-a100", "-b", "1G", "-e", "1M"], "must be >= --min-size"),
    (["all_reduce", "-n", "8", "-c", "dgx-a100", "--ranks-per-node", "16"], "ranks_per_node (16) must be <= gpus_per_node (8)"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    """Bad input: `error: ...` on one line, exit code 2, no traceback."""
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_group_larger_than_fixed_cluster(tmp_path):
    """A 2-node cluster file cannot hold 64 ranks."""
    f = tmp_path / "small.toml"
    f.write_text('extends = "dgx-a100"\nnodes = 2\n')
    result = _run("all_reduce", "-n", "64", "-c", str(f))
    assert result.exit_code == 2
    assert "needs 8 nodes, but the cluster has 2 (16 GPUs)" in result.output
