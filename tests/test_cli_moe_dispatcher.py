"""`modelplan plan --moe-dispatcher alltoall|deepep|hybridep` (Megatron-LM
`--moe-token-dispatcher-type {alltoall, flex}` / `--moe-flex-dispatcher-backend {deepep, hybridep}`).

The flag sets `TrainingSpec.moe_flex_dispatcher`: the plan it prices must be the library's own with
that field (parity), and the step-time gap between the two dispatchers must be the all-to-all
dispatcher's second permutation worked by hand from Megatron-core token_dispatcher.py
(MoEAlltoAllTokenDispatcher dispatch_postprocess "Permutation 2: Sort tokens by local expert" and
combine_preprocess "Unpermutation 2": one read and one write of every received value each,
forward and backward; MoEFlexTokenDispatcher permutes once, so neither runs under deepep / hybridep).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelplan.cli import app

sys.path.insert(0, str(Path(__file__).parent))

runner = CliRunner()

# OLMoE-1B-7B (HF allenai/OLMoE-1B-7B-0924 config.json: 16 layers, hidden 2048, 64 experts, top-8)
# on one DGX H100 at ep 8 (8 local experts: the sort runs), 8 micro-batches of 4096 tokens per rank
OLMOE = ["plan", "olmoe-1b-7b", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8", "--ep", "8",
         "--micro-batch", "1", "--batch", "64", "--seq", "4096", "--zero", "1", "--recompute", "none",
         "--schedule", "1f1b", "--no-sequence-parallel", "--top", "1", "--json"]
LAYERS, HIDDEN, EXPERTS, TOP_K, TOKENS, MICROBATCHES = 16, 2048, 64, 8, 4096, 64 // 8


def _plan(args: list[str]) -> dict:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _step_s(doc: dict) -> float:
    return doc["plans"][0]["predictions"]["step_time"]["step_time_s"]


@pytest.mark.parametrize("dispatcher, field", [("alltoall", None), ("deepep", "deepep"), ("hybridep", "hybridep")])
def test_flag_prices_the_library_field(dispatcher, field):
    """The CLI's training and step time are the library's with TrainingSpec(moe_flex_dispatcher=field)
    on the same plan and cluster."""
    from modelplan.comm.clusters import load_cluster
    from modelplan.plan.estimate import estimate_plan
    from modelplan.specs.load import load_model
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    doc = _plan([*OLMOE, "--moe-dispatcher", dispatcher])
    training = TrainingSpec(global_batch=64, seq_len=TOKENS, recompute="none", moe_flex_dispatcher=field)
    assert doc["training"] == training.model_dump(mode="json")
    est = estimate_plan(load_model("olmoe-1b-7b"), training, Plan(**doc["plans"][0]["plan"]),
                        load_cluster("dgx-h100"))
    assert _step_s(doc) == pytest.approx(est.step.step_time_s, rel=1e-12)


def test_default_is_alltoall():
    default, alltoall = _plan(OLMOE), _plan([*OLMOE, "--moe-dispatcher", "alltoall"])
    assert (default["training"], default["plans"]) == (alltoall["training"], alltoall["plans"])


def test_flex_drops_the_sort_bytes_worked_by_hand():
    """Balanced capacity 4096 x 8 / 64 = 512 rows per expert: 64 x 512 x 2048 = 67,108,864 received
    values; two sort passes of read 2 B + write 2 B (bf16) = 536,870,912 B forward and as many
    backward, 2 kernels each way, per block and micro-batch. x 16 blocks x 8 micro-batches =
    137,438,953,472 B and 512 kernels at H100 SXM HBM3 3.35 TB/s (presets) x CostModel
    hbm_efficiency 0.85 x sustained_fraction 0.8, 4 us launch overhead each."""
    from modelplan.specs.costmodel import CostModel

    values = EXPERTS * (TOKENS * TOP_K // EXPERTS) * HIDDEN
    assert values == 67_108_864
    total_bytes = values * 2 * (2 + 2) * 2 * LAYERS * MICROBATCHES  # 2 passes x (r + w) x (fwd + bwd)
    assert total_bytes == 137_438_953_472
    cost = CostModel()
    assert (cost.hbm_efficiency, cost.sustained_fraction, cost.kernel_overhead_us) == (0.85, 0.8, 4.0)
    expected = total_bytes / (3.35e12 * 0.85 * 0.8) + 4 * LAYERS * MICROBATCHES * 4e-6
    alltoall = _step_s(_plan([*OLMOE, "--moe-dispatcher", "alltoall"]))
    assert alltoall - _step_s(_plan([*OLMOE, "--moe-dispatcher", "hybridep"])) == pytest.approx(expected, rel=1e-9)
    # DeepEP also sends one copy per destination rank, not per expert (`plan/deepep.py`): it saves more
    assert alltoall - _step_s(_plan([*OLMOE, "--moe-dispatcher", "deepep"])) > expected * (1 + 1e-6)


def test_bad_value_names_the_option():
    result = runner.invoke(app, [*OLMOE, "--moe-dispatcher", "nccl"])
    assert result.exit_code != 0
    assert "--moe-dispatcher" in result.output and "nccl" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_dense_model_refuses_a_flex_backend():
    result = runner.invoke(app, ["plan", "llama-3-8b", "--gpus", "8", "--moe-dispatcher", "deepep"])
    assert result.exit_code != 0
    assert "--moe-dispatcher" in result.output and "no routed experts" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("dispatcher, expected", [("alltoall", ("alltoall", None)), ("deepep", ("flex", "deepep")),
                                                  ("hybridep", ("flex", "hybridep"))])
def test_export_carries_the_dispatcher_and_megatron_core_accepts_it(tmp_path, dispatcher, expected):
    """`plan -o` then `export --to megatron`: the launch writes Megatron-LM's pair, both flags exist
    at core_v0.16.1 (generated from TransformerConfig fields), and megatron-core's TransformerConfig
    takes them."""
    from _engines import engine_module
    from _megatron_rules import generated_flags, parse_flags, read_script, transformer_config_kwargs

    doc = tmp_path / "plan.json"
    result = runner.invoke(app, [*OLMOE[:-1], "--moe-dispatcher", dispatcher, "-o", str(doc)])
    assert result.exit_code == 0, result.output
    exported = runner.invoke(app, ["export", str(doc), "--to", "megatron"])
    assert exported.exit_code == 0, exported.output
    flags = parse_flags(read_script(exported.output)[1])
    assert (flags["--moe-token-dispatcher-type"], flags.get("--moe-flex-dispatcher-backend")) == expected
    tc = engine_module("megatron.core.transformer.transformer_config")
    generated = generated_flags(tc.TransformerConfig)
    assert {"--moe-token-dispatcher-type", "--moe-flex-dispatcher-backend"} <= set(generated)
    config = tc.TransformerConfig(**transformer_config_kwargs(flags))
    assert config.moe_token_dispatcher_type == expected[0]
    if expected[1] is not None:
        assert config.moe_flex_dispatcher_backend == expected[1]
