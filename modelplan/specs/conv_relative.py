"""Short convolutions beside attention and a relative-logit bias (`ExtrasSpec.conv_relative`), the
block additions of Inkling (transformers 5.24 `InklingAttention`, `InklingDecoderLayer`):

- a causal depthwise Conv1d (no bias, kernel `conv_kernel`) with a residual, y = x + conv(x), on
  the projected keys and values (k_sconv, v_sconv: kv_heads x head_dim channels each) and on the
  output of each residual branch (attn_sconv after o_proj, mlp_sconv after the MLP: h channels);
- relative logits: r_proj Linear(h, heads x d_rel) gives each token a d_rel-wide state per head,
  mixed by a learned bank (d_rel, extent) into one bias per backward distance < extent
  (InklingRelativeLogits.proj), added to the scores; extent is `rel_extent` in full blocks and
  `sliding_rel_extent` (the window) in sliding ones;
- a learned scalar on each block's MLP output (InklingMLP.global_scale, InklingTopkRouter.global_scale)
  and `router_extra_rows` rows of the router weight that score the shared experts (shared_expert_sink).
"""

from __future__ import annotations

from pydantic import Field

from modelplan.specs.base import Spec


class ConvRelativeSpec(Spec):
    """Inkling's short convolutions, relative logits and MLP scales (module docstring)."""

    conv_kernel: int = Field(gt=0)
    """Kernel of every short convolution (HF conv_kernel_size / sconv_kernel_size)."""
    kv_conv: bool = True
    """Short convolutions on the projected keys and values (k_sconv, v_sconv)."""
    branch_conv: bool = True
    """Short convolutions on the attention and MLP branch outputs (attn_sconv, mlp_sconv)."""
    d_rel: int = Field(gt=0)
    """Per-head width of the relative states (HF d_rel)."""
    rel_extent: int = Field(gt=0)
    """Backward distances the bias spans in full-attention blocks (HF rel_extent)."""
    sliding_rel_extent: int = Field(gt=0)
    """Backward distances it spans in sliding blocks (HF sliding_window_size)."""
    mlp_scale: bool = True
    """One learned scalar on each block's MLP output (global_scale, dense or routed)."""
    router_extra_rows: int = Field(0, ge=0)
    """Router rows beyond the routed experts (Inkling: n_shared_experts, scored with them)."""
