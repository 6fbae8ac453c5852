"""verify executes Megatron-core's recompute settings (modelplan/execute/recompute.py): full
recompute's uniform and block methods (transformer_block.py `_checkpointed_forward`, core_v0.16)
and the attention core's recompute (`--recompute-modules core_attn`, plain selective), with the
same step as one device, the ledger equal to the communication list, and the kept activations
equal to hand-worked sizes; what it does not execute it names in a note."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.execute.recompute import Recompute
from modelplan.execute.verify import verify
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

LLAMA = TransformerSpec(
    name="llama-tiny", layers=4, hidden=16, heads=4, kv_heads=2, ffn_hidden=24, vocab=32, position="rotary",
    norm="rmsnorm", gated_mlp=True, activation="silu",
)
TRAIN = TrainingSpec(global_batch=8, seq_len=8, optimizer="adamw")
BLOCK_INPUT = 1 * 8 * 16 * 8  # one (b, s, h) = (1, 8, 16) float64 block input: 1,024 B


def run(plan: Plan, **training):
    report = verify(LLAMA, TRAIN.model_copy(update=training), plan, scale=False)
    assert report.passed, {r.name: r.detail for r in report.rows if not r.passed}
    return report


def row(report, name: str):
    return next(r for r in report.rows if r.name == name)


@pytest.mark.parametrize(("rc", "layers", "groups"), [
    (Recompute(full=True, method="uniform", num_layers=2), range(0, 5), [(0, 2, True), (2, 4, True), (4, 5, True)]),
    (Recompute(full=True, method="block", num_layers=2), range(4, 8),
     [(4, 5, True), (5, 6, True), (6, 7, False), (7, 8, False)]),
    (Recompute(full=True), range(0, 2), [(0, 1, True), (1, 2, True)]),
    (Recompute(), range(0, 2), [(0, 1, False), (1, 2, False)]),
])
def test_checkpoint_groups_follow_megatron_core(rc, layers, groups):
    """Uniform N: groups of N from the chunk's start, the last one short; block N: the chunk's first
    N blocks each a checkpoint, the rest plain; no method: each block its own checkpoint."""
    assert [(g.start, g.stop, c) for g, c in rc.groups(layers)] == groups


def test_uniform_groups_keep_one_input_per_group():
    """pp 2, 2 blocks a chunk, uniform groups of 2: each chunk keeps one 1,024-B input per
    micro-batch in flight (1F1B: stage 0 holds 2, stage 1 holds 1), 3 x 1,024 B over the ranks,
    half of what a checkpoint per block keeps; the planner's figure is the same."""
    uniform = row(run(Plan(pp=2), recompute="full", recompute_method="uniform", recompute_num_layers=2),
                  "memory activations")
    per_block = row(run(Plan(pp=2), recompute="full"), "memory activations")
    assert uniform.measured == uniform.expected == 3 * BLOCK_INPUT
    assert per_block.measured == 2 * uniform.measured


def test_block_method_reruns_only_the_first_blocks():
    """tp 2, pp 2, block method N = 1: only the first block of each 2-block chunk re-runs its
    forward, so each rank makes 2 fewer forward AllReduces (attention and MLP g) per micro-batch
    than under full recompute: 4 ranks x 8 micro-batches x 2 x 1,024 B in each of verify's 3
    steps; the ledger equals the communication list either way."""
    block = run(Plan(tp=2, pp=2), recompute="full", recompute_method="block", recompute_num_layers=1)
    full = run(Plan(tp=2, pp=2), recompute="full")
    assert row(full, "bytes all_reduce/tp").measured - row(block, "bytes all_reduce/tp").measured == \
        3 * 4 * 8 * 2 * BLOCK_INPUT


def test_block_method_keeps_the_plain_blocks_whole():
    """Block method N = 1 keeps more than full recompute (the second block of each chunk keeps
    everything) and less than none (the first keeps only its input)."""
    kept = {name: row(run(Plan(pp=2), **tr), "memory activations").measured for name, tr in [
        ("full", dict(recompute="full")), ("none", {}),
        ("block", dict(recompute="full", recompute_method="block", recompute_num_layers=1))]}
    assert kept["full"] < kept["block"] < kept["none"]


@pytest.mark.parametrize("training", [dict(recompute="selective"),
                                      dict(recompute="selective", recompute_modules=("core_attn",))])
def test_attention_core_recompute_drops_the_probabilities(training):
    """One rank, 4 blocks, 1 micro-batch in flight: the attention core's recompute keeps no
    (b, H, s, s) = (1, 4, 8, 8) float64 probabilities, 2,048 B a block, 8,192 B less than none."""
    none = row(run(Plan()), "memory activations")
    core = run(Plan(), **training)
    assert none.measured - row(core, "memory activations").measured == 4 * 1 * 4 * 8 * 8 * 8
    assert any("probabilities dropped" in n for n in core.notes)


@pytest.mark.parametrize("cp_comm_type", ["all_gather", "a2a"])
def test_attention_core_recompute_under_context_parallelism(cp_comm_type):
    """cp 2: the recomputed core (from the gathered K, V, or the head shards) gives the same step
    and the same traffic as the list."""
    run(Plan(cp=2), recompute="selective", cp_comm_type=cp_comm_type)


@pytest.mark.parametrize(("training", "named"), [
    (dict(recompute="selective", recompute_modules=("core_attn", "mlp")), "recompute_modules mlp not executed"),
    (dict(recompute="selective", framework="torchtitan"), "selective recompute (op_sac) not executed"),
])
def test_what_is_not_executed_is_named(training, named):
    """A module the executor keeps instead of recomputing is named in the report's notes."""
    assert any(named in n for n in run(Plan(), **training).notes)


def test_ring_keeps_the_core_and_says_so():
    """Under the p2p ring the core is not recomputed (its K, V blocks would go round again): a note."""
    report = run(Plan(cp=2), recompute="selective", cp_comm_type="p2p")
    assert any("core_attn under the cp p2p ring" in n for n in report.notes)


def test_cli_runs_the_method_and_says_so():
    """`modelplan verify gpt2 --recompute-method uniform --recompute-layers 2 --pp 2` scales to 2
    blocks a chunk so the groups are whole, passes, and says what it executed."""
    result = CliRunner().invoke(app, ["verify", "gpt2", "--pp", "2", "--recompute-method", "uniform",
                                      "--recompute-layers", "2"])
    assert result.exit_code == 0, result.output
    assert "uniform groups of 2 blocks" in result.output and "2 blocks per pipeline chunk" in result.output


def test_cli_method_without_layers_is_one_line():
    """--recompute-method without --recompute-layers: one line naming the missing field, exit 2."""
    result = CliRunner().invoke(app, ["verify", "gpt2", "--recompute-method", "block"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "recompute_num_layers" in lines[0]
