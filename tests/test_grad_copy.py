"""Gradient copies before each ZeRO-2/3 ReduceScatter by engine (plan/engine.py `grad_copy_bytes`):
FSDP2 copies the unsharded gradients once into the reduce-scatter input of the reduce dtype and
lets NCCL's ReduceOp.AVG divide; FSDP1 also pre-divides. Expected bytes are counted by hand from
torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py (`foreach_reduce`: `torch._chunk_cat`
into a `reduce_dtype` buffer; `_get_gradient_divide_factors` returns no divide factors for fp32 and
bf16, pytorch/pytorch#120919 and #123362) and from the FSDP1 profiles' own counts."""

from __future__ import annotations

from modelplan.plan.engine import engine_settings, grad_copy_bytes
from modelplan.specs.load import load_engine
from modelplan.specs.training import TrainingSpec


def training(**kw) -> TrainingSpec:
    return TrainingSpec(**{"global_batch": 8, "seq_len": 4096, "precision": "bf16", **kw})


def test_fsdp2_fp32_reduce_copies_bf16_into_fp32_once():
    """torchtitan, reduce_dtype fp32: read the bf16 gradient (2 B), write the fp32 input (4 B);
    no pre-divide pass (4 + 4 B) as FSDP1 has."""
    assert grad_copy_bytes(training(framework="torchtitan"), load_engine("torchtitan")) == 2 + 4


def test_fsdp2_bf16_reduce_copies_bf16_into_bf16():
    """MixedPrecisionPolicy(reduce_dtype bf16) (grad_dtype 'same'): 2 B read + 2 B written."""
    run = training(framework="torchtitan", grad_dtype="same")
    assert grad_copy_bytes(run, load_engine("torchtitan")) == 2 + 2


def test_fsdp2_fp8_training_reduces_the_bf16_gradients():
    """torchao float8 keeps bf16 weights, so the gradients FSDP2 copies are 16-bit: 2 + 4 B."""
    run = training(framework="torchtitan", precision="fp8")
    assert grad_copy_bytes(run, load_engine("torchtitan")) == 2 + 4


def test_automodel_reduces_in_bf16():
    """AutoModel's FSDP2Config reduces in bf16 (reduce_in_fp32 false): 2 + 2 B whatever grad_dtype says."""
    assert grad_copy_bytes(training(framework="automodel"), load_engine("automodel")) == 2 + 2


def test_fsdp1_profiles_keep_their_predivide_counts():
    """FSDP1 pre-divides the unsharded flat gradient (torch/distributed/fsdp/_runtime_utils.py,
    pytorch/pytorch#128918): llm-foundry's cast to fp32 + in-place divide 2 + 4 + 4 + 4 = 14 B,
    as its profile counts; the run's reduce dtype does not change a fixed count."""
    for run in (training(framework="foundry"), training(framework="foundry", grad_dtype="same")):
        assert grad_copy_bytes(run, load_engine("foundry")) == 14


def test_engine_settings_carry_the_resolved_count():
    """The settings the evaluator prices (`EngineSettings.grad_copy_bytes`) hold the resolved bytes."""
    run = training(framework="torchtitan", grad_dtype="same")
    assert engine_settings(run, load_engine("torchtitan")).grad_copy_bytes == 4
