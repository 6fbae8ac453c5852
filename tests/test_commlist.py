"""The communication list against the communication volumes of the papers.

Sources: Narayanan et al. SC'21 (tensor parallel 8*b*s*h*(t-1)/t elements per layer per
micro-batch; pipeline b*s*h per micro-batch each way between stages; data parallel ring
all-reduce 2(d-1)/d of the shard's parameters; interleaving multiplies pipeline traffic),
Korthikanti et al. 2022 (sequence parallelism keeps the tensor-parallel volume), Rajbhandari et
al. SC'20 (ZeRO-1/2 keep the data-parallel volume at 2 Psi, ZeRO-3 raises it to 3 Psi), and
nccl-tests' per-rank byte factors. Worked numbers are in each test.
"""

from __future__ import annotations

import pytest

from modelplan.comm.ops import Axis, Collective
from modelplan.comm.exact import bytes_per_rank
from modelplan.plan.commlist import EXECUTOR_ALGO, communication_list
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec

GPT2_SMALL = TransformerSpec(
    layers=12, hidden=768, heads=12, ffn_hidden=3072, vocab=50257, max_positions=1024, position="learned",
    norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
    activation="gelu_tanh", tied_embeddings=True,
)
LLAMA_7B = TransformerSpec(layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000)


def sent(items, pp_rank=0, axis=None, op=None, label_prefix="", group_rank=0):
    """Bytes one rank of pipeline stage `pp_rank` sends for the selected items in one step."""
    total = 0
    for it in items:
        if pp_rank not in it.pp_ranks or it.startup or not it.label.startswith(label_prefix):
            continue
        if (axis is not None and it.axis != axis) or (op is not None and it.op != op):
            continue
        if it.op is Collective.SEND_RECV:
            total += it.nbytes * it.count if it.role == "send" else 0
        else:
            total += bytes_per_rank(it.op, EXECUTOR_ALGO[it.op], it.nbytes, it.group_size, group_rank)[0] * it.count
    return total


def test_tensor_parallel_volume_is_8bsh_per_layer_per_microbatch():
    """Blocks' TP all-reduces: 8*b*s*h*(t-1)/t elements per layer per micro-batch (Narayanan).

    b=2, s=1024, h=4096, t=8, 32 layers, m=4, bf16: 8*2*1024*4096*7/8 * 2 B * 32 * 4 = 15,032,385,536 B."""
    training = TrainingSpec(global_batch=8, seq_len=1024)
    items = communication_list(LLAMA_7B, training, Plan(tp=8, micro_batch=2))
    blocks = sent(items, label_prefix="tp/attention") + sent(items, label_prefix="tp/mlp")
    assert blocks == 8 * 2 * 1024 * 4096 * 7 // 8 * 2 * 32 * 4 == 15_032_385_536


def test_sequence_parallel_keeps_the_tensor_parallel_volume():
    """ReduceScatter + AllGather move what the AllReduce moved (Korthikanti et al. sec. 4.2.2)."""
    training = TrainingSpec(global_batch=8, seq_len=1024)
    plain = communication_list(LLAMA_7B, training, Plan(tp=8))
    seq = communication_list(LLAMA_7B, training, Plan(tp=8, sequence_parallel=True))
    for prefix in ("tp/attention", "tp/mlp", "tp/embedding"):
        assert sent(seq, label_prefix=prefix) == sent(plain, label_prefix=prefix)
    assert sent(seq, op=Collective.ALL_REDUCE, label_prefix="tp/mlp") == 0


def test_data_parallel_all_reduce_is_2_d_minus_1_over_d_of_the_parameters():
    """zero 0, d=4: 2*(3/4)*124,439,808 params * 4 B (fp32 grads) = 746,638,848 B per rank.

    GPT-2 small's 124,439,808 parameters (HF) split into units whose sizes 4 divides, so no padding."""
    items = communication_list(GPT2_SMALL, TrainingSpec(global_batch=4, seq_len=1024), Plan(dp=4))
    assert sent(items, axis=Axis.DP) == 2 * 3 * 124_439_808 * 4 // 4 == 746_638_848


@pytest.mark.parametrize("zero,ratio", [(1, 1.0), (2, 1.0), (3, 1.5)])
def test_zero_data_parallel_volume(zero, ratio):
    """ZeRO-1/2 keep the DP volume at 2 Psi, ZeRO-3 raises it to 3 Psi (Rajbhandari et al. sec. 7).

    One micro-batch and gradients in the weights' dtype, so every message is Psi elements."""
    training = TrainingSpec(global_batch=4, seq_len=1024, grad_dtype="same")
    base = sent(communication_list(GPT2_SMALL, training, Plan(dp=4)), axis=Axis.DP)
    staged = sent(communication_list(GPT2_SMALL, training, Plan(dp=4, zero=zero)), axis=Axis.DP)
    assert staged == ratio * base


def test_pipeline_sends_bsh_each_way_per_microbatch():
    """pp=4, m=8, b=1, s=2048, h=4096, bf16: a middle stage sends 8 activations and 8 gradients
    of 1*2048*4096*2 B; the first sends only activations, the last only gradients."""
    training = TrainingSpec(global_batch=8, seq_len=2048)
    items = communication_list(LLAMA_7B, training, Plan(pp=4))
    msg = 2048 * 4096 * 2
    assert sent(items, pp_rank=1, axis=Axis.PP) == 16 * msg
    assert sent(items, pp_rank=0, axis=Axis.PP) == sent(items, pp_rank=3, axis=Axis.PP) == 8 * msg


def test_scatter_gather_sends_one_tp_chunk_and_gathers_over_tp():
    """tp 4, pp 2, m 8, b 1, s 2048, h 4096, bf16, no SP (Narayanan et al. 2021 sec. 4.1): each TP
    rank of stage 0 sends 8 activations of 2048*4096*2/4 = 4,194,304 B; stage 1 all-gathers each
    into the 16,777,216-B tensor over TP, sending (t-1)/t of it: 8 x 12,582,912 B."""
    training = TrainingSpec(global_batch=8, seq_len=2048)
    items = communication_list(LLAMA_7B, training, Plan(tp=4, pp=2))
    assert sent(items, pp_rank=0, axis=Axis.PP) == 8 * 2048 * 4096 * 2 // 4 == 8 * 4_194_304
    gathers = [i for i in items if i.label == "pp/forward/gather"]
    assert [(i.op, i.axis, i.nbytes, i.count, i.pp_ranks) for i in gathers] == [
        (Collective.ALL_GATHER, Axis.TP, 16_777_216, 8, (1,))]
    assert sent(items, pp_rank=1, label_prefix="pp/forward/gather") == 8 * 12_582_912


def test_scatter_gather_is_off_with_sequence_parallelism_or_when_asked():
    """With SP the boundary tensor is already a b*s/t*h sequence shard, different on each TP rank:
    Megatron sends it whole and gathers nothing; scatter_gather=False sends the full b*s*h."""
    training = TrainingSpec(global_batch=8, seq_len=2048)
    for plan, msg in ((Plan(tp=4, pp=2, sequence_parallel=True), 2048 // 4 * 4096 * 2),
                      (Plan(tp=4, pp=2, scatter_gather=False), 2048 * 4096 * 2)):
        items = communication_list(LLAMA_7B, training, plan)
        assert {i.nbytes for i in items if i.axis is Axis.PP and i.op is Collective.SEND_RECV} == {msg}
        assert not [i for i in items if i.label.endswith("/gather")]


def test_scatter_gather_falls_back_when_tp_does_not_divide_the_tensor():
    """Megatron sends whole tensors when tp does not divide their size: 12 elements split over
    tp 4, 10 do not."""
    plan = Plan(tp=4, pp=2)
    assert plan.pipeline_scatter_gather(12) and not plan.pipeline_scatter_gather(10)


def test_interleaving_multiplies_pipeline_traffic():
    """v chunks per rank: v*p - 1 stage boundaries instead of p - 1 (Narayanan: 'v times more')."""
    training = TrainingSpec(global_batch=8, seq_len=2048)
    plain = communication_list(LLAMA_7B, training, Plan(pp=4))
    inter = communication_list(LLAMA_7B, training, Plan(pp=4, vpp=2, schedule="interleaved"))
    total = lambda items: sum(sent(items, pp_rank=r, axis=Axis.PP) for r in range(4))  # noqa: E731
    assert total(inter) * (4 - 1) == total(plain) * (2 * 4 - 1)


def test_expert_parallel_all_to_all():
    """Per MoE layer and micro-batch: dispatch and combine, forward and backward (4 AllToAll) of
    num_experts * b*s * h elements: 8 * 4096 * 4096 * 2 B for a Mixtral-shaped layer."""
    spec = LLAMA_7B.model_copy(update={"moe": MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=14336)})
    items = [i for i in communication_list(spec, TrainingSpec(global_batch=2, seq_len=4096), Plan(dp=2, ep=2))
             if i.op is Collective.ALL_TO_ALL]
    assert sum(i.count for i in items) == 4 * 32 * 1
    assert {i.nbytes for i in items} == {8 * 4096 * 4096 * 2}


def test_sequence_parallel_dispatch_sends_each_rank_its_own_tokens():
    """tp 2 with sequence parallelism, ep 2 (Megatron-core token_dispatcher.py, all-to-all
    dispatcher): each TP rank permutes and all-to-alls its own s/tp tokens (dispatch_preprocess /
    token_dispatch), all-gathers what arrived over tp before the experts (dispatch_postprocess,
    gather_from_sequence_parallel_region over tp_group) and reduce-scatters their output after them
    (combine_preprocess). Mixtral-shaped layer, one slot per local token: AllToAll 8 x (4096 / 2) x
    4096 x 2 B, AllGather / ReduceScatter 2 x that; the routed experts have no f / g of their own."""
    spec = LLAMA_7B.model_copy(update={"moe": MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=14336)})
    items = communication_list(spec, TrainingSpec(global_batch=2, seq_len=4096),
                               Plan(dp=2, ep=2, tp=2, sequence_parallel=True))
    a2a = [i for i in items if i.op is Collective.ALL_TO_ALL]
    assert {i.nbytes for i in a2a} == {8 * 2048 * 4096 * 2}
    assert sum(i.count for i in a2a) == 4 * 32
    experts = [i for i in items if str(i.label).startswith("tp/experts")]
    assert {(i.op, i.nbytes) for i in experts} == {(Collective.ALL_GATHER, 8 * 4096 * 4096 * 2),
                                                    (Collective.REDUCE_SCATTER, 8 * 4096 * 4096 * 2)}
    assert sum(i.count for i in experts) == 4 * 32  # AllGather + ReduceScatter, forward and backward
    assert not [i for i in items if str(i.label).startswith("tp/mlp")]


def test_startup_broadcast_and_barrier_are_marked():
    """Start-up traffic is flagged, once per run: one Broadcast per unit, one Barrier."""
    items = communication_list(GPT2_SMALL, TrainingSpec(global_batch=4, seq_len=1024), Plan(dp=2, tp=2))
    startup = [i for i in items if i.startup]
    assert {i.op for i in startup} == {Collective.BROADCAST, Collective.BARRIER}
    assert sum(i.count for i in startup if i.op is Collective.BROADCAST) == 1 + 1 + 12 + 1  # word, extra, blocks, head


def test_single_rank_plan_has_no_communication():
    """dp = tp = pp = 1: nothing to send."""
    assert communication_list(GPT2_SMALL, TrainingSpec(global_batch=4, seq_len=1024), Plan()) == []


@pytest.mark.parametrize("op,p,rank,root,expected", [
    (Collective.ALL_REDUCE, 4, 0, 0, 2 * 3 * 100 // 4),  # ring: 2(p-1)/p * n
    (Collective.ALL_GATHER, 4, 2, 0, 3 * 100 // 4),  # ring: (p-1)/p * n
    (Collective.BROADCAST, 4, 0, 0, 200),  # binomial root of 4 ranks: children 1 and 2
    (Collective.BROADCAST, 4, 2, 0, 100),  # relative rank 2 forwards to rank 3
    (Collective.BROADCAST, 5, 0, 0, 300),  # root of 5: children 1, 2 and 4
    (Collective.BROADCAST, 4, 1, 1, 200),  # root 1 is relative rank 0
])
def test_bytes_per_rank_by_hand(op, p, rank, root, expected):
    """Per-rank bytes of the executor's algorithms on a 100-byte message (hand-counted)."""
    assert bytes_per_rank(op, EXECUTOR_ALGO[op], 100, p, rank, root)[0] == expected


def test_ring_all_reduce_with_uneven_chunks():
    """5 elements over 2 ranks split 3 + 2 (numpy array_split); each rank sends one of each: 5."""
    assert bytes_per_rank(Collective.ALL_REDUCE, "ring", 40, 2, 0, itemsize=8) == (40, 40)
    assert bytes_per_rank(Collective.ALL_REDUCE, "ring", 40, 3, 1, itemsize=8)[0] == 2 * 40 - 16 - 8
