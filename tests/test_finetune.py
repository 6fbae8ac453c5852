"""Fine-tuning memory (modelplan.count.finetune): hand-worked terms, and QLoRA of LLaMA-65B against
the QLoRA paper (Dettmers et al. 2023, arXiv 2305.14314)."""

from __future__ import annotations

import pytest

from modelplan.count.finetune import count_finetune
from modelplan.count.memory import count_memory
from modelplan.count.params import count_params
from modelplan.specs.finetune import FinetuneSpec
from modelplan.specs.load import load_model
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

# LLaMA-65B: Touvron et al. 2023 Table 2 (dim 8192, 64 heads, 80 layers) with the HF
# huggyllama/llama-65b config (intermediate_size 22016, vocab 32000, untied lm_head).
LLAMA_65B = TransformerSpec(name="LLaMA-65B", layers=80, hidden=8192, heads=64, ffn_hidden=22016, vocab=32000)
# The paper's QLoRA recipe (artidoro/qlora qlora.py defaults; paper Appendix B.2): r 64 on every linear
# layer of the blocks, bf16 adapters, NF4 + double quantization, paged AdamW 32-bit, gradient
# checkpointing, batch 1; sequence 512 as in the paper's memory discussion.
QLORA = FinetuneSpec(method="qlora", lora_rank=64, lora_targets=("all-linear",), adapter_dtype="bf16")
CHECKPOINTED = TrainingSpec(global_batch=1, seq_len=512, recompute="full", optimizer="adamw")


def test_qlora_65b_fits_the_papers_48gb_gpu():
    """QLoRA abstract: a 65B model fine-tunes on a single 48 GB GPU (memory '<48GB'); ours is within 10% below."""
    total = count_finetune(LLAMA_65B, CHECKPOINTED, QLORA, micro_batch=1).memory.total_bytes
    assert total <= 48e9
    assert abs(total - 48e9) / 48e9 < 0.10


def test_double_quantization_saves_about_3_gb_on_65b():
    """QLoRA sec. 1: double quantization saves 'approximately 3 GB for a 65B model' (0.373 bit per weight)."""
    plain = FinetuneSpec(method="qlora", lora_rank=64, lora_targets=("all-linear",), double_quant=False)
    nested = count_finetune(LLAMA_65B, CHECKPOINTED, QLORA, 1).memory.frozen_weights_bytes
    saved = count_finetune(LLAMA_65B, CHECKPOINTED, plain, 1).memory.frozen_weights_bytes - nested
    assert abs(saved - 3e9) / 3e9 < 0.10


def test_qlora_65b_adapter_count_by_hand():
    """r 64 on q, k, v, o (8192 -> 8192) and gate, up (8192 -> 22016), down: 80 x 64 x (4 x 16384 + 3 x 30208)."""
    result = count_finetune(LLAMA_65B, CHECKPOINTED, QLORA, 1)
    assert result.trainable_params == 80 * 64 * (4 * 16384 + 3 * 30208) == 799_539_200
    assert result.all_params == count_params(LLAMA_65B).total + 799_539_200


def test_lora_states_by_hand():
    """LoRA on Llama-3-8B: bf16 frozen base (2 B/param), fp32 adapters + grads (4 + 4 B) and Adam (8 B)."""
    spec = load_model("llama-3-8b")
    ft = FinetuneSpec(method="lora", lora_rank=8)
    result = count_finetune(spec, CHECKPOINTED, ft, 1)
    trainable = 32 * 8 * ((4096 + 4096) + (4096 + 1024))  # q_proj, v_proj (PEFT default targets)
    mem = result.memory
    assert result.trainable_params == trainable
    assert mem.frozen_weights_bytes == 2 * 8_030_261_248  # HF safetensors metadata count
    assert (mem.trainable_weights_bytes, mem.gradients_bytes, mem.optimizer_states_bytes) == (
        4 * trainable, 4 * trainable, 8 * trainable)


def test_full_finetune_is_the_training_model_states():
    """method full: the model states of count_memory (18 B/param for mixed-precision Adam)."""
    spec = load_model("gpt2")
    training = TrainingSpec(global_batch=1, seq_len=1024)
    result = count_finetune(spec, training, FinetuneSpec(), 1)
    mem = count_memory(spec, training, 1)
    assert result.memory.trainable_weights_bytes + result.memory.gradients_bytes + result.memory.optimizer_states_bytes \
        == mem.model_states == 18 * 124_439_808
    assert result.memory.frozen_weights_bytes == 0


def test_lora_dropout_keeps_a_copy_of_each_adapted_input():
    """lora_dropout > 0: each adapted module keeps its dropped input (2 B) and mask (1 B) per token."""
    spec = load_model("gpt2")
    training = TrainingSpec(global_batch=1, seq_len=1024)
    dry = count_finetune(spec, training, FinetuneSpec(method="lora", lora_targets=("c_attn",)), 1)
    wet = count_finetune(spec, training, FinetuneSpec(method="lora", lora_targets=("c_attn",), lora_dropout=0.1), 1)
    assert wet.memory.activations_bytes - dry.memory.activations_bytes == 12 * 1024 * 768 * 3


def test_base_quant_needs_qlora():
    """base_quant without method qlora is rejected where it enters."""
    with pytest.raises(ValueError, match="base_quant"):
        FinetuneSpec(method="lora", base_quant="int8")


def test_cli_count_finetune_json():
    """`count --finetune lora --json`: a finetune section with PEFT's counts and memory in bytes."""
    import json

    from typer.testing import CliRunner

    from modelplan.cli.app import app

    result = CliRunner().invoke(app, ["count", "gpt2", "--finetune", "lora", "--lora-targets", "c_attn", "--json"])
    assert result.exit_code == 0, result.output
    section = json.loads(result.output)["finetune"]
    assert section["trainable_params"] == 12 * 8 * (768 + 2304)
    assert section["all_params"] == 124_439_808 + 294_912
    assert all(key.endswith("_bytes") for key in section["memory"])


def test_cli_lora_options_need_finetune():
    """--lora-targets without --finetune is a one-line error (exit 2)."""
    from typer.testing import CliRunner

    from modelplan.cli.app import app

    result = CliRunner().invoke(app, ["count", "gpt2", "--lora-targets", "c_attn"])
    assert result.exit_code == 2 and "--finetune" in result.output
