"""Mixture-of-experts layer over expert-parallel ranks: route, dispatch with AllToAll, run the
local experts, combine with AllToAll (GShard, Lepikhin et al. 2020, sec. 2.2; Megatron-core's
all-to-all token dispatcher).

Dispatch buffers have a fixed shape (experts, tokens, hidden): slot t of expert e holds token t
if the router picked e for it, zeros otherwise. That is GShard's dispatch tensor with a dropless
capacity of one slot per local token, so the AllToAll size depends on the shapes only, never on
the routing. Under tensor parallelism the experts are split like a dense MLP (column-parallel in,
row-parallel out), the layer output is a partial sum that leaves through the usual g operator,
and the router's gradient is a partial sum too (all-reduced over tp with the other such grads).

Under sequence parallelism with ep > 1 (Megatron-core's all-to-all dispatcher; `plan/parallel/ep.py`
`sequence_parallel_dispatch`) the routed path has no f / g: each TP rank routes and dispatches its
own s/tp tokens, AllGathers the received buffer over tp before its expert shards and
ReduceScatters their partial outputs after them (`Region.TP_EXPERTS_IN/OUT`), so what comes back
from the combine is its tokens' exact output; only a shared expert gathers the sequence (f / g).
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


def sequence_parallel_dispatch(tp: TensorParallel, ep: ExpertParallel) -> bool:
    """The routed path dispatches this TP rank's own tokens (module docstring)."""
    return tp.sequence_parallel and tp.size > 1 and ep.size > 1


def moe_forward(
    tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, p: dict[str, np.ndarray], x: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """MoE MLP of x (b, s_local, h); p holds the `mlp/` parameters with local expert shards."""
    moe = spec.moe
    E, k = moe.num_experts, moe.top_k
    local = sequence_parallel_dispatch(tp, ep)
    x_in = x if local else mappings.enter_region(tp, x, Region.TP_MLP_IN)  # (b, s/tp, h) or (b, s, h)
    tokens = x_in.reshape(-1, x_in.shape[-1])  # (T, h)
    T = tokens.shape[0]
    weights, experts, rcache = router_forward(tokens, p, router(spec))
    dispatch = np.zeros((E, T, tokens.shape[1]))
    for j in range(k):  # Llama 4 (weights_on_input): each copy sent already times its weight
        dispatch[experts[:, j], np.arange(T)] = weights[:, j, None] * tokens if moe.weights_on_input else tokens
    received = ep.all_to_all(np.split(dispatch, ep.size, axis=0), Region.EP_DISPATCH)  # ep x (E/ep, T, h)
    expert_in = np.concatenate(received, axis=1)  # (E/ep, ep*T, h)
    if local:  # the tp group's tokens for this rank's expert shards
        expert_in = tp.all_gather(expert_in, 1, Region.TP_EXPERTS_IN)  # (E/ep, tp*ep*T, h)
    expert_out, ecache = experts_forward(expert_in, p, spec.activation, spec.gated_mlp, add_out_bias=tp.rank == 0)
    if local:  # partial over the expert shards -> this rank's tokens, summed
        expert_out = tp.reduce_scatter(expert_out, 1, Region.TP_EXPERTS_OUT)  # (E/ep, ep*T, h)
    returned = ep.all_to_all(np.split(expert_out, ep.size, axis=1), Region.EP_COMBINE)  # ep x (E/ep, T, h)
    combined = np.concatenate(returned, axis=0)  # (E, T, h)
    picked = combined[experts, np.arange(T)[:, None]]  # (T, k, h)
    out = picked.sum(axis=1) if moe.weights_on_input else np.einsum("tk,tkh->th", weights, picked)
    shared = gate = None
    if moe.shared_experts:
        s_in = mappings.enter_region(tp, x, Region.TP_MLP_IN) if local else x_in
        s_tokens = s_in.reshape(-1, s_in.shape[-1])
        y, shared = mlp_forward(s_tokens, sub(p, "shared"), spec.activation, spec.gated_mlp)  # partial over tp
        gate = shared_gate_forward(s_tokens, p) if moe.shared_expert_gate else None
        y_s = y if gate is None else gate * y
        if local:  # the shared expert's own g; the routed output is already exact
            out = out + mappings.exit_region(tp, y_s.reshape(s_in.shape), Region.TP_MLP_OUT).reshape(out.shape)
        else:
            out = out + y_s
        shared = (shared, y, s_tokens, s_in.shape)
    y = out.reshape(x_in.shape) if local else mappings.exit_region(tp, out.reshape(x_in.shape), Region.TP_MLP_OUT)
    if "shared/out/bias" in p:
        y = y + p["shared/out/bias"]
    return y, {"rcache": rcache, "weights": weights, "experts": experts, "picked": picked,
               "ecache": ecache, "shared": shared, "gate": gate, "tokens": tokens, "shape": x_in.shape,
               "local": local}


def moe_backward(
    tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, p: dict[str, np.ndarray], c: dict[str, Any],
    dy: np.ndarray,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dx (b, s_local, h), grads keyed relative to `mlp/`)."""
    E = spec.moe.num_experts
    local = c["local"]
    grads: dict[str, np.ndarray] = {}
    if "shared/out/bias" in p:
        grads["shared/out/bias"] = dy.reshape(-1, dy.shape[-1]).sum(axis=0)
    dout = (dy if local else mappings.exit_region_backward(tp, dy, Region.TP_MLP_OUT)).reshape(-1, dy.shape[-1])
    T = dout.shape[0]  # (T, h)
    weights, experts = c["weights"], c["experts"]
    dtokens = np.zeros_like(dout)
    dx_shared = None
    if c["shared"] is not None:
        cache, y, s_tokens, s_shape = c["shared"]
        dshared = (mappings.exit_region_backward(tp, dy, Region.TP_MLP_OUT).reshape(-1, dy.shape[-1]) if local
                   else dout)
        ds_tokens = np.zeros_like(dshared)
        if c["gate"] is not None:  # the gate's gradients are partial over tp, like the shared output
            ds_tokens, grads["shared_gate/weight"] = shared_gate_backward(s_tokens, p, c["gate"], y, dshared)
            dshared = c["gate"] * dshared
        dx_s, g = mlp_backward(cache, sub(p, "shared"), spec.activation, spec.gated_mlp, dshared)
        grads.update({f"shared/{n}": v for n, v in g.items()})
        if local:  # the shared expert's own f backward
            dx_shared = mappings.enter_region_backward(tp, (ds_tokens + dx_s).reshape(s_shape), Region.TP_MLP_IN)
        else:
            dtokens = ds_tokens + dx_s
    on_input = spec.moe.weights_on_input
    dcombined = np.zeros((E, T, dout.shape[1]))
    for j in range(experts.shape[1]):
        dcombined[experts[:, j], np.arange(T)] = dout if on_input else weights[:, j, None] * dout
    back = ep.all_to_all(np.split(dcombined, ep.size, axis=0), Region.EP_COMBINE)  # ep x (E/ep, T, h)
    dexpert_out = np.concatenate(back, axis=1)  # (E/ep, ep*T, h)
    if local:  # backward of the ReduceScatter
        dexpert_out = tp.all_gather(dexpert_out, 1, Region.TP_EXPERTS_OUT)  # (E/ep, tp*ep*T, h)
    dexpert_in, g = experts_backward(c["ecache"], p, spec.activation, spec.gated_mlp, dexpert_out)
    grads.update(g)
    if local:  # backward of the AllGather: the shards' partial input gradients summed, this rank's tokens
        dexpert_in = tp.reduce_scatter(dexpert_in, 1, Region.TP_EXPERTS_IN)  # (E/ep, ep*T, h)
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
    if local:  # exact for this rank's tokens; the router's weight gradient partial over tp (its tokens)
        return dx_in if dx_shared is None else dx_in + dx_shared, grads
    return mappings.enter_region_backward(tp, dx_in, Region.TP_MLP_IN), grads
