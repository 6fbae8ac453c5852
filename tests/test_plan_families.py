"""The planner on today's families: shards, kernels, TP calls and stage terms by block kind.

Expected numbers come from elsewhere: `count_params` (checked against transformers' meta-device
models in test_hf.py) for the shards, `count.block_flops` (checked against FlopCounterMode in
test_flops_families.py) for the GEMM FLOPs, hand-counted visible (query, key) pairs for windowed
fused attention, and the per-kind pieces of the same evaluator for the mixes and MTP.
"""

from __future__ import annotations

import pytest

from modelplan.comm.ops import Collective
from modelplan.count.attention import FusedAttention, visible_fraction
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import block_of
from modelplan.count.params import count_params
from modelplan.plan.block_mix import block_kinds, mean_terms
from modelplan.plan.compute import KernelTimes
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.parallel.tp import block_kind_calls
from modelplan.plan.shard import unit_shards
from modelplan.plan.validate import plan_notes
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan

FAMILIES = ["deepseek-v3", "deepseek-v2-lite", "gemma-3-27b", "gemma-2-27b", "gpt-oss-120b", "olmo-2-32b",
            "olmoe-1b-7b", "qwen3-235b-a22b", "jamba-v0.1", "mamba-2.8b", "command-r-plus", "granite-3.1-8b",
            "glm-4-32b", "phi-3.5-moe", "llama-4-maverick-text", "starcoder2-15b"]


@pytest.mark.parametrize("name", FAMILIES)
def test_unit_shards_hold_every_parameter(name):
    """At tp = 1 the planner's units hold exactly count_params' total (the vision tower as the
    first stage's `vision` unit): MLA latents, Mamba mixers, q/k norms, sinks, gates, expert
    biases, MTP modules."""
    spec = load_model(name)
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total


GEMM_KEYS = {  # count.block_flops keys of weight matmuls, by mixer
    "attention": ("attention/qkv", "attention/out", "attention/q", "attention/q/down", "attention/q/up",
                  "attention/kv/down", "attention/kv/up", "attention/score"),
    "mamba": ("mamba/in_proj", "mamba/x_proj", "mamba/dt_proj", "mamba/out_proj"),
}


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v2-lite", "olmo-2-32b", "jamba-v0.1", "mamba-2.8b",
                                  "gpt-oss-120b", "qwen3-235b-a22b"])
def test_block_gemm_flops_equal_the_counted_flops(name):
    """Each block kind's GEMMs (eager scores over the whole sequence, tp = 1) total the counted
    forward FLOPs of its mixer and MLP (count.block_flops, FlopCounterMode-checked); routed experts
    apart: the planner runs them on capacity slots (`plan/experts.py`), not on top_k tokens."""
    spec = load_model(name)
    b, s = 1, 256
    for block, _ in block_kinds(spec, False) + block_kinds(spec, True):
        kernels = layer_kernels(spec, 1, b, s, 2, moe_layer=block.moe, block=block, attention="eager")
        full_keys = block if block.mixer == "mamba" else block._replace(mixer="full_attention")  # eager: all s keys
        counted = block_forward_flops(spec, full_keys, b * s, s)
        keys = GEMM_KEYS["mamba" if block.mixer == "mamba" else "attention"]
        expected = sum(v for k, v in counted.items() if k in keys or (k.startswith("mlp/") and k != "mlp/experts"))
        got = sum(g.flops for g in kernels.gemms if not g.name.startswith("mlp/experts"))
        assert got == expected, (block, got, expected)


def test_sliding_window_fused_kernel_computes_the_band():
    """A causal window of 4 over 6 tokens: queries see 1, 2, 3, 4, 4, 4 keys = 18 pairs of 36."""
    assert visible_fraction(6, 6, True, window=4) == pytest.approx(18 / 36)
    assert visible_fraction(6, 6, True, chunk=4) == pytest.approx((10 + 3) / 36)  # chunks of 4 and 2
    spec = load_model("gpt-oss-120b")
    block = block_of(spec, 0)
    assert block.mixer == "sliding_attention"
    (fused,) = layer_kernels(spec, 1, 1, 1024, 2, moe_layer=True, block=block, attention="flash").fused
    w = spec.sliding_window  # 128
    pairs = w * 1024 - w * (w - 1) // 2
    assert fused.fwd_flops == pytest.approx(4 * spec.heads * pairs * spec.dim_head)
    assert isinstance(fused, FusedAttention)


def test_mamba_block_all_reduces_its_x_proj_output_and_has_no_mlp_calls():
    """Megatron-style d_inner split: f/g around the mixer, one AllReduce of the (b s, dt_rank + 2N)
    x_proj output each way, and no MLP sublayer in a Mamba-only block."""
    spec = load_model("mamba-2.8b")
    calls = RankCalls()
    block_kind_calls(calls, spec, block_of(spec, 0), 2, False, 1000, 10, 2, 1, 1)
    labels = {key[4]: key for key in calls.counts}
    assert "tp/mlp/in" not in labels and "tp/mamba/in" in labels
    x_proj = labels["tp/mamba/x_proj"]
    assert x_proj[0] is Collective.ALL_REDUCE
    assert x_proj[3] == 10 * (spec.ssm.dt_rank + 2 * spec.ssm.state_size) * 2
    assert calls.counts[x_proj] == 2  # forward and backward


def test_mixed_kinds_are_weighted_by_their_share():
    """Gemma 3's 5 sliding : 1 global blocks: the dense class's terms are 5/6 and 1/6 of each."""
    spec = load_model("gemma-3-27b")
    kinds = block_kinds(spec, False)
    assert [(b.mixer, n) for b, n in kinds] == [("sliding_attention", 52), ("full_attention", 10)]
    a = KernelTimes(*([1.0] * len(KernelTimes._fields)))
    b = KernelTimes(*([7.0] * len(KernelTimes._fields)))
    assert mean_terms([a, b], [5, 1]).fwd_gemm_s == pytest.approx(2.0)


@pytest.mark.parametrize("name", ["deepseek-v3", "gpt-oss-120b", "qwen3-235b-a22b", "olmo-2-32b", "jamba-v0.1",
                                  "gemma-2-27b"])
def test_planner_prices_the_family_features(name):
    """No 'priced as baseline blocks' note is left for these families (MLA, MTP, windows, sinks,
    q/k norms, Mamba, soft-caps)."""
    assert not any("baseline blocks" in n for n in plan_notes(load_model(name), Plan(dp=8, pp=2)))


def test_mtp_modules_weigh_on_the_last_stage():
    """DeepSeek-V3's last stage runs the MTP module: its head term grows by one MTP block, one
    more head and one more embedding lookup, taken from the same evaluator's pieces."""
    from modelplan.plan.evaluator import Evaluator
    from modelplan.comm.clusters import load_cluster
    from modelplan.specs.training import TrainingSpec

    spec = load_model("deepseek-v3")
    training = TrainingSpec(global_batch=64, seq_len=4096)
    cluster = load_cluster("dgx-h100")
    with_mtp = Evaluator(spec, training, cluster)
    without = Evaluator(spec.model_copy(update={"mtp_layers": 0}), training, cluster)
    t, t0 = with_mtp.block_terms(8, True, 1, "none", mtp_ep=8), without.block_terms(8, True, 1, "none")
    k, k0 = t.kernels, t0.kernels
    from modelplan.count.blocks import mtp_block
    m = with_mtp._block_terms(8, True, 1, "none", 1, 8, mtp_block(spec)).kernels
    assert k.head_fwd_s - k0.head_fwd_s == pytest.approx(m.fwd_gemm_s + m.fwd_elementwise_s + k0.head_fwd_s
                                                         + k0.embedding_fwd_s)
    assert t.head_activation_bytes > t0.head_activation_bytes
