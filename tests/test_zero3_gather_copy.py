"""DeepSpeed ZeRO-3's copy of each gathered parameter out of the AllGather's flat buffer
(`EngineProfile.zero3_gather_copy_out`, `plan/fsdp.gather_copy_out_bytes`). Source: DeepSpeed 0.19.8
`runtime/zero/partition_parameters.py` `_all_gather_dtype` (one flat buffer per coalesced gather) and
`AllGatherCoalescedHandle.wait` (`param.data = torch.cat(partitions)` per parameter: reads the d-byte
gathered slices, writes a d-byte parameter), run by `partitioned_param_coordinator.fetch_sub_module` on
the allgather stream before `current_stream().wait_stream(allgather_stream)`."""

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.evaluator_dp import zero3_with_copy_out
from modelplan.plan.fsdp import gather_copy_out_bytes
from modelplan.plan.parallel.dp_zero import DpTimes
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

LLAMA = load_model("llama-3-8b")
H100 = load_cluster("dgx-h100")
LLAMA3_8B_PARAMS = 8_030_261_248
"""sum(p.numel()) of transformers' LlamaForCausalLM with meta-llama/Meta-Llama-3-8B's config.json."""


def test_copy_out_reads_and_writes_each_gathered_element():
    """bf16: torch.cat reads 2 B of the flat buffer and writes 2 B of the parameter per element."""
    assert gather_copy_out_bytes(1_000, 2) == 4_000
    assert gather_copy_out_bytes(1_000, 4) == 8_000


def test_only_deepspeed_copies_out():
    """DeepSpeed's profile sets it; FSDP / torchtitan / Megatron profiles leave it off."""
    assert load_engine("deepspeed").zero3_gather_copy_out
    for name in ("torchtitan", "fsdp", "megatron"):
        assert not load_engine(name).zero3_gather_copy_out


def test_both_gathers_end_after_their_copy_and_the_first_block_is_kept():
    """0.5 s forward and 0.7 s backward gathers plus a 0.1 s copy each: 0.6 / 0.8 s; the first block's
    un-prefetched gather stays 0.05 s; a backward gather equal to the forward's (None) stays None."""
    times = DpTimes(0, 0, 0.3, 0.03, all_gather=0.5, all_gather_bucket=0.05, all_gather_block=0.05, all_gather_bwd=0.7)
    got = zero3_with_copy_out(times, 0.1)
    assert (got.all_gather, got.all_gather_bwd, got.all_gather_block) == pytest.approx((0.6, 0.8, 0.05))
    assert got.reduce_scatter == 0.3
    assert zero3_with_copy_out(times._replace(all_gather_bwd=None), 0.1).all_gather_bwd is None


def _gathers(zero: int, copy_out: bool) -> DpTimes:
    training = TrainingSpec(global_batch=8, seq_len=512, framework="deepspeed")
    ev = Evaluator(LLAMA, training, H100)
    ev.software = ev.software._replace(zero3_gather_copy_out=copy_out)
    return ev, ev.dp_entry(1, 1, 8, zero, False, 0).times


def test_zero3_gather_grows_by_the_copy_of_every_parameter():
    """Llama-3-8B, ZeRO 3 over 8 H100s: each gather of the whole model grows by the HBM time of
    2 x 2 B x 8.03 B parameters (each rank copies out every parameter it gathers)."""
    ev, on = _gathers(3, True)
    _, off = _gathers(3, False)
    copy_s = ev.roofline.memory_time_s(4 * LLAMA3_8B_PARAMS)
    assert on.all_gather - off.all_gather == pytest.approx(copy_s, rel=1e-3)
    assert on.reduce_scatter == off.reduce_scatter


def test_zero1_gathers_are_unchanged():
    """ZeRO-1/2's gather of the updated shards (stage_1_and_2.py all_gather_dp_groups) has no copy-out."""
    _, on = _gathers(1, True)
    _, off = _gathers(1, False)
    assert on == off
