"""Where a block's norms sit around its sublayers and how their outputs join the residual stream,
shared by the single-device reference and the sharded executor (each supplies the sublayers).

Per sublayer f (the mixer: attention or Mamba; then the MLP), with r the residual scale
(Granite residual_multiplier):
- pre (Llama):        x + r * f(norm(x))
- sandwich (Gemma 2/3, GLM-4): x + r * post_norm(f(norm(x)))
- output (OLMo-2):    x + r * post_norm(f(x))
- post (BERT):        norm(x + r * f(x))
A parallel block (GPT-J, Falcon, Cohere) sums both branches on one residual:
x + r * (f_attn(norm(x)) + f_mlp(norm_mlp(x) or norm(x))). Norm parameters are
`<sublayer>/norm` and `<sublayer>/post_norm`; a non-affine norm (OLMo) has none.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from modelplan.count.blocks import Block
from modelplan.errors import SpecError
from modelplan.execute.shapes import norm_b, norm_f, sub
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]
SSM_MIXERS = ("mamba", "mamba2", "gated_deltanet")
"""Mixers that are their own sublayer (named as the block's mixer); every other mixer is attention."""
Run = Callable[[str, Params, np.ndarray], tuple[np.ndarray, Any]]
"""run(sublayer, its parameters, input) -> (output, cache)."""
RunBackward = Callable[[str, Params, Any, np.ndarray], tuple[np.ndarray, Params]]
"""run_backward(sublayer, its parameters, cache, output gradient) -> (input gradient, grads)."""


class NormSlots(NamedTuple):
    """The norms around one sublayer."""

    pre: bool
    """On the sublayer input."""
    post: bool
    """On the sublayer output, before the residual add."""
    after: bool
    """On the residual stream after the add (post placement)."""


def sublayers(block: Block) -> list[str]:
    """A block's sublayers in order: its mixer (none in an MLP-only block), then its MLP."""
    mixer = [] if block.mixer == "mlp" else [block.mixer if block.mixer in SSM_MIXERS else "attention"]
    return mixer + (["mlp"] if block.mlp else [])  # Nemotron-H "mlp" blocks: no mixer


def norm_slots(spec: TransformerSpec, block: Block) -> dict[str, NormSlots]:
    """The norms of each sublayer of `block` under the spec's placement."""
    names = sublayers(block)
    placement = spec.placement
    if placement == "sandwich":
        slots = {n: NormSlots(True, True, False) for n in names}
    elif placement == "output":
        slots = {n: NormSlots(False, True, False) for n in names}
    elif placement == "post":
        slots = {n: NormSlots(False, False, True) for n in names}
    else:
        slots = {n: NormSlots(i == 0 or spec.num_norms_per_layer >= 2, False, False) for i, n in enumerate(names)}
    return slots


def check_norms(spec: TransformerSpec, block: Block) -> None:
    """The spec's norms per block must be the ones its placement puts there."""
    slots = norm_slots(spec, block)
    placed = sum(s.pre + s.post + s.after for s in slots.values())
    expected = spec.num_norms_per_layer if block.mlp or spec.norms_per_layer is not None else placed
    if placed != expected or (spec.parallel_block and spec.placement != "pre"):
        raise SpecError(f"norms_per_layer ({spec.num_norms_per_layer}) with norm_placement '{spec.placement}'"
                        f"{' and parallel_block' if spec.parallel_block else ''} is not a block the executor runs "
                        f"({placed} norms)")


def block_forward(spec: TransformerSpec, block: Block, p: Params, x: np.ndarray, run: Run
                  ) -> tuple[np.ndarray, dict[str, Any]]:
    """One block on the residual stream x; `p` holds the block's parameters (relative names)."""
    c: dict[str, Any] = {}
    slots = norm_slots(spec, block)
    r = spec.residual_scale
    if spec.parallel_block:
        h_attn, c["attention/norm"] = norm_f(spec, sub(p, "attention/norm"), x)
        a, c["attention"] = run("attention", sub(p, "attention"), h_attn)
        h_mlp = h_attn
        if slots["mlp"].pre:
            h_mlp, c["mlp/norm"] = norm_f(spec, sub(p, "mlp/norm"), x)
        m, c["mlp"] = run("mlp", sub(p, "mlp"), h_mlp)
        return x + r * (a + m), c
    for name, slot in slots.items():
        h = x
        if slot.pre:
            h, c[f"{name}/norm"] = norm_f(spec, sub(p, f"{name}/norm"), x)
        y, c[name] = run(name, sub(p, name), h)
        if slot.post:
            y, c[f"{name}/post_norm"] = norm_f(spec, sub(p, f"{name}/post_norm"), y)
        x = x + (y if r == 1.0 else r * y)
        if slot.after:
            x, c[f"{name}/norm"] = norm_f(spec, sub(p, f"{name}/norm"), x)
    return x, c


def block_backward(spec: TransformerSpec, block: Block, p: Params, c: dict[str, Any], dy: np.ndarray,
                   run_backward: RunBackward) -> tuple[np.ndarray, Params]:
    """(dx, grads keyed relative to the block) of block_forward."""
    grads: Params = {}
    slots = norm_slots(spec, block)
    r = spec.residual_scale

    def back(name: str, dout: np.ndarray) -> np.ndarray:
        dh, g = run_backward(name, sub(p, name), c[name], dout)
        grads.update({f"{name}/{k}": v for k, v in g.items()})
        return dh

    if spec.parallel_block:
        dbranch = dy if r == 1.0 else r * dy
        dh_mlp = back("mlp", dbranch)
        dh_attn = back("attention", dbranch)
        dx = dy
        if slots["mlp"].pre:
            dx = dx + norm_b(sub(p, "mlp/norm"), c["mlp/norm"], dh_mlp, grads, "mlp/norm")
        else:
            dh_attn = dh_attn + dh_mlp
        return dx + norm_b(sub(p, "attention/norm"), c["attention/norm"], dh_attn, grads, "attention/norm"), grads
    for name, slot in reversed(list(slots.items())):
        if slot.after:
            dy = norm_b(sub(p, f"{name}/norm"), c[f"{name}/norm"], dy, grads, f"{name}/norm")
        dbranch = dy if r == 1.0 else r * dy
        if slot.post:
            dbranch = norm_b(sub(p, f"{name}/post_norm"), c[f"{name}/post_norm"], dbranch, grads, f"{name}/post_norm")
        dh = back(name, dbranch)
        if slot.pre:
            dh = norm_b(sub(p, f"{name}/norm"), c[f"{name}/norm"], dh, grads, f"{name}/norm")
        dy = dy + dh
    return dy, grads
