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

Inkling 2 (`Inkling2SlidingDecoderLayer`, `Inkling2FullDecoderLayer`, `Inkling2TextModel`) adds:

- learned (heads, head_dim) and (heads, d_rel) scales before the L2 clips of the queries and the
  relative states (Inkling2ScaledL2Clip; keys are clipped, values RMS-normed, weight-free);
- in full blocks, dynamic k/v convolutions: the taps are a static (L, c) weight plus per-token taps
  weight_proj Linear(h, kv_heads L) shared within a kv head (Inkling2DynamicShortConvolution);
- a per-token sink logit a head, sink_proj Linear(h, heads);
- attention residuals over block states (Inkling2BlockAttentionResidual): each block pools its
  attention input (1 learned h-wide query in sliding blocks, 3 in full ones -- q, k, v inputs --,
  none in block 0) and its MLP input (1 query) over the states of every `pool_block_layers` blocks
  so far, and the model pools the final norm's input (1 query); full blocks norm their q, k and v
  inputs apart (2 norms beyond the block's own).

Inkling 2 Loop (`Inkling2LoopTextModel`) runs blocks loop_start .. loop_end - 1 `loop_passes` times
(the same weights, each pass restarting from the pre-loop states); from the second pass each looped
block gates messages pooled from the previous pass into its q, k, v and MLP inputs: four
Inkling2LoopMessageGate (down_proj Linear(2h, r), forget / message gates Linear(r, h) each) and the
model's message_input queries, (4, h) a looped block.
"""

from __future__ import annotations

from pydantic import Field, model_validator

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
    clip_scales: bool = False
    """Inkling 2's learned scales of the queries and relative states (module docstring)."""
    dynamic_kv_conv: bool = False
    """Inkling 2's per-token conv taps on the keys and values of full blocks."""
    sink_proj: bool = False
    """Inkling 2's per-token sink logits, Linear(h, heads)."""
    pool_block_layers: int | None = Field(None, gt=0)
    """Inkling 2's attention residuals: blocks summed into one block state (HF
    n_layers_per_attn_res_block); None: plain residuals."""
    loop_start: int = Field(0, ge=0)
    """First looped block (HF loop_layer_index_start)."""
    loop_end: int = Field(0, ge=0)
    """Block after the last looped one (HF loop_layer_index_end); loop_start == loop_end: no loop."""
    loop_passes: int = Field(1, gt=0)
    """Passes over the looped blocks (HF loop_num_passes)."""
    loop_gate_rank: int = Field(1, gt=0)
    """r: rank of the message gates (HF loop_gate_rank)."""

    @model_validator(mode="after")
    def _check_loop(self) -> "ConvRelativeSpec":
        if self.loop_end < self.loop_start:
            raise ValueError(f"conv_relative.loop_end ({self.loop_end}) must not precede loop_start ({self.loop_start})")
        return self
