"""Quantized weight bytes (modelplan.count.quant), each format worked by hand from its library's layout."""

from __future__ import annotations

from modelplan.count.linears import Linear, linear_modules
from modelplan.count.params import count_params
from modelplan.count.quant import quantized_tensor_bytes, weights_bytes
from modelplan.specs.load import load_model

SQUARE = Linear("attention/q_proj", 4096, 4096, 1)  # n = 16,777,216 weights


def test_nf4_double_quant_by_hand():
    """NF4 + DQ: n/2 codes + n/64 uint8 absmax + 4 x n/(64*256) fp32 + 4 B mean + 64 B NF4 code."""
    n = 4096 * 4096
    expected = n // 2 + n // 64 + 4 * (n // 64 // 256) + 4 + 64
    assert quantized_tensor_bytes(SQUARE, "nf4", double_quant=True) == expected == 8_654_916


def test_nf4_bits_per_weight_match_qlora_paper():
    """QLoRA sec. 3: block-64 constants cost 32/64 = 0.5 bit per weight, 0.127 with double quantization."""
    n = SQUARE.weight_numel
    assert abs(8 * quantized_tensor_bytes(SQUARE, "nf4", double_quant=False) / n - 4.5) < 1e-3
    assert abs(8 * quantized_tensor_bytes(SQUARE, "nf4", double_quant=True) / n - 4.127) < 1e-3


def test_nf4_odd_sizes_round_up():
    """A 3 x 37 weight (111 values): 56 packed bytes, 2 blocks of 64, 1 nested block."""
    odd = Linear("mlp/fc1", 3, 37, 1)
    assert quantized_tensor_bytes(odd, "nf4", double_quant=True) == 56 + 2 + 4 + 4 + 64
    assert quantized_tensor_bytes(odd, "nf4", double_quant=False) == 56 + 4 * 2 + 64


def test_int8_fp8_int4_by_hand():
    """LLM.int8: n + 4 B per output row; fp8: n + one fp32 scale; GPTQ int4 g128: qweight, scales, qzeros."""
    n = 4096 * 4096
    assert quantized_tensor_bytes(SQUARE, "int8") == n + 4 * 4096
    assert quantized_tensor_bytes(SQUARE, "fp8") == n + 4
    groups = 4096 // 128
    assert quantized_tensor_bytes(SQUARE, "int4") == 4 * (4096 // 8) * 4096 + 2 * groups * 4096 + 4 * groups * (4096 // 8)


def test_only_block_linears_are_quantized():
    """Llama-3-8B in int8: the 32 blocks' 7 linears at 1 B (+ row scales); embeddings, lm_head, norms at 2 B."""
    spec = load_model("llama-3-8b")
    modules = linear_modules(spec, "llama")
    total = count_params(spec).total
    block = 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336)  # q, o, k, v, gate, up, down
    rows = 32 * (4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096)  # fp32 scale per output row
    assert weights_bytes(total, modules, "int8") == block + 4 * rows + 2 * (total - block)
    assert weights_bytes(total, modules, None) == 2 * total
