"""verify with context parallelism, each cp_comm_type executed (`execute/context_parallel.py`):
the sharded step equals the single-device step, the ledger's bytes and calls are the
communication list's, and breaking the exchange on purpose fails the checks.

Hand-worked bytes (GPT-tiny below: 4 layers, 4 heads of 4, MHA; seq 8, cp 2, micro-batch 1,
float64; dp 2 so 4 micro-batches per rank): a rank's K, V block is 2 x 4 tokens x 4 heads x 4 x
8 B = 1,024 B, its queries (and its output) 4 x 4 x 4 x 8 B = 512 B.
- all_gather (TE AttnFuncWithCPAndKVAllGather): the AllGather buffer 2 x 1,024 B, of which a ring
  AllGather sends (cp - 1)/cp = 1,024 B per call; 4 blocks x 4 micro-batches x (forward +
  backward) = 32 calls per rank.
- p2p (TE AttnFuncWithCPAndKVP2P ring): cp - 1 = 1 send of the 1,024 B block per forward; in
  backward 1 of K, V and 1 of the dK, dV accumulator (TE: step 0 sends K, V only, the last step
  dK, dV only), each matched by a recv: 16 x 3 = 48 sends and 48 recvs of 1,024 B per rank.
- a2a (DeepSpeed-Ulysses, arXiv 2309.14509 sec. 3.1: one all-to-all per tensor): Q, K, V and the
  output forward, dO, dQ, dK, dV backward, 8 AllToAlls of 512 B per block and micro-batch, each
  sending (cp - 1)/cp = 256 B: 16 x 8 = 128 calls, 32,768 B per rank.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.errors import SpecError
from modelplan.execute import context_parallel
from modelplan.execute.verify import verify
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from test_verify import GPT, LLAMA  # the tiny GPT (learned positions) and Llama (rotary, GQA) of test_verify
ALL_GATHER = TrainingSpec(global_batch=8, seq_len=8, optimizer="adamw", cp_comm_type="all_gather")
RING = ALL_GATHER.model_copy(update={"cp_comm_type": "p2p"})
ULYSSES = ALL_GATHER.model_copy(update={"cp_comm_type": "a2a"})
WIDE_LLAMA = LLAMA.model_copy(update={"name": "llama-8-heads", "hidden": 32, "heads": 8, "kv_heads": 4})
GEMMA = LLAMA.model_copy(update={"name": "softcap-window-sinks", "attn_logit_softcap": 5.0, "sliding_window": 3,
                                 "layer_types": ["sliding_attention", "full_attention"] * 2, "attention_sinks": True})


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


@pytest.mark.parametrize("training", [RING, ULYSSES], ids=["p2p", "a2a"])
@pytest.mark.parametrize("spec, plan", [
    (GPT, Plan(dp=2, cp=2)),
    (WIDE_LLAMA, Plan(tp=2, cp=2, sequence_parallel=True)),  # a2a: 4 heads, 2 kv heads per tp rank
    (GPT, Plan(cp=2, pp=2, zero=1, recompute="full")),
], ids=["gpt-dp2-cp2", "llama-tp2-sp-cp2", "gpt-pp2-cp2-full"])
def test_ring_and_ulysses_match_one_device(training, spec, plan):
    """p2p and a2a: loss, gradients, updated parameters, ledger and memory checks all pass."""
    report = verify(spec, training, plan, scale=False, steps=1)
    assert report.passed, _failed(report)


def test_ring_over_four_ranks_with_gqa_rotary():
    """cp 4 ring: three steps per pass, rotary offsets and the causal mask per block, GQA."""
    report = verify(LLAMA, RING, Plan(cp=4), scale=False, steps=1)
    assert report.passed, _failed(report)


@pytest.mark.parametrize("training", [RING, ULYSSES], ids=["p2p", "a2a"])
def test_softcap_window_and_sinks_under_cp(training):
    """Gemma 2's soft-cap, a 3-key sliding window that crosses the cp boundary and gpt-oss's sink
    logits: the ring merges them block by block, Ulysses runs them on its head shard."""
    report = verify(GEMMA, training, Plan(cp=2), scale=False, steps=1)
    assert report.passed, _failed(report)


def test_ring_bytes_by_hand():
    """dp 2, cp 2 on GPT-tiny: 48 sends and 48 recvs of 1,024 B per rank (module docstring)."""
    report = verify(GPT, RING, Plan(dp=2, cp=2), scale=False, steps=1)
    row = {r.name: r for r in report.rows}["bytes send_recv/cp"]
    assert row.passed and row.measured == 48 * 1024 * 4 == 196_608
    assert row.detail.startswith(f"{96 * 4} calls")


def test_ulysses_bytes_by_hand():
    """dp 2, cp 2 on GPT-tiny: 128 AllToAlls per rank, 256 B sent each (module docstring)."""
    report = verify(GPT, ULYSSES, Plan(dp=2, cp=2), scale=False, steps=1)
    row = {r.name: r for r in report.rows}["bytes all_to_all/cp"]
    assert row.passed and row.measured == 128 * 256 * 4 == 131_072
    assert row.detail.startswith(f"{128 * 4} calls")


def test_ring_without_the_returning_dkv_fails(monkeypatch):
    """A ring whose dK, dV accumulators never reach their owner (the last send and the final
    recv dropped) breaks the gradients and the ledger."""
    from modelplan.execute.layers import ring_attention
    real_backward = ring_attention.ring_backward

    class NoReturn:
        def __init__(self, cp):
            self._cp = cp

        def __getattr__(self, name):
            return getattr(self._cp, name)

        def recv_dkv(self):
            return 0.0 if self._cp.size == 2 else self._cp.recv_dkv()

        def send_dkv(self, dkv):
            pass

    monkeypatch.setattr("modelplan.execute.layers.attention.ring_backward",
                        lambda cp, *a: real_backward(NoReturn(cp), *a))
    bad = _failed(verify(LLAMA, RING, Plan(cp=2), scale=False, steps=1))
    assert "gradients" in bad and "bytes send_recv/cp" in bad


def test_ring_without_the_softmax_merge_fails(monkeypatch):
    """Adding the blocks' partial outputs without their log-sum-exp weights breaks the loss."""
    from modelplan.execute.layers import ring_attention
    monkeypatch.setattr(ring_attention, "_merge", lambda out, lse, out_b, lse_b: (out + out_b, np.logaddexp(lse, lse_b)))
    bad = _failed(verify(LLAMA, RING, Plan(cp=2), scale=False, steps=1))
    assert "loss" in bad


def test_ulysses_with_heads_in_the_wrong_order_fails(monkeypatch):
    """Sending head group j to rank cp-1-j instead of j (a wrong AllToAll layout) breaks the loss."""
    real = context_parallel.ContextParallel.seq_to_heads

    def reversed_heads(self, t, label):
        return real(self, t[:, ::-1], label)
    monkeypatch.setattr(context_parallel.ContextParallel, "seq_to_heads", reversed_heads)
    bad = _failed(verify(GPT, ULYSSES, Plan(cp=2), scale=False, steps=1))
    assert "loss" in bad


def test_ulysses_needs_cp_to_divide_the_heads():
    """a2a on cp 4 with 2 kv heads: one line naming both counts (TE: 'The number of attention
    heads needs to be divisible by CP size!')."""
    with pytest.raises(SpecError, match=r"cp_comm_type 'a2a' needs cp \(4\) to divide the heads \(4\) and kv heads "
                                        r"\(2\)"):
        verify(LLAMA, ULYSSES, Plan(cp=4), steps=1)


def test_pytorch_ring_is_refused_by_name():
    """torchtitan's CP is PyTorch's ring (fp32 dK, dV round the ring under either rotate method,
    `parallel/cp.py`), not TE's: one line instead of a ledger that cannot match."""
    with pytest.raises(SpecError, match="under framework 'torchtitan': verify executes Transformer Engine's"):
        verify(GPT, ALL_GATHER.model_copy(update={"framework": "torchtitan"}), Plan(cp=2), scale=False, steps=1)


def test_engine_default_type_runs():
    """No cp_comm_type: Megatron's default p2p (presets/frameworks/megatron.toml) is executed."""
    report = verify(GPT, ALL_GATHER.model_copy(update={"cp_comm_type": None}), Plan(cp=2), scale=False, steps=1)
    assert report.passed and "bytes send_recv/cp" in {r.name for r in report.rows}


def test_cli_runs_each_type_and_refuses_indivisible_heads():
    """`verify --cp-comm-type` runs each type; a2a on 32 heads / 8 kv heads with cp 3 is one line, exit 2."""
    runner = CliRunner()
    for kind in ("p2p", "all_gather", "a2a"):
        result = runner.invoke(app, ["verify", "llama-2-7b", "--cp", "2", "--cp-comm-type", kind])
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["verify", "llama-3-8b", "--cp", "3", "--cp-comm-type", "a2a"])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cp_comm_type 'a2a' needs cp (3) to divide the heads (32) and kv heads (8)" in lines[0]


CP_TYPES_ON_MPI = {kind: ["llama-2-7b", "--cp", "2", "--cp-comm-type", kind] for kind in ("p2p", "a2a")}


@pytest.mark.slow
def test_ring_and_ulysses_on_mpi_equal_the_simulator():
    """One 2-rank MPI job runs `verify --cp 2` with p2p and with a2a: every check passes, the
    ledgers equal the simulator's entry by entry (the ring's send/recv, Ulysses' AllToAlls) and the
    tensors agree (the pattern of test_cli_verify_mpi.py)."""
    from _mpi_support import mpi_available, mpiexec
    if not mpi_available():
        pytest.skip("no mpi4py / MPI library")
    from test_cli_verify_mpi import DETAIL, HOOKS, assert_same_run, sim_doc, split_commands

    args = [HOOKS]
    for plan in CP_TYPES_ON_MPI.values():
        args += ["--", "verify", *plan, "--backend", "mpi", *DETAIL]
    proc = mpiexec(2, args, timeout_s=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outputs = split_commands(proc.stdout)
    assert len(outputs) == len(CP_TYPES_ON_MPI), proc.stdout
    for (kind, plan), text in zip(CP_TYPES_ON_MPI.items(), outputs):
        mpi = json.loads(text)
        assert_same_run(mpi, sim_doc(plan), 2)
        ops = {e["op"] for ledger in mpi["ledgers"] for e in ledger if e["axis"] == "cp"}
        assert ops == {"p2p": {"send_recv"}, "a2a": {"all_to_all"}}[kind], ops
