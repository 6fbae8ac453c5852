"""verify with context parallelism (cp_comm_type all_gather, `execute/context_parallel.py`): the
sharded step equals the single-device step, the ledger's AllGather / ReduceScatter bytes are the
communication list's, and breaking the exchange on purpose fails the checks.

Hand-worked bytes (GPT-tiny below: 4 heads of 4, MHA; seq 8, cp 2, micro-batch 1, float64): a
rank's K, V block is 2 x 4 tokens x 4 heads x 4 x 8 B = 1,024 B, the AllGather buffer 2 x 1,024 B,
of which a ring AllGather sends (cp - 1)/cp = 1,024 B per call; 4 blocks x 4 micro-batches
(global batch 8 / dp 2) x (forward + backward) = 32 calls per rank.
"""

from __future__ import annotations

import pytest

from modelplan.errors import SpecError
from modelplan.execute import context_parallel
from modelplan.execute.verify import verify
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from test_verify import GPT, LLAMA  # the tiny GPT (learned positions) and Llama (rotary, GQA) of test_verify
ALL_GATHER = TrainingSpec(global_batch=8, seq_len=8, optimizer="adamw", cp_comm_type="all_gather")


def _failed(report) -> dict[str, str]:
    return {r.name: r.detail for r in report.rows if not r.passed}


@pytest.mark.parametrize("spec, plan", [
    (GPT, Plan(dp=2, cp=2)),  # learned positions offset per cp rank
    (LLAMA, Plan(cp=4)),  # rotary positions and the causal mask from the slice's offset, GQA
    (LLAMA, Plan(tp=2, cp=2, sequence_parallel=True)),
    (GPT, Plan(cp=2, pp=2, zero=1, recompute="full")),
], ids=["gpt-dp2-cp2", "llama-cp4", "llama-tp2-sp-cp2", "gpt-pp2-cp2-full"])
def test_context_parallel_matches_one_device(spec, plan):
    """Loss, gradients, updated parameters, ledger and memory checks all pass."""
    report = verify(spec, ALL_GATHER, plan, scale=False, steps=1)
    assert report.passed, _failed(report)


def test_all_gather_bytes_by_hand():
    """dp 2, cp 2 on GPT-tiny: 32 AllGathers per rank of 1,024 B sent each, 4 ranks: 131,072 B;
    ReduceScatters of dK, dV in backward only: half that."""
    report = verify(GPT, ALL_GATHER, Plan(dp=2, cp=2), scale=False, steps=1)
    rows = {r.name: r for r in report.rows}
    assert rows["bytes all_gather/cp"].measured == 32 * 1024 * 4 == 131_072
    assert rows["bytes reduce_scatter/cp"].measured == 16 * 1024 * 4


def test_skipping_the_dkv_reduce_scatter_fails(monkeypatch):
    """Keeping only this rank's own dK, dV contributions (no ReduceScatter) breaks the gradients
    and the ledger."""
    def local_only(self, dk, dv):
        s = dk.shape[2] // self.size
        return dk[:, :, self.rank * s:(self.rank + 1) * s], dv[:, :, self.rank * s:(self.rank + 1) * s]
    monkeypatch.setattr(context_parallel.ContextParallel, "scatter_dkv", local_only)
    bad = _failed(verify(LLAMA, ALL_GATHER, Plan(cp=2), scale=False, steps=1))
    assert "gradients" in bad and "bytes reduce_scatter/cp" in bad


def test_ring_and_ulysses_are_refused_by_name():
    """Only all_gather is executed; p2p (the Megatron default) and a2a are one-line errors."""
    for kind in ("p2p", "a2a", None):
        with pytest.raises(SpecError, match="verify executes context parallelism with all_gather only"):
            verify(GPT, ALL_GATHER.model_copy(update={"cp_comm_type": kind}), Plan(cp=2), steps=1)
