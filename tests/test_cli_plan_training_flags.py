"""`modelplan plan --grad-dtype / --master-weights / --fp8-param-gather`: the published settings of
NeMo / Megatron runs (grad_sync_dtype bf16, optimizer without fp32 master, fp8_params) taken by the
CLI, checked against hand-worked model-state bytes."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from modelplan.cli import app

runner = CliRunner()
# Meta-Llama-3-8B: 8,030,261,248 parameters (the model card's 8.03B; the sum of the HF
# safetensors shapes: 32 x 218,112,000 per block + 2 x 525,336,576 embedding / head + 4,096 norm).
LLAMA3_8B_PARAMS = 32 * 218_112_000 + 2 * 128_256 * 4096 + 4096
ONE_PLAN = ["plan", "llama-3-8b", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8", "--batch", "64",
            "--seq", "2048", "--micro-batch", "1", "--zero", "1", "--recompute", "none", "--schedule", "1f1b",
            "--top", "1", "--json"]


def _stage(*extra: str) -> dict:
    result = runner.invoke(app, [*ONE_PLAN, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["plans"][0]["predictions"]["memory"]["stages"][0]


def test_hand_count_of_llama3_8b():
    """The constant above is the published 8.03B."""
    assert LLAMA3_8B_PARAMS == 8_030_261_248


def test_grad_dtype_same_halves_the_gradient_buffer():
    """Megatron's main-grad buffer: 4 B per parameter by default, 2 B (bf16) with --grad-dtype same."""
    assert _stage()["gradients_bytes"] == 4 * LLAMA3_8B_PARAMS
    assert _stage("--grad-dtype", "same")["gradients_bytes"] == 2 * LLAMA3_8B_PARAMS


def test_no_master_weights_keeps_only_the_adam_moments():
    """Distributed optimizer over dp 8: fp32 master + m + v = 12 B per parameter / 8; without the
    master copy (NeMo store_params False) 8 B / 8."""
    assert _stage()["optimizer_bytes"] == 12 * LLAMA3_8B_PARAMS / 8
    assert _stage("--no-master-weights")["optimizer_bytes"] == 8 * LLAMA3_8B_PARAMS / 8


def test_fp8_param_gather_drops_the_16_bit_weight_copy():
    """Transformer Engine fp8: bf16 weights (2 B) plus the cached fp8 weight and its transpose
    (1 + 1 B); with fp8 parameters (Megatron --fp8-param-gather) the fp8 weight is the parameter
    (embedding, head and norms stay bf16, so the difference is at most 2 B per parameter)."""
    plain = _stage("--precision", "fp8")["weights_bytes"]
    gathered = _stage("--precision", "fp8", "--fp8-param-gather")["weights_bytes"]
    assert gathered < plain <= 4 * LLAMA3_8B_PARAMS
    assert plain - gathered <= 2 * LLAMA3_8B_PARAMS


def test_te_fp8_copies_cover_the_blocks_not_the_embedding_and_head():
    """Transformer Engine keeps an fp8 weight and its transpose (1 + 1 B) of its own modules only:
    the 32 blocks' linears; Megatron-core's word embedding (VocabParallelEmbedding) and output
    layer (tensor_parallel.ColumnParallelLinear, models/gpt/gpt_model.py) are not TE modules and
    stay bf16. Hand count: 2 B x 8,030,261,248 + 2 B x 32 x 218,112,000 (block norms counted
    with the blocks) = 30,019,690,496 B."""
    assert _stage("--precision", "fp8")["weights_bytes"] == 2 * LLAMA3_8B_PARAMS + 2 * 32 * 218_112_000


def test_fp8_param_gather_without_fp8_is_a_one_line_error():
    result = runner.invoke(app, ["plan", "llama-3-8b", "--gpus", "8", "--fp8-param-gather"])
    assert result.exit_code == 2
    assert "fp8_param_gather needs precision 'fp8' (--precision fp8)" in result.output
    assert "Traceback" not in result.output


def test_fp8_recipe_without_fp8_names_the_flag():
    """Megatron users type --fp8-recipe blockwise alone; the error names the flag that is missing."""
    result = runner.invoke(app, ["plan", "llama-3-8b", "--gpus", "8", "--fp8-recipe", "blockwise"])
    assert result.exit_code == 2
    assert "fp8_recipe ('blockwise') needs precision 'fp8' (--precision fp8)" in result.output


def test_bad_grad_dtype_is_a_one_line_error():
    result = runner.invoke(app, ["plan", "llama-3-8b", "--gpus", "8", "--grad-dtype", "fp16"])
    assert result.exit_code != 0
    assert "--grad-dtype" in result.output and "Traceback" not in result.output


def test_engine_note_follows_the_run_gradient_dtype():
    """Megatron reduces in fp32 by default (accumulate_allreduce_grads_in_fp32); with
    --grad-dtype same (--no-grad-reduce-in-fp32) the gradients are reduced in bf16 and the note says so."""
    plain = runner.invoke(app, ONE_PLAN[:-1])
    same = runner.invoke(app, [*ONE_PLAN[:-1], "--grad-dtype", "same"])
    assert plain.exit_code == 0 and same.exit_code == 0, plain.output + same.output
    assert "gradients reduced in fp32" in plain.output
    assert "gradients reduced in 16 bits" in same.output
