"""Bytes of weights stored in a quantized format, per tensor, as the libraries lay them out.

Only the linear layers inside the transformer blocks are quantized (bitsandbytes skips the
output layer, `llm_int8_skip_modules` / transformers' get_keys_to_not_convert; GPTQ/AWQ and
vLLM's fp8 quantize the block linears); embeddings, norms, biases and lm_head stay 16-bit.
Formats (n = in x out elements of one weight):

    nf4   bitsandbytes quantize_4bit, QLoRA (Dettmers et al. 2023 sec. 3): two 4-bit codes per byte
          ((n + 1) // 2 B) and one absmax per block of 64; plain: fp32 absmax (32/64 = 0.5 bit per
          weight); double quantization: the absmax minus their mean as uint8 in blocks of 256 with
          one fp32 constant per block, plus the fp32 mean (8/64 + 32/(64*256) = 0.127 bit per
          weight); plus the 16-entry fp32 NF4 code each tensor carries (64 B)
    int8  bitsandbytes LLM.int8 (Dettmers et al. 2022): int8 weight (n B) + fp32 scale per output row
    fp8   e4m3 weight (n B) + one fp32 per-tensor scale (vLLM / Transformer Engine per-tensor fp8)
    int4  GPTQ / AWQ GEMM layout, group 128: int32 qweight of 8 codes (in x out / 2 B), fp16 scales
          and int32-packed 4-bit zeros per group of 128 inputs and output column
"""

from __future__ import annotations

from typing import Literal

from modelplan.count.linears import Linear

QuantFormat = Literal["nf4", "int8", "fp8", "int4"]
NF4_BLOCK = 64  # bitsandbytes 4-bit blocksize (QLoRA: "a blocksize of 64 for W")
NF4_NESTED_BLOCK = 256  # QLoRA: "a blocksize of 256 for c2"
NF4_CODE_BYTES = 16 * 4  # get_4bit_type('nf4'): 16 fp32 values, one tensor per quantized weight
FP32 = 4
INT4_GROUP = 128  # GPTQ/AWQ default group_size


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def quantized_tensor_bytes(linear: Linear, fmt: QuantFormat, double_quant: bool = True) -> int:
    """Bytes of one module's quantized weight, with its quantization state."""
    n, fan_in, fan_out = linear.weight_numel, linear.in_features, linear.out_features
    if fmt == "nf4":
        blocks = _ceil_div(n, NF4_BLOCK)
        packed = (n + 1) // 2  # quantize_4bit: out of ((n + 1) // 2, 1) uint8
        if double_quant:  # qabsmax uint8 + state2.absmax fp32 per 256 + fp32 offset
            state = blocks + FP32 * _ceil_div(blocks, NF4_NESTED_BLOCK) + FP32
        else:
            state = FP32 * blocks
        return packed + state + NF4_CODE_BYTES
    if fmt == "int8":
        return n + FP32 * fan_out  # Int8Params CB (int8) + SCB (fp32 per output row)
    if fmt == "fp8":
        return n + FP32  # e4m3 + weight_scale
    if fmt == "int4":
        groups = _ceil_div(fan_in, INT4_GROUP)
        qweight = 4 * _ceil_div(fan_in, 8) * fan_out  # int32 (in / 8, out)
        scales = 2 * groups * fan_out  # fp16 (groups, out)
        qzeros = 4 * groups * _ceil_div(fan_out, 8)  # int32 (groups, out / 8)
        return qweight + scales + qzeros
    raise ValueError(f"unknown quantization format '{fmt}'")


def quantized_linears(modules: list[Linear]) -> list[Linear]:
    """The modules a weight quantizer converts: every linear inside the blocks."""
    return [m for m in modules if m.in_block]


def weights_bytes(total_params: int, modules: list[Linear], fmt: QuantFormat | None, dtype_bytes: int = 2,
                  double_quant: bool = True) -> int:
    """Bytes of all weights: the block linears in `fmt` (None: unquantized), every other
    parameter (embeddings, norms, biases, lm_head) at `dtype_bytes`."""
    if fmt is None:
        return total_params * dtype_bytes
    converted = quantized_linears(modules)
    quantized = sum(m.count * quantized_tensor_bytes(m, fmt, double_quant) for m in converted)
    rest = total_params - sum(m.count * m.weight_numel for m in converted)
    return quantized + rest * dtype_bytes
