"""The planner under each engine's settings: FSDP2 reshard rules, HSDP, TP overlap, selective AC
meanings, fp8 recipes (plan/estimate.py end to end; expected directions and sizes from the
formulas of plan/fsdp.py, count/checkpointing.py and plan/fp8.py)."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.plan.estimate import estimate_plan
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

LLAMA = load_model("llama-3-8b")
H100 = load_cluster("dgx-h100")


def est(plan: Plan, **training):
    base = dict(global_batch=32, seq_len=4096, framework="torchtitan")
    return estimate_plan(LLAMA, TrainingSpec(**{**base, **training}), plan, H100)


def test_fsdp2_under_pp_keeps_the_stage_gathered():
    """torchtitan under PP keeps each stage's bf16 parameters and fp32 unsharded gradients
    (6 bytes per stage parameter more than two gathered blocks); resharding trades that for a
    gather per micro-batch and pass (more DP traffic)."""
    kept = est(Plan(dp=4, pp=2, zero=3, micro_batch=1))
    resharded = est(Plan(dp=4, pp=2, zero=3, micro_batch=1, reshard_after_forward=True))
    assert kept.memory[0].weights + kept.memory[0].gradients > resharded.memory[0].weights + resharded.memory[0].gradients
    assert kept.step.dp_comm_total_s < resharded.step.dp_comm_total_s


def test_hsdp_shards_over_the_shard_group():
    """HSDP shards of 8 instead of 32 ranks: 4x the optimizer states per GPU."""
    full = est(Plan(dp=32, zero=3, micro_batch=1))
    hsdp = est(Plan(dp=32, zero=3, micro_batch=1, fsdp_shard_size=8))
    assert hsdp.memory[0].optimizer == pytest.approx(4 * full.memory[0].optimizer, rel=1e-6)


def test_tp_overlap_hides_tp_traffic():
    """With TP overlap the exposed TP time drops and the hidden share appears."""
    plan = Plan(tp=8, dp=1, micro_batch=1, sequence_parallel=True)
    plain = est(plan, global_batch=4, framework="megatron")
    overlapped = est(plan, global_batch=4, framework="megatron", tp_comm_overlap=True)
    assert overlapped.step.tp_comm_s < plain.step.tp_comm_s
    assert overlapped.step.tp_hidden_s > plain.step.tp_hidden_s


def test_selective_means_the_engine_policy():
    """Megatron's selective recomputes the attention core only (flash: almost free, keeps almost
    everything); torchtitan's op SAC keeps less and recomputes more."""
    plan = Plan(dp=8, zero=3, micro_batch=1, recompute="selective")
    megatron = est(plan, framework="megatron")
    titan = est(plan, framework="torchtitan", compile=True)  # compile: same fused element-wise ops
    assert titan.memory[0].activations < megatron.memory[0].activations
    assert titan.step.recompute_s > megatron.step.recompute_s


def test_rowwise_is_slower_than_tensorwise():
    """Row-scaled fp8 GEMMs run at fp8_scaled_gemm_factor of the per-tensor rate."""
    plan = Plan(dp=8, zero=3, micro_batch=1)
    tensorwise = est(plan, precision="fp8", fp8_recipe="tensorwise")
    rowwise = est(plan, precision="fp8", fp8_recipe="rowwise")
    bf16 = est(plan)
    assert tensorwise.step.step_time_s < rowwise.step.step_time_s
    assert tensorwise.step.step_time_s < bf16.step.step_time_s


def test_eager_engine_is_slower_than_fused():
    """The same plan under an eager engine costs more element-wise time than under compile."""
    plan = Plan(dp=8, zero=3, micro_batch=1)
    assert est(plan).step.compute_s > est(plan, compile=True).step.compute_s


def test_engine_note_names_the_eager_attention_not_the_fused_kernel():
    """--attention eager runs no fused kernel (QK^T and AV as GEMMs, the s x s scores kept), so the
    engine note says eager and prints no fused-kernel rate; flash prints the engine's kernel."""
    plan = Plan(dp=8, micro_batch=1)
    eager = est(plan, framework="deepspeed", attention="eager").notes
    flash = est(plan, framework="deepspeed", attention="flash").notes
    assert any("attention eager (unfused" in n for n in eager)
    assert not any("attention fa2" in n for n in eager)
    assert any("attention fa2" in n for n in flash)


def test_memory_note_states_the_reserved_and_nccl_rows_it_prices():
    """The engine note states the allowances the memory table adds, and they are the table's:
    dp 8 alone under Megatron is one communicator (the DP group), so comm buffers are exactly the
    NCCL buffers the note names (no pipeline messages, no staging buckets), and the reserved row
    is the note's CUDA context figure."""
    e = estimate_plan(LLAMA, TrainingSpec(global_batch=32, seq_len=4096, framework="megatron"),
                      Plan(dp=8, micro_batch=1, zero=1), H100)
    note = next(n for n in e.notes if n.startswith("engine megatron"))
    stage = e.memory[0]
    assert f"NCCL {stage.comm_buffers / 1e6:g} MB per communicator" in note
    assert f"workspaces {stage.reserved / 1e9:g} GB (reserved row)" in note
