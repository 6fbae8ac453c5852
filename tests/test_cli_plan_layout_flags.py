"""`modelplan plan` flags for layout settings the bench's published runs fix and the CLI used to
search or leave at their default (benchmarks/check_cli_parity.py found them): HSDP alone
(`--fsdp-shard-size N`), the first / last stage's blocks, ZeRO-3's reshard after forward, the
fused norm. Expected bytes from the hand-counted Llama 3 8B parameters."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app

runner = CliRunner()
# Meta-Llama-3-8B: 8,030,261,248 parameters (32 x 218,112,000 per block + 2 x 128,256 x 4,096
# embedding / head + 4,096 final norm; the sum of the HF safetensors shapes)
LLAMA3_8B_PARAMS = 32 * 218_112_000 + 2 * 128_256 * 4096 + 4096
FSDP = ["plan", "llama-3-8b", "--gpus", "16", "--tp", "1", "--pp", "1", "--dp", "16", "--zero", "3", "--batch", "64",
        "--seq", "2048", "--micro-batch", "1", "--recompute", "none", "--framework", "torchtitan", "--no-zeropp",
        "--offload-optimizer", "none", "--no-offload-activations", "--top", "5", "--json"]
PIPE = ["plan", "llama-3-8b", "--gpus", "8", "--tp", "1", "--pp", "4", "--dp", "2", "--batch", "64", "--seq", "2048",
        "--top", "1", "--json"]


def _plans(args: list[str]) -> list[dict]:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["plans"]


def test_hand_count_of_llama3_8b():
    assert LLAMA3_8B_PARAMS == 8_030_261_248  # the model card's 8.03B


def test_fsdp_shard_size_alone_is_hsdp_alone():
    """--fsdp-shard-size 8: every ranked plan shards over groups of 8 (fp32 master + Adam m, v =
    12 B per parameter / 8 on a GPU); 0,8 ranks plain sharding (12 B / 16) beside it."""
    hsdp = _plans([*FSDP, "--fsdp-shard-size", "8"])
    assert {p["plan"]["fsdp_shard_size"] for p in hsdp} == {8}
    assert hsdp[0]["predictions"]["memory"]["stages"][0]["optimizer_bytes"] == 12 * LLAMA3_8B_PARAMS / 8
    both = _plans([*FSDP, "--fsdp-shard-size", "0,8"])
    assert {p["plan"]["fsdp_shard_size"] for p in both} == {None, 8}
    plain = next(p for p in both if p["plan"]["fsdp_shard_size"] is None)
    assert plain["predictions"]["memory"]["stages"][0]["optimizer_bytes"] == 12 * LLAMA3_8B_PARAMS / 16


def test_first_and_last_stage_blocks_are_fixed():
    """Megatron's --decoder-first / last-pipeline-num-layers: 7 + 9 + 9 + 7 = 32 blocks on pp 4."""
    plan = _plans([*PIPE, "--first-stage-layers", "7", "--last-stage-layers", "7"])[0]["plan"]
    assert (plan["first_stage_layers"], plan["last_stage_layers"]) == (7, 7)


@pytest.mark.parametrize("extra, message", [
    (["--first-stage-layers", "20", "--last-stage-layers", "20"], "first / last stage blocks (20, 20) leave -8 blocks"),
    (["--reshard-after-forward", "maybe"], "--reshard-after-forward: expected true, false or default"),
])
def test_bad_layout_is_one_line(extra, message):
    result = runner.invoke(app, [*PIPE, *extra])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_reshard_after_forward_is_the_plans():
    """ZeRO-3 without reshard keeps every gathered unit to backward: more memory than freeing it."""
    kept = _plans([*FSDP, "--fsdp-shard-size", "0", "--reshard-after-forward", "false"])[0]
    freed = _plans([*FSDP, "--fsdp-shard-size", "0", "--reshard-after-forward", "true"])[0]
    assert (kept["plan"]["reshard_after_forward"], freed["plan"]["reshard_after_forward"]) == (False, True)
    assert kept["predictions"]["memory"]["stages"][0]["total_bytes"] > \
        freed["predictions"]["memory"]["stages"][0]["total_bytes"]


def test_fused_norm_reaches_the_training_spec():
    result = runner.invoke(app, [*FSDP, "--fsdp-shard-size", "0", "--fused-norm", "--no-compile-loss"])
    assert result.exit_code == 0, result.output
    training = json.loads(result.output)["training"]
    assert (training["fused_norm"], training["compile_loss"]) == (True, False)
