"""torchao's FSDP2 float8 all-gather hands Float8Linear an fp8 weight (plan/fp8.py
`quantisation_bytes(weight_in_fp8=True)`): no weight cast in either pass, only the backward's
column-major copy of the fp8 weight for dgrad. Expected bytes counted by hand from torchao
float8/float8_linear.py (`tensor_already_casted_to_fp8(weight)`: the weight is used as is) and
float8/float8_ops.py `preprocess_addmm` (`b_data.t().contiguous().t()`: 1 B read + 1 B written)."""

from __future__ import annotations

from modelplan.plan.engine import engine_settings
from modelplan.plan.fp8 import quantisation_bytes, weight_arrives_in_fp8
from modelplan.specs.load import load_engine
from modelplan.specs.training import TrainingSpec


def test_gathered_fp8_weight_is_not_cast_again():
    """Tensorwise, bf16 operands: input 6 B/elem in forward; output gradient and input 6 B each in
    backward, plus 2 B per weight element for the transposed copy; the eager count casts the
    weight twice at 6 B (12 B) instead."""
    m, k, n = 8, 4, 2
    assert quantisation_bytes("tensorwise", 2, m, k, n, "torchao", weight_in_fp8=True) == (
        6 * m * k, 6 * (m * n + m * k) + 2 * k * n)
    assert quantisation_bytes("tensorwise", 2, m, k, n, "torchao") == (
        6 * (m * k + k * n), 6 * (m * n + m * k + k * n))


def test_te_weights_are_counted_per_step_either_way():
    """TE caches the fp8 weight across micro-batches: the per-micro-batch count has no weight term."""
    m, k, n = 8, 4, 2
    assert quantisation_bytes("delayed", 2, m, k, n, "te", weight_in_fp8=True) == quantisation_bytes(
        "delayed", 2, m, k, n, "te")


def test_only_dense_linears_arrive_in_fp8():
    """torchtitan's float8 converter swaps nn.Linear, not the grouped experts (`param_gather_bytes`)."""
    assert weight_arrives_in_fp8("mlp/in", True)
    assert weight_arrives_in_fp8("attention/qkv", True)
    assert not weight_arrives_in_fp8("mlp/experts/in", True)
    assert not weight_arrives_in_fp8("mlp/in", False)


def test_gathered_weights_need_torchao_tensorwise_and_the_flag():
    """enable_fsdp_float8_all_gather supports tensorwise only (torchao float8/config.py)."""
    tt = load_engine("torchtitan")

    def run(**kw):
        return TrainingSpec(**{"global_batch": 8, "seq_len": 4096, "precision": "fp8", "framework": "torchtitan", **kw})

    assert engine_settings(run(fp8_param_gather=True), tt).fp8_weights_gathered
    assert not engine_settings(run(), tt).fp8_weights_gathered
    assert not engine_settings(run(fp8_param_gather=True, fp8_recipe="rowwise"), tt).fp8_weights_gathered
    assert not engine_settings(run(fp8_param_gather=True, framework="megatron"), load_engine("megatron")).fp8_weights_gathered
