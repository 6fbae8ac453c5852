"""fp8 training: which GEMMs run at the fp8 rate and what the scaling recipe costs around them.

Transformer Engine and torchao quantise the inputs of each linear layer's three GEMMs
(forward Y = X W, dgrad dX = dY W^T, wgrad dW = X^T dY) to fp8 with a scale, run the GEMM on
fp8 tensor cores and write bf16; attention, norms, the output layer and the router stay in 16
bits (TE `fp8_autocast` covers TE linear modules only; torchtitan's float8 converter skips the
`output` layer). Hopper's fp8 GEMM takes its operands K-major, so each quantised tensor is also
needed transposed. Per element of a quantised operand the recipe costs HBM passes (d = bytes of
the 16-bit input):
- delayed (TE DelayedScaling): the scale comes from an amax history, the amax of this tensor is
  taken inside the cast; one fused cast-transpose reads d and writes the fp8 copy and its
  transpose: d + 2 (TE `cast_transpose`, amax fused);
- current / tensorwise (TE Float8CurrentScaling, torchao tensorwise): the scale needs this
  tensor's amax first, a separate reduction pass, then the cast-transpose: 2 d + 2;
- rowwise / blockwise (torchao rowwise, 1x128 / 128x128 blocks): scales per row (block) are
  taken inside the cast, but the transposed operand needs its own column-wise scales, so the
  16-bit tensor is read twice: 2 d + 2.
Weights are quantised once per step when the engine caches them across micro-batches (TE
`is_first_microbatch`), else in every forward (torchao). Rowwise- and block-scaled GEMMs run in
CUTLASS / DeepGEMM kernels slower than cuBLAS's per-tensor-scaled ones (`CostModel`).
With fp8 parameter gathers (`TrainingSpec.fp8_param_gather`) the ZeRO / FSDP parameter AllGather
of the blocks' linear weights moves 1 byte per element instead of 2 (`param_gather_bytes`).
"""

from __future__ import annotations

FP8_GEMMS = ("attention/qkv", "attention/out", "mlp/in", "mlp/out", "mlp/experts/in", "mlp/experts/out",
             "mlp/shared/in", "mlp/shared/out")
"""Block GEMMs that run in fp8 (linear layers; the attention core, router and head stay 16-bit)."""


def is_fp8_gemm(name: str) -> bool:
    """Whether a GEMM of `plan/kernels.py` (or its /dgrad, /wgrad) runs in fp8 under fp8 training."""
    return name.split("/dgrad")[0].split("/wgrad")[0] in FP8_GEMMS


def cast_bytes_per_element(recipe: str, dtype_bytes: int) -> int:
    """HBM bytes per element of one operand's quantisation (module docstring)."""
    d = dtype_bytes
    if recipe == "delayed":
        return d + 2
    return 2 * d + 2


def quantisation_bytes(recipe: str, dtype_bytes: int, m: int, k: int, n: int, backend: str,
                       weight_in_fp8: bool = False) -> tuple[int, int]:
    """(forward, backward) HBM bytes of quantising one linear layer's operands, out (m, n) =
    in (m, k) @ w (k, n). te: the input in forward (with its transpose for wgrad), the output
    gradient in backward, the weight once per step (cached: counted 0 per micro-batch). torchao:
    input and weight in forward, and in backward the output gradient plus the input and weight
    again from their 16-bit copies. `weight_in_fp8`: the weight arrives already in fp8 (torchao's
    FSDP2 float8 all-gather: `WeightWithDynamicFloat8CastTensor.fsdp_post_all_gather` returns a
    Float8Tensor and Float8Linear skips it, `tensor_already_casted_to_fp8`, torchao
    float8/float8_linear.py): no pass in forward, and in backward only the copy that gives dgrad's
    second operand `_scaled_mm`'s column-major layout (float8_ops.py `preprocess_addmm`:
    `b_data.t().contiguous().t()`), 1 + 1 bytes per element. The cast itself is of the 1/dp shard
    before the gather, on FSDP2's all-gather copy-in stream, with the scale precomputed once per
    step (`precompute_float8_dynamic_scale_for_fsdp`): not counted here."""
    per = cast_bytes_per_element(recipe, dtype_bytes)
    if backend == "te":
        return per * m * k, per * m * n
    if weight_in_fp8:
        return per * m * k, per * (m * n + m * k) + 2 * k * n
    return per * (m * k + k * n), per * (m * n + m * k + k * n)


def weight_arrives_in_fp8(gemm_name: str, fp8_weights_gathered: bool) -> bool:
    """Whether a linear layer's weight comes out of torchao's float8 all-gather already in fp8:
    the dense `nn.Linear`s only, not the routed experts (`param_gather_bytes`)."""
    return fp8_weights_gathered and "/experts/" not in gemm_name


def gemm_rate_factor(recipe: str, scaled_gemm_factor: float) -> float:
    """Rate of a recipe's fp8 GEMM relative to cuBLAS's per-tensor-scaled fp8 GEMM."""
    return scaled_gemm_factor if recipe in ("rowwise", "blockwise") else 1.0


def param_gather_bytes(unit: str, dtype_bytes: int, fp8_param_gather: bool, recipe: str | None, backend: str) -> int:
    """Bytes per element of a unit's ZeRO / FSDP parameter AllGather (units of `plan/shard.py`).

    1 for a block's weights when the run gathers its parameters in fp8: Megatron
    `--fp8-param-gather` ("perform the param all-gather in fp8", TE modules: the blocks' linear
    layers, the routed experts' grouped GEMMs too); torchao `enable_fsdp_float8_all_gather`
    ("cast Float8Linear.weight from high precision to float8 before FSDP all-gather", torchtitan
    docs/float8.md), tensorwise only (torchao float8/config.py: "enable_fsdp_float8_all_gather only
    supports tensorwise scaling granularity"), dense `nn.Linear`s only (torchtitan's float8
    converter swaps `nn.Linear`, not grouped experts). The block's norm weights (2 h of ~12 h^2
    elements) are counted with them. Embedding and output layer stay 16-bit (neither engine casts
    them to fp8)."""
    if not fp8_param_gather or recipe is None:
        return dtype_bytes
    if backend != "te" and recipe != "tensorwise":
        return dtype_bytes
    parts = unit.split("/")
    if parts[0] not in ("layers", "mtp"):
        return dtype_bytes
    if parts[-1] == "experts" and backend != "te":
        return dtype_bytes
    return 1


def param_gather_note(fp8_param_gather: bool, recipe: str | None, backend: str) -> str | None:
    """The run asks for fp8 parameter gathers that its engine's recipe cannot do (torchao's
    float8 all-gather is tensorwise only, `param_gather_bytes`): a note that they stay 16-bit."""
    if not fp8_param_gather or recipe is None or backend == "te" or recipe == "tensorwise":
        return None
    return (f"fp8 parameter gather: torchao gathers in fp8 under tensorwise scaling only; the {recipe} recipe "
            "gathers the 16-bit weights (torchao float8/config.py enable_fsdp_float8_all_gather)")
