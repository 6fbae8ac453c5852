"""A plan's overlap / offload / sharding / placement choices in each engine's launch terms
(export/mechanisms.py): flags and config keys named in the engines' own documentation
(Megatron-LM arguments.py, DeepSpeed config-json and ZeRO++ / MiCS tutorials, torchtitan's
ParallelismConfig), and every choice an engine cannot carry listed, never dropped."""

from _megatron_rules import HAND_FLAGS

from modelplan.export.mechanisms import deepspeed_mechanisms, megatron_mechanism_args, torchtitan_mechanisms
from modelplan.specs.plan import Plan

WIDE = Plan(tp=4, pp=2, dp=16, zero=1, sequence_parallel=True, tp_overlap="userbuffers", dp_overlap=True,
            rank_order="tp-cp-pp-dp", offload_activations=True)


def test_megatron_flags():
    """userbuffers -> --tp-comm-overlap; DP overlap with the distributed optimizer -> both overlap
    flags; tp-cp-pp-dp -> --use-tp-pp-dp-mapping; activation offload is listed, not dropped."""
    notes: list[str] = []
    flags = [f for f, _ in megatron_mechanism_args(WIDE, notes)]
    assert flags == ["--tp-comm-overlap", "--overlap-grad-reduce", "--overlap-param-gather", "--use-tp-pp-dp-mapping"]
    assert set(flags) <= set(HAND_FLAGS)  # each one a Megatron-LM flag
    assert any("offload_activations" in n for n in notes)


def test_megatron_defaults_add_nothing():
    """A plan without choices adds no flag and no note."""
    notes: list[str] = []
    assert megatron_mechanism_args(Plan(tp=2, dp=4), notes) == [] and notes == []


def test_deepspeed_offload_zeropp_and_mics():
    """ZeRO-3 with cpu offload, ZeRO++ and a shard group of 8: the config keys DeepSpeed reads."""
    zero: dict = {"stage": 3}
    notes: list[str] = []
    plan = Plan(dp=64, zero=3, offload_optimizer="cpu", zeropp=True, fsdp_shard_size=8, dp_overlap=True)
    deepspeed_mechanisms(zero, plan, notes)
    assert zero["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    assert (zero["zero_hpz_partition_size"], zero["zero_quantized_weights"], zero["zero_quantized_gradients"]) == (8, True, True)
    assert zero["mics_shard_size"] == 8 and zero["overlap_comm"] is True
    assert notes == []


def test_torchtitan_async_tp_and_hsdp():
    """ring -> async TP (with the compile note); HSDP of 8 over dp 32 -> replicate 4 x shard 8."""
    par = {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": 32}
    notes: list[str] = []
    plan = Plan(tp=8, dp=32, zero=3, sequence_parallel=True, tp_overlap="ring", fsdp_shard_size=8)
    torchtitan_mechanisms(par, plan, notes)
    assert par["enable_async_tensor_parallel"] is True
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (4, 8)
    assert any("compile" in n for n in notes)
