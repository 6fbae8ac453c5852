"""Fine-tuning plans (modelplan.plan.finetune): frozen base, adapter states sharded by ZeRO, the
adapters' gradient reduction, FLOPs without the frozen weight gradients, and QLoRA of LLaMA-65B
against the QLoRA paper (Dettmers et al. 2023, arXiv 2305.14314)."""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.comm.ops import Axis, Collective
from modelplan.errors import SpecError
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.finetune import FinetunePlanner
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.search import SearchSpace, search_plans
from modelplan.specs.finetune import FinetuneSpec
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

H100 = load_cluster("dgx-h100")
# LLaMA-65B: Touvron et al. 2023 Table 2 with the HF huggyllama/llama-65b config; the paper's QLoRA
# recipe (qlora.py defaults, App. B.2): r 64 on every block linear, bf16 adapters, NF4 + double
# quantization, paged AdamW 32-bit, gradient checkpointing, batch 1, sequence 512.
LLAMA_65B = TransformerSpec(name="LLaMA-65B", layers=80, hidden=8192, heads=64, ffn_hidden=22016, vocab=32000)
QLORA = FinetuneSpec(method="qlora", lora_rank=64, lora_targets=("all-linear",), adapter_dtype="bf16")
QLORA_STEP = TrainingSpec(global_batch=1, seq_len=512, recompute="full", finetune=QLORA)
# Llama-2-7B, LoRA r 8 on PEFT's default q_proj, v_proj: 32 blocks x 2 modules x 8 x (4096 + 4096)
LLAMA2_7B_PARAMS = 6_738_415_616  # HF meta-llama/Llama-2-7b-hf safetensors total
LORA_7B = 32 * 2 * 8 * (4096 + 4096)
LORA = FinetuneSpec(method="lora", lora_rank=8)


def lora_training(**kw) -> TrainingSpec:
    return TrainingSpec(global_batch=kw.pop("global_batch", 16), seq_len=kw.pop("seq_len", 512), finetune=LORA, **kw)


def test_qlora_65b_on_one_80gb_gpu_is_near_the_papers_48gb():
    """QLoRA abstract: 65B fine-tunes in '<48GB' on one GPU; the one-GPU plan fits 80 GB within 10% of 48 GB."""
    est = estimate_plan(LLAMA_65B, QLORA_STEP, Plan(dp=1), H100)
    assert est.fits
    assert abs(est.peak_memory_bytes - 48e9) / 48e9 < 0.10


def test_qlora_65b_search_on_two_80gb_gpus_fits():
    """The search over 2 x 80 GB finds fitting QLoRA plans, each GPU holding less than on one GPU."""
    result = search_plans(LLAMA_65B, QLORA_STEP, H100, 2, SearchSpace(recompute=["full"]))
    assert result.best and all(e.fits for e in result.best)
    assert result.best[0].peak_memory_bytes < 48e9


def test_lora_7b_state_bytes_by_hand():
    """bf16 frozen base (2 B/param), fp32 adapters and gradients (4 + 4 B), Adam m, v (8 B) sharded by ZeRO-1 over 8."""
    est = estimate_plan(load_model("llama-2-7b"), lora_training(), Plan(dp=8, zero=1), H100)
    mem = est.memory[0]
    assert mem.weights == 2 * LLAMA2_7B_PARAMS + 4 * LORA_7B
    assert mem.gradients == 4 * LORA_7B
    assert mem.optimizer == 8 * LORA_7B / 8


def test_lora_adapters_split_over_tp_like_their_base():
    """tp 2: q_proj and v_proj are column-parallel, so lora_A (4096 x 8) is whole and lora_B (8 x 2048) halved."""
    est = estimate_plan(load_model("llama-2-7b"), lora_training(), Plan(tp=2, dp=4, zero=0), H100)
    per_rank = 32 * 2 * 8 * (4096 + 2048)
    assert est.memory[0].gradients == 4 * per_rank and est.memory[0].optimizer == 8 * per_rank


def test_zero3_shards_the_frozen_base():
    """ZeRO-3 (FSDP-QLoRA) keeps 1/dp of the frozen base and of the adapters plus two gathered blocks of each."""
    spec, training = load_model("llama-2-7b"), lora_training()
    whole = estimate_plan(spec, training, Plan(dp=8, zero=0), H100).memory[0].weights
    sharded = estimate_plan(spec, training, Plan(dp=8, zero=3), H100).memory[0].weights
    block = 2 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096)  # one block's bf16 weights and two RMSNorms
    adapters = 4 * LORA_7B / 8 + 2 * 4 * LORA_7B / 32
    assert sharded == pytest.approx((whole - 4 * LORA_7B) / 8 + 2 * block + adapters)


def test_all_reduce_moves_the_adapters_gradient_bytes():
    """ZeRO-0 reduces, per block, 2 x 8 x 8192 fp32 adapter gradients: 16,777,216 B in all, nothing of the base."""
    planner = FinetunePlanner(load_model("llama-2-7b"), lora_training())
    calls = RankCalls()
    planner.dp_calls(calls, blocks=32, tp=1, group=8, zero=0, frozen_rest=0)
    sent = {key[0]: key[3] * n for key, n in calls.counts.items()}
    assert 4 * LORA_7B == 16_777_216
    assert sent == {Collective.ALL_REDUCE: 16_777_216}


def test_zero1_reduce_scatters_and_gathers_the_adapters_only():
    """ZeRO-1: one ReduceScatter of the adapter gradients and one AllGather of the adapters, 16,777,216 B each."""
    planner = FinetunePlanner(load_model("llama-2-7b"), lora_training())
    calls = RankCalls()
    planner.dp_calls(calls, blocks=32, tp=1, group=8, zero=1, frozen_rest=0)
    sent = {key[0]: key[3] * n for key, n in calls.counts.items()}
    assert sent == {Collective.REDUCE_SCATTER: 16_777_216, Collective.ALL_GATHER: 16_777_216}


def test_dp_time_prices_the_adapters_all_reduce():
    """The evaluator's DP AllReduce is 32 calls of one block's 131,072 B of adapter gradients over the dp group."""
    ev = Evaluator(load_model("llama-2-7b"), lora_training(), H100)
    times = ev.dp_entry(1, 1, 8, 0, False, 0).times
    one = ev.pricer.time_s(Collective.ALL_REDUCE, 2 * 8 * 8192 * 4, ev.shapes(1, 8, 1)[Axis.DP])
    assert times.all_reduce == pytest.approx(32 * one)


def test_lora_flops_drop_the_frozen_weight_gradients():
    """Model FLOPs = full fine-tuning's - 2 x tokens x frozen matmul weights + 6 x tokens x adapters (about 2/3)."""
    spec, plan = load_model("llama-2-7b"), Plan(dp=8)
    full = estimate_plan(spec, TrainingSpec(global_batch=16, seq_len=512), plan, H100)
    lora = estimate_plan(spec, lora_training(), plan, H100)
    tokens = 16 * 512
    linears = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008) + 4096 * 32000  # block projections + lm_head
    assert lora.model_flops == pytest.approx(full.model_flops - 2 * tokens * linears + 6 * tokens * LORA_7B)
    assert abs(lora.model_flops / full.model_flops - 2 / 3) < 0.02  # Kaplan et al. 2020: 6N -> 4N per token


def test_lora_step_is_faster_than_full_and_qlora_pays_dequantization():
    """Same plan: LoRA's compute < full fine-tuning's (no weight gradients); QLoRA's >= LoRA's (NF4 dequantize)."""
    spec, plan = load_model("llama-2-7b"), Plan(dp=8)
    full = estimate_plan(spec, TrainingSpec(global_batch=16, seq_len=512), plan, H100).step.compute_s
    lora = estimate_plan(spec, lora_training(), plan, H100).step.compute_s
    qlora = estimate_plan(spec, TrainingSpec(global_batch=16, seq_len=512, finetune=FinetuneSpec(method="qlora")),
                          plan, H100).step.compute_s
    assert lora < 0.8 * full and qlora > lora


def test_qlora_frozen_base_is_nf4():
    """NF4 + double quantization: 4.127 bits per block-linear weight (QLoRA sec. 3), embeddings and head at 2 B."""
    training = TrainingSpec(global_batch=16, seq_len=512, finetune=FinetuneSpec(method="qlora"))
    weights = estimate_plan(load_model("llama-2-7b"), training, Plan(dp=1), H100).memory[0].weights
    linears = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    expected = linears * 4.127 / 8 + 2 * (LLAMA2_7B_PARAMS - linears) + 4 * LORA_7B
    assert abs(weights - expected) / expected < 0.001


def test_adapters_on_moe_models_are_refused():
    """Planning a fine-tune of an MoE model is not modelled: a SpecError naming the model."""
    with pytest.raises(SpecError, match="MoE"):
        Evaluator(load_model("mixtral-8x7b"), lora_training(), H100)


def test_qlora_with_fp8_is_refused():
    """fp8 training of adapters on a frozen base is not modelled."""
    with pytest.raises(ValueError, match="fp8"):
        TrainingSpec(precision="fp8", finetune=QLORA)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_lora_flops_against_pytorch_flop_counter():
    """PyTorch's FlopCounterMode on a small Llama (transformers, eager attention) with PEFT LoRA r 4 on
    q_proj, v_proj: one fwd + bwd skips every frozen weight gradient and adds 6 x tokens x adapters, as
    the planner counts; it also skips the input gradients below the first adapters (block 0's q, k, v
    projections and lora_A, and its dK), which the planner's convention keeps (every block back-propagates)."""
    peft = pytest.importorskip("peft")
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import config, hf_config, transformers_module
    from modelplan.count.flops import count_flops
    from modelplan.specs.hf import from_hf_config

    h, q, kv, heads, d, ffn, vocab, layers, r, batch, seq = 64, 64, 32, 4, 16, 96, 128, 2, 4, 2, 12
    data = config("llama-3-8b", hidden_size=h, intermediate_size=ffn, num_attention_heads=heads,
                  num_key_value_heads=2, head_dim=d, vocab_size=vocab, num_hidden_layers=layers, pad_token_id=None)
    transformers = transformers_module()

    def measured(lora: bool) -> int:
        cfg = hf_config(data)
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(cfg)
        if lora:
            model = peft.get_peft_model(model, peft.LoraConfig(r=r, target_modules=["q_proj", "v_proj"]))
        ids = torch.randint(0, vocab, (batch, seq))
        counter = FlopCounterMode(display=False)
        with counter:
            model(input_ids=ids, labels=ids).loss.backward()
        counts = counter.get_flop_counts()
        rotary = sum(n for name, ops in counts.items() if name.endswith("rotary_emb") for n in ops.values())
        return sum(counts["Global"].values()) - rotary

    tokens = batch * seq
    linears = layers * (h * q + 2 * h * kv + q * h + 3 * h * ffn) + h * vocab  # block projections + lm_head
    adapters = layers * r * ((h + q) + (h + kv))  # q_proj (64 -> 64), v_proj (64 -> 32)
    first_block = 2 * tokens * h * (q + 2 * kv) + 2 * 2 * tokens * h * r + 2 * batch * heads * seq * seq * d
    full, lora = measured(False), measured(True)
    assert lora == full - 2 * tokens * linears + 6 * tokens * adapters - first_block
    spec = from_hf_config(data, "config.json")
    plain = TrainingSpec(global_batch=batch, seq_len=seq, attention="eager")
    tuned = plain.model_copy(update={"finetune": FinetuneSpec(method="lora", lora_rank=r)})
    assert count_flops(spec, plain).model == full  # the convention equals FlopCounterMode for full training
    planner = FinetunePlanner(spec, tuned)
    ours = batch * planner.flops_per_sequence(full / batch, full / batch, "none")[0]
    assert ours == lora + first_block
