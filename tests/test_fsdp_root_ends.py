"""FSDP2's root group holding the word embedding, norm and head (`TrainingSpec.fsdp_ends_in_root`:
torchtitan before 83e694105 wrapped them in `fully_shard(model)`). FSDP2 does not reshard the root after
forward and reduce-scatters its gradients at the end of backward, so under ZeRO-3 a rank also holds the
gathered embedding (bf16 V x h / tp) and the head's unsharded bf16 gradient (V x h / tp, with the final norm's h).
Expected bytes: Llama 3 8B (vocab 128,256, hidden 4096, untied): 2 x 128256 x 4096 = 1,050,673,152 B each."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from modelplan.cli import app

EMBEDDING_BF16 = 2 * 128256 * 4096  # bytes of the word embedding (= the head) in bf16, tp 1
HEAD_GRAD_BF16 = EMBEDDING_BF16 + 2 * 4096  # the head unit's gradients: output + final RMSNorm weight

BASE = ["plan", "llama-3-8b", "--gpus", "8", "--cluster", "dgx-h100", "--dp", "8", "--tp", "1", "--pp", "1",
        "--micro-batch", "1", "--global-batch", "8", "--seq", "8192", "--recompute", "full",
        "--framework", "torchtitan", "--json", "--top", "1"]


def _stage(args: list[str]) -> dict:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["plans"][0]["predictions"]["memory"]["stages"][0]  # warnings: stderr


def test_zero3_root_holds_the_embedding_and_the_head_gradient():
    """ZeRO-3: + the gathered embedding in weights, + the head's unsharded gradient in gradients."""
    split = _stage([*BASE, "--zero", "3"])
    rooted = _stage([*BASE, "--zero", "3", "--fsdp-ends-in-root"])
    assert round(rooted["weights_bytes"] - split["weights_bytes"]) == EMBEDDING_BF16
    assert round(rooted["gradients_bytes"] - split["gradients_bytes"]) == HEAD_GRAD_BF16


def test_tensor_parallel_splits_both_by_tp():
    """tp 2 (vocab-sharded embedding and head, torchtitan RowwiseParallel / ColwiseParallel): half of each
    (the final norm's weight stays whole)."""
    args = [*BASE, "--zero", "3", "--tp", "2", "--dp", "4", "--sequence-parallel"]
    split, rooted = _stage(args), _stage([*args, "--fsdp-ends-in-root"])
    assert round(rooted["weights_bytes"] - split["weights_bytes"]) == EMBEDDING_BF16 // 2
    assert round(rooted["gradients_bytes"] - split["gradients_bytes"]) == EMBEDDING_BF16 // 2 + 2 * 4096


def test_without_zero3_nothing_changes():
    """ZeRO-1 keeps every parameter whole anyway and is not FSDP2: the setting changes nothing."""
    assert _stage([*BASE, "--zero", "1"]) == _stage([*BASE, "--zero", "1", "--fsdp-ends-in-root"])
