"""The all-to-all dispatcher's sort by local expert and back (plan/expert_sort.py), by hand from
Megatron-core token_dispatcher.py MoEAlltoAllTokenDispatcher: dispatch_postprocess ("Permutation 2:
Sort tokens by local expert", sort_chunks_by_idxs) and combine_preprocess ("Unpermutation 2"), each
one read and one write of every received value; none for one local expert
(`if self.num_local_experts > 1`) and none under the flex dispatcher (MoEFlexTokenDispatcher
permutes once, after its dispatch)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from modelplan.plan.compute import KernelTimes, Roofline
from modelplan.plan.expert_sort import sort_kernel, with_expert_sort
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.training import TrainingSpec

# Qwen3-30B-A3B (HF config.json: 128 experts, top-8, hidden 2048) at ep 8, 4096 tokens per rank:
# balanced capacity 4096 x 8 / 128 = 256 slots per expert and source rank
E, EP, CAPACITY, H = 128, 8, 256, 2048


def test_sort_moves_each_received_value_twice_each_way():
    """128 x 256 x 2048 = 67,108,864 received values; two passes of read 2 B + write 2 B (bf16):
    8 B per value forward, 8 B backward = 536,870,912 bytes each way, 2 kernels each way."""
    op = sort_kernel(E, EP, CAPACITY, H, 2)
    assert op.elements == 67_108_864
    assert op.elements * op.fwd_bytes_per_element == 536_870_912
    assert op.elements * op.bwd_bytes_per_element == 536_870_912
    assert op.kernels == (2, 2)


def test_one_local_expert_has_nothing_to_sort():
    assert sort_kernel(E, 128, CAPACITY, H, 2) is None


def zero_times() -> KernelTimes:
    return KernelTimes(*([0.0] * 10))


def roofline() -> Roofline:
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    return Roofline.of(acc, "bf16", CostModel())


def test_alltoall_dispatcher_adds_the_passes_at_hbm_speed():
    """536,870,912 B / (2 TB/s x hbm_efficiency x sustained_fraction) + 2 kernel overheads."""
    r, cost = roofline(), CostModel()
    t = with_expert_sort(zero_times(), r, "megatron", None, E, EP, CAPACITY, H, 2)
    expected = 2 * cost.kernel_overhead_us * 1e-6 + 536_870_912 / (2e12 * cost.hbm_efficiency * cost.sustained_fraction)
    assert t.fwd_elementwise_s == pytest.approx(expected)
    assert t.bwd_elementwise_s == pytest.approx(expected)


@pytest.mark.parametrize("framework, flex", [("megatron", "deepep"), ("megatron", "hybridep"), ("torchtitan", None)])
def test_flex_dispatcher_and_other_engines_do_not_sort(framework, flex):
    t = with_expert_sort(zero_times(), roofline(), framework, flex, E, EP, CAPACITY, H, 2)
    assert t == zero_times()


def test_training_spec_names_the_bad_dispatcher():
    with pytest.raises(ValidationError, match="moe_flex_dispatcher"):
        TrainingSpec(global_batch=8, seq_len=128, moe_flex_dispatcher="nccl")


def test_megatron_export_names_the_flex_dispatcher():
    """The Megatron launch flags carry the priced dispatcher (Megatron-LM arguments.py:
    --moe-token-dispatcher-type {allgather, alltoall, flex}, --moe-flex-dispatcher-backend
    {deepep, hybridep}); megatron-core's TransformerConfig takes the pair."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from _engines import engine_module
    from _megatron_rules import parse_flags, read_script, transformer_config_kwargs
    from modelplan.export.engines import export_plan
    from modelplan.specs.load import load_model
    from modelplan.specs.plan import Plan

    spec = load_model("mixtral-8x7b")
    plan = Plan(dp=8, tp=1, pp=1, ep=8, micro_batch=1)
    for flex, expected in ((None, ("alltoall", None)), ("hybridep", ("flex", "hybridep"))):
        training = TrainingSpec(global_batch=8, seq_len=4096, moe_flex_dispatcher=flex)
        flags = parse_flags(read_script(export_plan("megatron", spec, training, plan).text)[1])
        assert (flags["--moe-token-dispatcher-type"], flags.get("--moe-flex-dispatcher-backend")) == expected
    tc = engine_module("megatron.core.transformer.transformer_config")
    config = tc.TransformerConfig(**transformer_config_kwargs(flags))  # the hybridep export's flags
    assert (config.moe_token_dispatcher_type, config.moe_flex_dispatcher_backend) == ("flex", "hybridep")
