"""Time of the recomputed forward of Megatron-core's `--recompute-modules` in one block: the
kernels of exactly those modules (`plan/kernels.py` names), at the roofline costs the block's own
forward is priced at (`plan/compute.py`). What each module re-runs (megatron-core core_v0.16,
`modelplan.count.recompute_modules`):
- core_attn: the attention core (QK^T, softmax, dropout, context, or the fused kernel);
- layernorm: each norm that is a module of its own (`count.recompute_modules.separate_norms`);
- moe_act: the routed experts' activation (moe/experts.py `bias_act_func`);
- mla_up_proj: the Q (up-)projection, the KV up-projection and rope (unfused: with the q / k cats and
  v's copy, `plan/mla_assembly.py`);
- mlp: a dense layer's MLP with its fused norm (TE LayerNormLinear re-runs the norm);
- moe: the whole MoE layer (router, permute, experts, unpermute, shared experts); its
  all-to-alls re-run too, priced with the expert-parallel exchange only under full recompute
  (`parallel/ep.py`), so not here;
- shared_experts: the shared experts' MLP (and gate).
"""

from __future__ import annotations

from typing import Callable

from modelplan.count.recompute_modules import separate_norms
from modelplan.count.blocks import Block, block_of
from modelplan.specs.transformer import TransformerSpec

MODULE_KERNELS: dict[str, tuple[str, ...]] = {
    "moe_act": ("mlp/experts/act",),
    "mla_up_proj": ("attention/q", "attention/q_b", "attention/kv_b", "attention/rotary", "attention/q_cat",
                    "attention/k_cat", "attention/v_copy"),  # the unfused path's cats (`mla_assembly.py`)
    "mlp": ("mlp/in", "mlp/out", "mlp/act"),
    "moe": ("mlp/router", "mlp/router/softmax_topk", "mlp/permute", "mlp/unpermute", "mlp/experts/in",
            "mlp/experts/out", "mlp/experts/act", "mlp/shared/in", "mlp/shared/out", "mlp/shared_gate",
            "mlp/shared/act"),
    "shared_experts": ("mlp/shared/in", "mlp/shared/out", "mlp/shared_gate", "mlp/shared/act"),
}
"""The kernels each module re-runs, by `plan/kernels.py` / `plan/block_kernels.py` name."""


def recomputed_kernel_names(spec: TransformerSpec, block: Block, modules: tuple[str, ...]) -> set[str]:
    """Names of the kernels `modules` re-run in one block of kind `block` (module docstring;
    mlp only in dense layers, the MoE names only in MoE layers)."""
    moe = bool(block.mlp and block.moe and spec.moe is not None)
    names: set[str] = set()
    for module in modules:
        if module == "mlp" and moe:
            continue  # Megatron-core: MoE layers ignore "mlp" (transformer_layer.py recompute_mlp)
        names.update(MODULE_KERNELS.get(module, ()))
    return names


def recomputed_norms(spec: TransformerSpec, block: Block, modules: tuple[str, ...]) -> int:
    """Norm kernels `modules` re-run in one block: the separate norms under layernorm, the MLP's
    fused norm under mlp (dense layers)."""
    input_norm, mlp_norm = separate_norms(spec, block)
    norms = (input_norm + mlp_norm) if "layernorm" in modules else 0
    dense = block.mlp and not (block.moe and spec.moe is not None)
    return norms + (1 if "mlp" in modules and dense and not mlp_norm else 0)


def modules_forward_s(spec: TransformerSpec, block: Block | None, moe_layer: bool, modules: tuple[str, ...],
                      kernels, gemm_s: Callable, elementwise_s: Callable, core_s: float) -> float:
    """Seconds of the recomputed forward of `modules` in one block (`block`; None: the model's
    first block with this `moe_layer` flag): its named GEMMs (`gemm_s`, the forward's own
    pricing, fp8 rate included), element-wise kernels (`elementwise_s`), norms, and the attention
    core (`core_s`) under core_attn."""
    if not modules:
        return 0.0
    if block is None:
        block = block_of(spec, next((i for i in range(spec.layers) if spec.is_moe_layer(i) == moe_layer), 0))
    names = recomputed_kernel_names(spec, block, modules)
    seconds = sum(gemm_s(g) for g in kernels.gemms if g.name in names)
    seconds += sum(elementwise_s(e) for e in kernels.elementwise if e.name in names)
    norm = next((e for e in kernels.elementwise if e.name == "norm"), None)
    if norm is not None:
        seconds += recomputed_norms(spec, block, modules) * elementwise_s(norm)
    return seconds + (core_s if "core_attn" in modules else 0.0)

