"""fp8 parameter gathers: the ZeRO / FSDP AllGather of the blocks' weights moves 1 byte per
element (`plan/fp8.py` `param_gather_bytes`), in the communication list and in the price.

Sources of the expected behaviour: Megatron-LM arguments.py `--fp8-param-gather` ("Keep the
compute param in fp8 (do not use any other intermediate dtype) and perform the param all-gather in
fp8"); torchtitan docs/float8.md (`--float8.enable_fsdp_float8_all_gather`: "cast
Float8Linear.weight from high precision to float8 before FSDP all-gather so we can communicate in
float8 to save bandwidth"); torchao float8/config.py ("enable_fsdp_float8_all_gather only supports
tensorwise scaling granularity")."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.comm.ops import Axis, Collective
from modelplan.plan.commlist import communication_list
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.fp8 import param_gather_bytes
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

# one block: q, k, v, o 4 h^2 = 16,384 + gated MLP 3 h f = 49,152 + two RMSNorm weights 2 h = 128
# = 65,664 elements; embedding 128 x 64 = 8,192; head 8,192 + final norm 64 = 8,256
SPEC = TransformerSpec(layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=128)
BLOCK, EMBEDDING, HEAD = 65_664, 8_192, 8_256


def _training(framework: str, recipe: str, gather: bool = True) -> TrainingSpec:
    return TrainingSpec(global_batch=2, seq_len=64, precision="fp8", framework=framework, fp8_recipe=recipe,
                        fp8_param_gather=gather)


def _gathers(items) -> dict[int, int]:
    """{message bytes: calls per step} of the per-step DP parameter AllGathers."""
    return {i.nbytes: i.count for i in items
            if i.op is Collective.ALL_GATHER and i.axis is Axis.DP and not i.startup}


@pytest.mark.parametrize("unit,backend,recipe,expected", [
    ("layers/3", "te", "delayed", 1),            # Megatron --fp8-param-gather: TE linear weights
    ("layers/3/experts", "te", "current", 1),     # TE grouped GEMM weights are TE fp8 params too
    ("layers/3", "torchao", "tensorwise", 1),     # torchao enable_fsdp_float8_all_gather
    ("layers/3", "torchao", "rowwise", 2),        # torchao: tensorwise scaling only
    ("layers/3/experts", "torchao", "tensorwise", 2),  # torchtitan swaps nn.Linear, not grouped experts
    ("embedding/word", "te", "delayed", 2),       # neither engine casts the embedding to fp8
    ("head", "torchao", "tensorwise", 2),         # torchtitan's float8 converter skips `output`
])
def test_param_gather_bytes_by_unit_engine_and_recipe(unit, backend, recipe, expected):
    """Only blocks' weights of an engine that gathers them in fp8 move 1 byte per element."""
    assert param_gather_bytes(unit, 2, True, recipe, backend) == expected


def test_param_gather_bytes_without_fp8_param_gather_is_the_16_bit_width():
    """fp8 GEMMs without fp8 parameter gathers gather the 16-bit weights (2 bytes)."""
    assert param_gather_bytes("layers/0", 2, False, "tensorwise", "torchao") == 2


def test_fsdp_list_gathers_blocks_in_fp8_and_the_embedding_and_head_in_bf16():
    """torchtitan, FSDP over 2 ranks, tensorwise: each block's AllGather is 65,664 B (1 B per
    element), twice per micro-batch (forward, backward) for 2 blocks: 4 calls; embedding and head
    stay 2 B per element (16,384 B and 16,512 B), 2 calls each."""
    items = communication_list(SPEC, _training("torchtitan", "tensorwise"), Plan(dp=2, zero=3))
    assert _gathers(items) == {BLOCK: 4, 2 * EMBEDDING: 2, 2 * HEAD: 2}


def test_fsdp_list_gathers_bf16_blocks_under_rowwise():
    """Rowwise scaling keeps the 16-bit gather (torchao's tensorwise-only rule): 131,328 B per block."""
    items = communication_list(SPEC, _training("torchtitan", "rowwise"), Plan(dp=2, zero=3))
    assert _gathers(items) == {2 * BLOCK: 4, 2 * EMBEDDING: 2, 2 * HEAD: 2}


def test_distributed_optimizer_gathers_blocks_in_fp8_once_per_step():
    """Megatron distributed optimizer (ZeRO-1) with --fp8-param-gather: one 65,664 B gather per block."""
    items = communication_list(SPEC, _training("megatron", "delayed"), Plan(dp=2, zero=1))
    assert _gathers(items) == {BLOCK: 2, 2 * EMBEDDING: 1, 2 * HEAD: 1}


@pytest.mark.parametrize("gather", [True, False])
def test_priced_fsdp_gather_is_the_list_s(gather):
    """The evaluator's per-micro-batch AllGather time equals the list's gathers priced one by one
    (the list has 2 per micro-batch under ZeRO-3), with and without fp8 parameter gathers."""
    training = _training("torchtitan", "tensorwise", gather)
    ev = Evaluator(SPEC, training, load_cluster("dgx-h100"))
    items = communication_list(SPEC, training, Plan(dp=2, zero=3))
    shape = ev.shapes(1, 2, 1)[Axis.DP]
    listed = sum(i.count * ev.pricer.time_s(i.op, i.nbytes, shape) for i in items
                 if i.op is Collective.ALL_GATHER and i.axis is Axis.DP and not i.startup)
    assert ev.dp_entry(1, 1, 2, 3, False, 0).times.all_gather == pytest.approx(listed / 2)


@pytest.mark.parametrize("recipe, backend, noted", [
    ("rowwise", "torchao", True),     # torchao float8/config.py: fp8 all-gather is tensorwise only
    ("tensorwise", "torchao", False),
    ("current", "te", False),         # Megatron --fp8-param-gather: TE modules under any recipe
])
def test_fp8_gather_the_recipe_cannot_do_is_noted(recipe, backend, noted):
    """A run asking for fp8 parameter gathers its recipe cannot do is told they stay 16-bit."""
    from modelplan.plan.fp8 import param_gather_note

    assert (param_gather_note(True, recipe, backend) is not None) is noted
    assert param_gather_note(False, recipe, backend) is None
