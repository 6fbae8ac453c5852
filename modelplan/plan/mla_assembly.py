"""Multi-latent attention's q and k assembled in eager PyTorch: the cats and their gradients' joins.

Both NeMo AutoModel's MLA (89e3a9fdd `components/models/deepseek_v3/layers.py` MLA.forward) and
Megatron-core's unfused path (core 0.12.2 `transformer/multi_latent_attention.py`
`qkv_up_proj_and_rope_apply`) split q_b's output into q_nope / q_pe and kv_b's into k_nope / v,
rotate the rope parts, then `torch.cat([q_nope, q_pe])` and `torch.cat([k_nope, k_pe.expand(heads)])`:
each cat reads and writes every q / k value (2d). In backward the cats' gradients are views; q's
split joins its two gradients (a cat, 2d per q value), k_pe's expand sums its gradient over the
heads (reads d per broadcast value) and kv_b's split joins k_nope's and v's gradients (2d per kv_b
value). Megatron-core also makes v contiguous (`value.contiguous()`, a copy of the strided split,
2d; its gradient passes through): `v_copy`.
"""

from __future__ import annotations

from modelplan.plan.kernel_types import Elementwise
from modelplan.plan.kernels import LayerKernels
from modelplan.specs.transformer import TransformerSpec


def mla_assembly(kernels: LayerKernels, spec: TransformerSpec, dtype_bytes: int,
                 v_copy: bool = False) -> list[Elementwise]:
    """The q / k cats and their gradients' joins (module docstring), sized by the block's q and kv_b
    GEMMs (tokens x heads x qk_head_dim q values, tokens x heads x (nope + v) kv_b values); `v_copy`:
    also v made contiguous (tokens x heads x v values)."""
    by_name = {g.name: g for g in kernels.gemms}
    q = by_name.get("attention/q_b") or by_name.get("attention/q")
    kv_b = by_name.get("attention/kv_b")
    if spec.mla is None or q is None or kv_b is None:
        return []
    d, mla = dtype_bytes, spec.mla
    q_values, kv_values = q.m * q.n, kv_b.m * kv_b.n
    k_pe_share = mla.qk_rope_head_dim / mla.qk_head_dim  # the broadcast k_pe among k's values
    ops = [Elementwise("attention/q_cat", q_values, 2 * d, 2 * d),  # cat; bwd: the split's join
           Elementwise("attention/k_cat", q_values, 2 * d, k_pe_share * d),  # bwd: expand's sum over heads
           Elementwise("attention/kv_split", kv_values, 0, 2 * d, (0, 1))]  # bwd: k_nope's and v's join
    if v_copy:
        v_values = kv_values * mla.v_head_dim // (mla.qk_nope_head_dim + mla.v_head_dim)
        ops.append(Elementwise("attention/v_copy", v_values, 2 * d, 0, (1, 0)))
    return ops
