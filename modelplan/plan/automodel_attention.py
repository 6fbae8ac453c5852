"""NeMo AutoModel's own MoE model files: the attention side's eager passes.

AutoModel 89e3a9fdd builds its MoE models from its own modules (`components/models/deepseek_v3`,
`gpt_oss`, `qwen3_moe`; Kimi K2 runs the DeepSeek-V3 one), not Transformer Engine's attention layer,
and applies the rotary embedding in plain PyTorch (the planner prices a fused engine's rotary as one
read and write of q and k):
- MLA (`deepseek_v3/layers.py` MLA.forward): `moe/rope_utils.py` `apply_rotary_emb`, the complex
  form in fp32 (`x.float()`, `view_as_complex`, `x * freqs_cis`, `.to(dtype)`: `count.eager`
  `rotary_bytes`, 3 kernels a call) over q's rope dims and the shared k_pe; then
  `q = torch.cat([q_nope, q_pe])` and `k = torch.cat([k_nope, k_pe.expand(heads)])` write q and k
  whole (read and write each value: 2d), and in backward q's split joins its gradient (2d per q
  value; the cats' own gradients are views), k_pe's expand sums its gradient over the heads (reads d
  per broadcast value) and kv_b's output split joins k_nope's and v's gradients (2d per kv_b value;
  `plan/mla_assembly.py`). TE's attention then copies v: its `get_qkv_layout`
  (attention/dot_product_attention/utils.py) finds k (the contiguous cat, 192 per head) and v (kv_b's
  split view, 256 per head) with unlike strides, 'not_supported', and makes q, k, v contiguous.
- GQA (`gpt_oss/layers.py` `_apply_rotary_emb`, which `qwen3_moe/layers.py` imports): `x1, x2 =
  chunk(x)`, `o1 = x1 * cos - x2 * sin`, `o2 = x2 * cos + x1 * sin`, `cat((o1, o2))` in the model's
  dtype, per q / k value: forward four products (d each, reading a half and writing a half), two
  sums (1.5d each), the cat (2d): 9d in 7 kernels a call; backward the subtraction's negation (d),
  four products (d each), the two halves' gradients summed (1.5d each), the chunk's gradients joined
  (2d): 10d in 8 kernels a call. The small cos / sin casts are not counted.
- GPT-OSS (`GptOssAttention.forward`, FlexAttention only: "Only Flex Attention is supported for
  GPT-OSS") also transposes q, k, v to (B, H, T, D) with `.contiguous()` before the attention and the
  output back after it: a copy of each (2d) forward and of each gradient backward.
"""

from __future__ import annotations

from dataclasses import replace

from modelplan.count.eager import ROTARY_KERNELS, rotary_bytes
from modelplan.plan.kernel_types import Elementwise
from modelplan.plan.kernels import LayerKernels
from modelplan.plan.mla_assembly import mla_assembly
from modelplan.plan.rotary_fusion import ROTARY
from modelplan.specs.transformer import TransformerSpec

HALF_SPLIT_ROTARY_BYTES = (9, 10)
"""`_apply_rotary_emb` HBM bytes per q / k value in units of the dtype's bytes, forward and backward."""
HALF_SPLIT_ROTARY_KERNELS = (7, 8)
"""Its kernels per call (q or k), forward and backward."""


def runs_own_attention(spec: TransformerSpec, framework: str) -> bool:
    """AutoModel runs this model through its own MoE model files (module docstring)."""
    return framework == "automodel" and spec.moe is not None


def eager_rotary(op: Elementwise, spec: TransformerSpec, dtype_bytes: int) -> Elementwise:
    """The rotary over `op.elements` q and k values as AutoModel's model file runs it (2 calls)."""
    if spec.mla is not None:
        fwd, bwd = rotary_bytes(dtype_bytes)
        kernels = (2 * ROTARY_KERNELS[0], 2 * ROTARY_KERNELS[1])
    else:
        fwd, bwd = (n * dtype_bytes for n in HALF_SPLIT_ROTARY_BYTES)
        kernels = (2 * HALF_SPLIT_ROTARY_KERNELS[0], 2 * HALF_SPLIT_ROTARY_KERNELS[1])
    return Elementwise(op.name, op.elements, fwd, bwd, kernels)


def gpt_oss_transposes(kernels: LayerKernels, spec: TransformerSpec, dtype_bytes: int) -> list[Elementwise]:
    """GPT-OSS's q, k, v and output transposes (`contiguous()` copies), sized by the QKV GEMM's
    output and the output projection's input."""
    if not spec.attention_sinks:
        return []
    by_name = {g.name: g for g in kernels.gemms}
    qkv, out = by_name.get("attention/qkv"), by_name.get("attention/out")
    if qkv is None or out is None:
        return []
    d = dtype_bytes
    return [Elementwise("attention/transposes", qkv.m * qkv.n + out.m * out.k, 2 * d, 2 * d, (3, 3))]


def with_automodel_attention(kernels: LayerKernels, spec: TransformerSpec, framework: str,
                             dtype_bytes: int) -> LayerKernels:
    """`kernels` with the attention side priced as AutoModel's MoE model files run it
    (`runs_own_attention`); unchanged otherwise."""
    if not runs_own_attention(spec, framework):
        return kernels
    ops = tuple(eager_rotary(e, spec, dtype_bytes) if e.name == ROTARY else e for e in kernels.elementwise)
    extra = mla_assembly(kernels, spec, dtype_bytes, v_copy=True) + gpt_oss_transposes(kernels, spec, dtype_bytes)
    return replace(kernels, elementwise=ops + tuple(extra))
