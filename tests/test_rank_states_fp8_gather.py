"""ZeRO-3 weights under torchao's float8 all-gather (plan/rank_states.py): the gathered blocks are
held in fp8. Resharded after forward only the units in flight are gathered; kept to backward
(FSDP2 reshard_after_forward=False, benchmark_litgpt's --shard_mode zero2) every block of the rank
is. Expected bytes from the hand-counted Llama-2-7B block: q, k, v, o 4 x 4096^2 + gate, up, down
3 x 4096 x 11008 + two norms 2 x 4096 = 202,383,360 parameters, 32 of them."""

from __future__ import annotations

from modelplan.plan.engine import engine_settings
from modelplan.plan.fsdp import UNITS_IN_FLIGHT
from modelplan.plan.rank_states import RankStates
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

LLAMA2 = load_model("llama-2-7b")
BLOCK = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096  # 202,383,360


def _weights(fp8_gather: bool, reshard: bool) -> float:
    training = TrainingSpec(global_batch=8, seq_len=4096, precision="fp8", framework="torchtitan",
                            fp8_recipe="tensorwise", fp8_param_gather=fp8_gather)
    held = RankStates(LLAMA2, training, engine_settings(training, load_engine("torchtitan")))
    return held.rank_states(1, 1, 8, 3, 0, reshard=reshard)[0]


def test_kept_blocks_are_gathered_in_fp8():
    """Not resharded: all 32 blocks stay gathered, one byte a parameter instead of two."""
    assert BLOCK == 202_383_360
    assert _weights(False, False) - _weights(True, False) == 32 * BLOCK


def test_resharded_units_in_flight_are_gathered_in_fp8():
    """Resharded after forward: only the units in flight (the current and the prefetched block)."""
    assert _weights(False, True) - _weights(True, True) == UNITS_IN_FLIGHT * BLOCK
