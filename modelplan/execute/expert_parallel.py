"""Mixture-of-experts layer over expert-parallel ranks: route, dispatch with AllToAll, run the
local experts, combine with AllToAll (GShard, Lepikhin et al. 2020, sec. 2.2; Megatron-core's
all-to-all token dispatcher).

Dispatch buffers have a fixed shape (experts, tokens, hidden): slot t of expert e holds token t
if the router picked e for it, zeros otherwise. That is GShard's dispatch tensor with a dropless
capacity of one slot per local token, so the AllToAll size depends on the shapes only, never on
the routing. Under tensor parallelism the experts are split like a dense MLP (column-parallel in,
row-parallel out), the layer output is a partial sum that leaves through the usual g operator,
and the router's gradient is a partial sum too (all-reduced over tp with the other such grads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from modelplan.comm.communicator import Communicator, Group
from modelplan.comm.regions import Region
from modelplan.execute import mappings
from modelplan.execute.layers.mlp import mlp_backward, mlp_forward
from modelplan.execute.layers.moe import (
    experts_backward,
    experts_forward,
    router_backward,
    router_forward,
    shared_gate_backward,
    shared_gate_forward,
)
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.shapes import router, sub
from modelplan.specs.transformer import TransformerSpec


@dataclass(frozen=True)
class ExpertParallel:
    """This rank's expert-parallel group (a block of `ep` data-parallel ranks)."""

    comm: Communicator
    group: Group

    @property
    def size(self) -> int:
        return self.group.size

    def all_to_all(self, chunks: list[np.ndarray], label: str) -> list[np.ndarray]:
        return list(chunks) if self.size == 1 else self.comm.all_to_all(chunks, self.group, label=label)


def moe_forward(
    tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, p: dict[str, np.ndarray], x: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """MoE MLP of x (b, s_local, h); p holds the `mlp/` parameters with local expert shards."""
    moe = spec.moe
    E, k = moe.num_experts, moe.top_k
    x_in = mappings.enter_region(tp, x, Region.TP_MLP_IN)  # (b, s, h)
    tokens = x_in.reshape(-1, x_in.shape[-1])  # (T, h)
    T = tokens.shape[0]
    weights, experts, rcache = router_forward(tokens, p, router(spec))
    dispatch = np.zeros((E, T, tokens.shape[1]))
    for j in range(k):  # Llama 4 (weights_on_input): each copy sent already times its weight
        dispatch[experts[:, j], np.arange(T)] = weights[:, j, None] * tokens if moe.weights_on_input else tokens
    received = ep.all_to_all(np.split(dispatch, ep.size, axis=0), Region.EP_DISPATCH)  # ep x (E/ep, T, h)
    expert_in = np.concatenate(received, axis=1)  # (E/ep, ep*T, h)
    expert_out, ecache = experts_forward(expert_in, p, spec.activation, spec.gated_mlp, add_out_bias=tp.rank == 0)
    returned = ep.all_to_all(np.split(expert_out, ep.size, axis=1), Region.EP_COMBINE)  # ep x (E/ep, T, h)
    combined = np.concatenate(returned, axis=0)  # (E, T, h)
    picked = combined[experts, np.arange(T)[:, None]]  # (T, k, h)
    out = picked.sum(axis=1) if moe.weights_on_input else np.einsum("tk,tkh->th", weights, picked)
    shared = gate = None
    if moe.shared_experts:
        y, shared = mlp_forward(tokens, sub(p, "shared"), spec.activation, spec.gated_mlp)  # partial over tp
        gate = shared_gate_forward(tokens, p) if moe.shared_expert_gate else None
        out = out + (y if gate is None else gate * y)
        shared = (shared, y)
    y = mappings.exit_region(tp, out.reshape(x_in.shape), Region.TP_MLP_OUT)
    if "shared/out/bias" in p:
        y = y + p["shared/out/bias"]
    return y, {"rcache": rcache, "weights": weights, "experts": experts, "picked": picked,
               "ecache": ecache, "shared": shared, "gate": gate, "tokens": tokens, "shape": x_in.shape}


def moe_backward(
    tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, p: dict[str, np.ndarray], c: dict[str, Any],
    dy: np.ndarray,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx (b, s_local, h), grads keyed relative to `mlp/`)."""
    E = spec.moe.num_experts
    grads: dict[str, np.ndarray] = {}
    if "shared/out/bias" in p:
        grads["shared/out/bias"] = dy.reshape(-1, dy.shape[-1]).sum(axis=0)
    dout = mappings.exit_region_backward(tp, dy, Region.TP_MLP_OUT).reshape(-1, dy.shape[-1])  # (T, h)
    T = dout.shape[0]
    weights, experts = c["weights"], c["experts"]
    dtokens = np.zeros_like(dout)
    if c["shared"] is not None:
        cache, y = c["shared"]
        dshared = dout
        if c["gate"] is not None:  # the gate's gradients are partial over tp, like the shared output
            dtokens, grads["shared_gate/weight"] = shared_gate_backward(c["tokens"], p, c["gate"], y, dout)
            dshared = c["gate"] * dout
        dx_s, g = mlp_backward(cache, sub(p, "shared"), spec.activation, spec.gated_mlp, dshared)
        dtokens = dtokens + dx_s
        grads.update({f"shared/{n}": v for n, v in g.items()})
    on_input = spec.moe.weights_on_input
    dcombined = np.zeros((E, T, dout.shape[1]))
    for j in range(experts.shape[1]):
        dcombined[experts[:, j], np.arange(T)] = dout if on_input else weights[:, j, None] * dout
    back = ep.all_to_all(np.split(dcombined, ep.size, axis=0), Region.EP_COMBINE)  # ep x (E/ep, T, h)
    dexpert_in, g = experts_backward(c["ecache"], p, spec.activation, spec.gated_mlp, np.concatenate(back, axis=1))
    grads.update(g)
    returned = ep.all_to_all(np.split(dexpert_in, ep.size, axis=1), Region.EP_DISPATCH)  # ep x (E/ep, T, h)
    ddispatch = np.concatenate(returned, axis=0)  # (E, T, h)
    dslots = ddispatch[experts, np.arange(T)[:, None]]  # (T, k, h): d(expert input) per pick
    if on_input:  # input w x: dw = <d input, x>, dx = w d input; partial over tp like dslots
        dweights = np.einsum("tkh,th->tk", dslots, c["tokens"])
        dtokens = dtokens + np.einsum("tk,tkh->th", weights, dslots)
    else:  # output w y: dw = <dout, y>, partial over tp like the outputs
        dweights = np.einsum("th,tkh->tk", dout, c["picked"])
        dtokens = dtokens + dslots.sum(axis=1)
    drouter, g = router_backward(c["rcache"], p, dweights, router(spec))
    grads.update(g)
    dx_in = (dtokens + drouter).reshape(c["shape"])
    return mappings.enter_region_backward(tp, dx_in, Region.TP_MLP_IN), grads
