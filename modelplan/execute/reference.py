"""The single-device reference: the whole model on the whole global batch at once.

No micro-batches, no shards, no communication: the plain composition of the layers, written
separately from the sharded executor so the two can be compared. Loss is the mean token
cross-entropy over the global batch. Blocks are pre-norm; a parallel block (GPT-J) adds the
attention and MLP branches to the same residual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelplan.execute.layers.attention import attention_backward, attention_forward
from modelplan.execute.layers.embedding import embedding_backward, embedding_forward
from modelplan.execute.layers.loss import cross_entropy_backward, cross_entropy_forward
from modelplan.execute.layers.mlp import mlp_backward, mlp_forward
from modelplan.execute.layers.moe import router_backward, router_forward
from modelplan.execute.optim import OptimizerConfig, optimizer_step
from modelplan.execute.params import Batch
from modelplan.execute.shapes import attention_shape, norm_b, norm_f, sub
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]


def _moe_forward(spec: TransformerSpec, p: Params, x: np.ndarray):
    """Routed experts (each on the tokens it was picked for) plus shared experts; x is (b, s, h)."""
    moe = spec.moe
    tokens = x.reshape(-1, x.shape[-1])  # (b*s, h)
    weights, experts, rcache = router_forward(tokens, p, moe.top_k)
    out = np.zeros_like(tokens)
    per_expert = []
    for e in range(moe.num_experts):
        rows, slots = np.nonzero(experts == e)
        pe = {k[len("experts/"):]: v[e] for k, v in p.items() if k.startswith("experts/")}
        y, c = mlp_forward(tokens[rows], pe, spec.activation, spec.gated_mlp)  # (n_e, h)
        if "out/bias" in pe:
            y = y + pe["out/bias"]
        np.add.at(out, rows, weights[rows, slots][:, None] * y)
        per_expert.append((rows, slots, pe, y, c))
    shared = None
    if moe.shared_experts:
        y, shared = mlp_forward(tokens, sub(p, "shared"), spec.activation, spec.gated_mlp)
        out += y + p.get("shared/out/bias", 0.0)
    return out.reshape(x.shape), (rcache, weights, per_expert, shared)


def _moe_backward(spec: TransformerSpec, p: Params, cache, dout: np.ndarray, grads: Params, prefix: str):
    rcache, weights, per_expert, shared = cache
    dy = dout.reshape(-1, dout.shape[-1])
    dx = np.zeros_like(dy)
    dweights = np.zeros_like(weights)
    stacked: dict[str, list] = {}
    for rows, slots, pe, y, c in per_expert:
        dweights[rows, slots] = (dy[rows] * y).sum(axis=-1)
        dy_e = weights[rows, slots][:, None] * dy[rows]
        dx_e, g = mlp_backward(c, pe, spec.activation, spec.gated_mlp, dy_e)
        if "out/bias" in pe:
            g["out/bias"] = dy_e.sum(axis=0)
        np.add.at(dx, rows, dx_e)
        for k, v in g.items():
            stacked.setdefault(k, []).append(v)
    for k, v in stacked.items():
        grads[f"{prefix}/experts/{k}"] = np.stack(v)
    if shared is not None:
        dx_s, g = mlp_backward(shared, sub(p, "shared"), spec.activation, spec.gated_mlp, dy)
        dx += dx_s
        grads.update({f"{prefix}/shared/{k}": v for k, v in g.items()})
        if "shared/out/bias" in p:
            grads[f"{prefix}/shared/out/bias"] = dy.sum(axis=0)
    dx_r, g = router_backward(rcache, p, dweights)
    grads.update({f"{prefix}/{k}": v for k, v in g.items()})
    return (dx + dx_r).reshape(dout.shape)


def _block_forward(spec: TransformerSpec, i: int, params: Params, x: np.ndarray):
    p = sub(params, f"layers/{i}")
    pa, pm = sub(p, "attention"), sub(p, "mlp")
    c: dict[str, Any] = {}
    h1, c["norm_a"] = norm_f(spec, sub(pa, "norm"), x)
    a, c["attn"] = attention_forward(h1, pa, attention_shape(spec))
    a = a + pa.get("out/bias", 0.0)
    x_mid = x if spec.parallel_block else x + a
    if "norm/weight" in pm:
        h2, c["norm_m"] = norm_f(spec, sub(pm, "norm"), x_mid)
    else:
        h2 = h1 if spec.parallel_block else x_mid
    if spec.is_moe_layer(i):
        m, c["moe"] = _moe_forward(spec, pm, h2)
    else:
        m, c["mlp"] = mlp_forward(h2, pm, spec.activation, spec.gated_mlp)
        m = m + pm.get("out/bias", 0.0)
    return x_mid + m + (a if spec.parallel_block else 0.0), c


def _block_backward(spec: TransformerSpec, i: int, params: Params, c, dy: np.ndarray, grads: Params):
    prefix = f"layers/{i}"
    p = sub(params, prefix)
    pa, pm = sub(p, "attention"), sub(p, "mlp")
    if "moe" in c:
        dh2 = _moe_backward(spec, pm, c["moe"], dy, grads, f"{prefix}/mlp")
    else:
        dh2, g = mlp_backward(c["mlp"], pm, spec.activation, spec.gated_mlp, dy)
        grads.update({f"{prefix}/mlp/{k}": v for k, v in g.items()})
        if "out/bias" in pm:
            grads[f"{prefix}/mlp/out/bias"] = dy.reshape(-1, dy.shape[-1]).sum(axis=0)
    dh1_extra = 0.0
    if "norm_m" in c:
        dx_mid = dy + norm_b(sub(pm, "norm"), c["norm_m"], dh2, grads, f"{prefix}/mlp/norm")
    elif spec.parallel_block:
        dx_mid, dh1_extra = dy, dh2
    else:
        dx_mid = dy + dh2
    da = dy if spec.parallel_block else dx_mid
    if "out/bias" in pa:
        grads[f"{prefix}/attention/out/bias"] = da.reshape(-1, da.shape[-1]).sum(axis=0)
    dh1, g = attention_backward(c["attn"], pa, attention_shape(spec), da)
    grads.update({f"{prefix}/attention/{k}": v for k, v in g.items()})
    dx = norm_b(sub(pa, "norm"), c["norm_a"], dh1 + dh1_extra, grads, f"{prefix}/attention/norm")
    return dx_mid + dx


def _lm_weight(spec: TransformerSpec, params: Params) -> np.ndarray:
    return params["embedding/word/weight"].T if spec.tied_embeddings else params["head/lm/weight"]


def loss_and_grads(spec: TransformerSpec, params: Params, batch: Batch) -> tuple[float, Params]:
    """Mean cross-entropy of the global batch and the gradient of every parameter."""
    grads: Params = {}
    seq = batch.tokens.shape[1]
    x = embedding_forward(params["embedding/word/weight"], batch.tokens)  # (B, s) -> (B, s, h)
    if "embedding/position/weight" in params:
        x = x + params["embedding/position/weight"][:seq]
    if batch.types is not None:
        x = x + embedding_forward(params["embedding/type/weight"], batch.types)
    emb_norm = None
    if spec.embedding_norm:
        x, emb_norm = norm_f(spec, sub(params, "embedding/norm"), x)
    caches = []
    for i in range(spec.layers):
        x, c = _block_forward(spec, i, params, x)
        caches.append(c)
    final = None
    if spec.final_norm:
        x_out, final = norm_f(spec, sub(params, "head/norm"), x)
    else:
        x_out = x
    w = _lm_weight(spec, params)
    logits = x_out @ w + params.get("head/lm/bias", 0.0)  # (B, s, h) @ (h, V)
    loss, probs = cross_entropy_forward(logits, batch.labels)

    dlogits = cross_entropy_backward(probs, batch.labels, 1.0)
    flat_x, flat_d = x_out.reshape(-1, x_out.shape[-1]), dlogits.reshape(-1, dlogits.shape[-1])
    dw = flat_x.T @ flat_d  # (B*s, h).T @ (B*s, V) -> (h, V)
    if spec.tied_embeddings:
        grads["embedding/word/weight"] = dw.T
    else:
        grads["head/lm/weight"] = dw
    if "head/lm/bias" in params:
        grads["head/lm/bias"] = flat_d.sum(axis=0)
    dx = dlogits @ w.T  # (B, s, V) @ (V, h)
    if final is not None:
        dx = norm_b(sub(params, "head/norm"), final, dx, grads, "head/norm")
    for i in reversed(range(spec.layers)):
        dx = _block_backward(spec, i, params, caches[i], dx, grads)
    if emb_norm is not None:
        dx = norm_b(sub(params, "embedding/norm"), emb_norm, dx, grads, "embedding/norm")
    if batch.types is not None:
        grads["embedding/type/weight"] = embedding_backward(spec.type_vocab, batch.types, dx)
    if "embedding/position/weight" in params:
        dpos = np.zeros_like(params["embedding/position/weight"])
        dpos[:seq] = dx.sum(axis=0)
        grads["embedding/position/weight"] = dpos
    dword = embedding_backward(spec.vocab, batch.tokens, dx)
    grads["embedding/word/weight"] = grads.get("embedding/word/weight", 0.0) + dword
    return loss, grads


@dataclass(frozen=True)
class ReferenceResult:
    """Loss, gradients and updated parameters of one single-device training step."""

    loss: float
    grads: Params = field(repr=False)
    params: Params = field(repr=False)


def reference_step(spec: TransformerSpec, params: Params, batch: Batch, optimizer: OptimizerConfig) -> ReferenceResult:
    """One optimizer step on the whole batch (fresh optimizer state, step 1)."""
    loss, grads = loss_and_grads(spec, params, batch)
    new = {}
    for name, w in params.items():
        state = optimizer.init_state(w.size)
        new[name] = optimizer_step(optimizer, w.reshape(-1), grads[name].reshape(-1), state, 1).reshape(w.shape)
    return ReferenceResult(loss, grads, new)
