"""What Megatron-core's `--recompute-modules` leaves out of the activations a block keeps.

Megatron-core (transformer_config.py `recompute_modules`, core_v0.16) recomputes, under
`--recompute-granularity selective`, the listed submodules of every layer in backward:
- core_attn (normal checkpoint of the attention core, transformer/attention.py
  `_checkpointed_attention_forward`): Q, K, V are the checkpoint's inputs and the output is the
  projection's input, so what goes is the eager kernel's score term (Korthikanti et al. 2022
  sec. 5); a fused kernel keeps no scores, so nothing goes (Megatron warns it is not needed).
- layernorm (output-discarding, transformer_layer.py `recompute_input_layernorm` /
  `recompute_pre_mlp_layernorm`): the output of each norm that is a module of its own is freed
  once its consumers have saved it and recomputed before their backward. In the Transformer
  Engine layer specs (models/gpt/gpt_layer_specs.py) the input norm is its own module only in MLA
  layers (else it is fused into linear_qkv, IdentityOp) and the pre-MLP norm only in MoE layers
  (the router reads it; a dense MLP fuses it into linear_fc1).
- moe_act (output-discarding, moe/experts.py TEGroupedMLP): the routed experts' activation output
  (linear_fc2's input, top_k f per token) is freed and recomputed from fc1's output.
- mla_up_proj (output-discarding, multi_latent_attention.py `qkv_up_proj_and_rope_apply`): the
  per-head Q, K, V (up-projected, rope applied) are freed once the attention core has run.
- mlp (normal checkpoint of a dense layer's MLP, transformer_layer.py `recompute_mlp`; MoE layers
  ignore it): only the MLP's input is kept; its norm output (TE LayerNormLinear's ln_out) and
  inner activations go.
- moe (normal checkpoint of the MoE layer, moe/moe_layer.py): only its input (the pre-MLP norm
  output) is kept; the routed copies, the experts' and the shared experts' inner activations go.
- shared_experts (normal checkpoint, moe/shared_experts.py): the shared experts' inner
  activations go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.specs.transformer import TransformerSpec

NORMAL_CHECKPOINT = ("core_attn", "mlp", "moe", "shared_experts")
"""Modules Megatron-core wraps in a normal checkpoint (the whole module re-runs, its input kept);
the others (moe_act, layernorm, mla_up_proj) use output-discarding checkpointing."""


class Discarded(NamedTuple):
    """Bytes per token a block no longer keeps under the listed modules."""

    replicated: int
    """Of the terms tensor parallelism leaves whole (sequence parallelism splits them)."""
    sharded: int
    """Of the terms split by tp."""
    scores: bool
    """The eager attention's score term goes (core_attn)."""
    routed_copies: bool
    """The MoE layer's permuted token copies go (moe)."""


def separate_norms(spec: "TransformerSpec", block: "Block") -> tuple[bool, bool]:
    """(input norm, pre-MLP norm) that are modules of their own in Megatron-core's Transformer
    Engine layer specs (module docstring): the input norm in MLA layers, the pre-MLP norm in MoE
    layers."""
    return spec.mla is not None, bool(block.mlp and block.moe and spec.moe is not None)


def inner_per_ffn(spec: "TransformerSpec", d: int) -> tuple[int, int]:
    """(fc1 output, fc2 input) bytes per MLP hidden unit: gated 2 d + d, plain d + d (the
    activation's input and output; count.memory._layer_terms)."""
    return (2 * d if spec.gated_mlp else d), d


def discarded(spec: "TransformerSpec", block: "Block", d: int, modules: tuple[str, ...],
              fp8_inputs: bool = False) -> Discarded:
    """What `modules` leave out of one block's kept activations, per token (module docstring);
    with Transformer Engine fp8 the GEMM inputs it would have kept are their 1-byte casts."""
    rep = sharded = 0
    moe = spec.moe if block.mlp and block.moe else None
    cast = 1 if fp8_inputs else d  # a GEMM input TE keeps as its fp8 copy
    input_norm, mlp_norm = separate_norms(spec, block)
    fc1_out, fc2_in = inner_per_ffn(spec, d)
    if "layernorm" in modules:
        rep += (cast * spec.hidden if input_norm else 0) + (d * spec.hidden if mlp_norm else 0)  # router reads 16-bit
    if "mla_up_proj" in modules and spec.mla is not None and block.mixer != "mamba":
        mla = spec.mla
        sharded += d * spec.heads * (2 * mla.qk_head_dim + mla.v_head_dim)  # per-head Q, K (nope + rope), V
    if "mlp" in modules and block.mlp and moe is None:
        shared_input = (spec.parallel_block and spec.num_norms_per_layer == 1)
        rep += 0 if shared_input else cast * spec.hidden  # the MLP norm's output (TE ln_out)
        sharded += (fc1_out + (cast if fp8_inputs else fc2_in)) * spec.ffn_hidden
    if moe is not None:
        shared_ffn = moe.shared_experts * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden)
        routed_ffn = moe.top_k * moe.expert_ffn_hidden
        if "moe" in modules:
            sharded += (fc1_out + cast) * routed_ffn + (fc1_out + cast) * shared_ffn
        else:
            if "moe_act" in modules:
                sharded += cast * routed_ffn
            if "shared_experts" in modules:
                sharded += (fc1_out + cast) * shared_ffn
    return Discarded(rep, sharded, "core_attn" in modules, moe is not None and "moe" in modules)
