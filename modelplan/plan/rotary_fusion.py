"""Megatron-core's unfused rotary embedding for YaRN models.

The planner prices a fused engine's rotary as one kernel that reads and writes q and k once each
way. Megatron-core does not fuse YaRN's rotary:
- Megatron-Bridge (`utils/fusions.py` `validate_rope_fusion_compatibility`, v0.2.0 on) turns
  `apply_rope_fusion` off unless `position_embedding_type == "rope"`, and its GPT-OSS provider sets
  `position_embedding_type = "yarn"`;
- Megatron-core (`models/common/embeddings/rope_utils.py` `apply_rotary_pos_emb`, the 25.11 rows'
  0d8e0714 and later) falls back to the unfused path whenever the YaRN concentration factor
  (`_yarn_get_concentration_factor`: 0.1 ln(factor) + 1 = 1.35 for GPT-OSS's factor 32) is not 1:
  "mscale=... is not supported by TE's fused RoPE. Using unfused implementation."
Multi-latent attention keeps its fused rotary in both (Bridge's check returns True for MLA;
DeepSeek's mscale / mscale_all_dim cancel), so an MLA model is left alone.

The unfused path (`_apply_rotary_pos_emb_bshd`, `_rotate_half`), per q or k element of d bytes:
forward `t * cos_` (2d), `-x2` over half of t (d), `torch.cat((-x2, x1))` (2d), `* sin_` (2d), the
sum (3d), `torch.cat((t, t_pass))` with an empty t_pass (2d): 12d in 6 kernels, plus cos, * mscale
and .to(dtype) for cos_ and again for sin_ over the small freqs table (6 kernels, bytes not
counted); backward the gradient times sin_ (2d), the negation's (d), the chunk's gradients joined
(2d), times cos_ (2d), the two paths summed (3d): 10d in 5 kernels. q and k are two calls.

Without `apply_rope_fusion` (`TrainingSpec.rope_fusion` False: NeMo 2's DeepSeekConfig default, and
megatron-core 0.12, which has no fused MLA rotary: `fused_apply_mla_rope_for_q` arrives in core 0.13)
every rotary runs that path; MLA's (core 0.12.2 `multi_latent_attention.py`
`qkv_up_proj_and_rope_apply`, `rope_utils._apply_rotary_pos_emb_bshd` with multi_latent_attention)
first de-interleaves its rope dims, `torch.cat((t[..., 0::2], t[..., 1::2]))` (forward 2d, one
kernel; backward each strided slice's gradient as zeros plus a strided copy, 2d and 2 kernels each,
and the two summed, 3d: 7d in 5 kernels), then cats q and k whole and makes v contiguous
(`plan/mla_assembly.py`); `mla_up_proj` recompute re-runs all of it (`plan/recompute.py`).
"""

from __future__ import annotations

from dataclasses import replace

from modelplan.plan.kernel_types import Elementwise
from modelplan.plan.kernels import LayerKernels
from modelplan.plan.mla_assembly import mla_assembly
from modelplan.specs.transformer import TransformerSpec

UNFUSED_ROTARY_BYTES = (12, 10)
"""HBM bytes per q / k element, in units of the dtype's bytes, forward and backward (docstring)."""
UNFUSED_ROTARY_KERNELS = (12, 5)
"""Kernels per call (q or k), forward and backward (docstring)."""
MLA_DEINTERLEAVE_BYTES = (2, 7)
"""MLA's de-interleave of its rope dims, bytes per value in units of the dtype's, forward and backward."""
MLA_DEINTERLEAVE_KERNELS = (1, 5)
"""Its kernels per call, forward and backward."""
ROTARY = "attention/rotary"


def runs_unfused(spec: TransformerSpec, framework: str, rope_fusion: bool = True) -> bool:
    """Megatron-core runs this model's rotary unfused: without rope fusion, or YaRN without
    multi-latent attention."""
    if framework != "megatron":
        return False
    return not rope_fusion or (spec.rope_scaling == "yarn" and spec.mla is None)


def unfused_rotary(op: Elementwise, dtype_bytes: int, mla: bool = False) -> Elementwise:
    """The rotary over `op.elements` q and k values as Megatron-core's unfused path runs it (`mla`:
    with MLA's de-interleave)."""
    fwd, bwd = UNFUSED_ROTARY_BYTES
    per_call = UNFUSED_ROTARY_KERNELS
    if mla:
        fwd, bwd = fwd + MLA_DEINTERLEAVE_BYTES[0], bwd + MLA_DEINTERLEAVE_BYTES[1]
        per_call = (per_call[0] + MLA_DEINTERLEAVE_KERNELS[0], per_call[1] + MLA_DEINTERLEAVE_KERNELS[1])
    calls = 2  # q and k
    kernels = (calls * per_call[0], calls * per_call[1])
    return Elementwise(op.name, op.elements, fwd * dtype_bytes, bwd * dtype_bytes, kernels)


def with_engine_rotary(kernels: LayerKernels, spec: TransformerSpec, framework: str,
                       dtype_bytes: int, rope_fusion: bool = True) -> LayerKernels:
    """`kernels` with the rotary priced as the engine runs it (`runs_unfused`), MLA's q / k
    assembly with it; unchanged otherwise."""
    if not runs_unfused(spec, framework, rope_fusion):
        return kernels
    mla = spec.mla is not None
    ops = tuple(unfused_rotary(e, dtype_bytes, mla) if e.name == ROTARY else e for e in kernels.elementwise)
    extra = tuple(mla_assembly(kernels, spec, dtype_bytes, v_copy=True))  # none without MLA
    return replace(kernels, elementwise=ops + extra)
