"""The single-device reference: the whole model on the whole global batch at once.

No micro-batches, no shards, no communication: the plain composition of the layers, written
separately from the sharded executor so the two can be compared (they share only the layers and
the residual composition of `residual.py`). Loss is the mean token cross-entropy over the global
batch, plus lambda / D times each multi-token-prediction module's (DeepSeek-V3 sec. 2.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelplan.count.blocks import Block, block_of, mtp_block
from modelplan.execute.layers.attention import attention_backward, attention_forward
from modelplan.execute.layers.embedding import embedding_backward, embedding_forward
from modelplan.execute.layers.loss import (
    cross_entropy_backward,
    cross_entropy_forward,
    logits_backward,
    logits_forward,
)
from modelplan.execute.layers.mamba import mamba_backward, mamba_forward
from modelplan.execute.layers.mamba2 import mamba2_backward, mamba2_forward
from modelplan.execute.layers.deltanet import deltanet_backward, deltanet_forward
from modelplan.execute.layers.mla import mla_backward, mla_forward
from modelplan.execute.layers.mlp import mlp_backward, mlp_forward
from modelplan.execute.layers.moe import (
    expert_params,
    router_backward,
    router_forward,
    shared_gate_backward,
    shared_gate_forward,
)
from modelplan.execute.optim import OptimizerConfig, optimizer_step
from modelplan.execute.params import Batch, mtp_inputs
from modelplan.execute.residual import block_backward, block_forward
from modelplan.execute.shapes import attention_shape, deltanet_shape, mamba2_shape, mamba_shape, mla_shape, norm_b, norm_f, router, sub
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]


def _moe_forward(spec: TransformerSpec, p: Params, x: np.ndarray):
    """Routed experts (each on the tokens it was picked for) plus shared experts; x is (b, s, h)."""
    moe = spec.moe
    tokens = x.reshape(-1, x.shape[-1])  # (b*s, h)
    weights, experts, rcache = router_forward(tokens, p, router(spec))
    out = np.zeros_like(tokens)
    per_expert = []
    for e in range(moe.num_experts):
        rows, slots = np.nonzero(experts == e)
        pe = expert_params(p, e)
        w = weights[rows, slots][:, None]  # (n_e, 1)
        x_e = w * tokens[rows] if moe.weights_on_input else tokens[rows]  # Llama 4: routed_in = x * score
        y, c = mlp_forward(x_e, pe, spec.activation, spec.gated_mlp)  # (n_e, h)
        if "experts/out/bias" in p:
            y = y + p["experts/out/bias"][e]
        np.add.at(out, rows, y if moe.weights_on_input else w * y)
        per_expert.append((rows, slots, pe, y, c))
    shared = None
    if moe.shared_experts:
        y, c = mlp_forward(tokens, sub(p, "shared"), spec.activation, spec.gated_mlp)
        y = y + p.get("shared/out/bias", 0.0)
        gate = shared_gate_forward(tokens, p) if moe.shared_expert_gate else None
        out += y if gate is None else gate * y
        shared = (c, y, gate)
    return out.reshape(x.shape), (tokens, rcache, weights, per_expert, shared)


def _moe_backward(spec: TransformerSpec, p: Params, cache, dout: np.ndarray) -> tuple[np.ndarray, Params]:
    tokens, rcache, weights, per_expert, shared = cache
    grads: Params = {}
    dy = dout.reshape(-1, dout.shape[-1])
    dx = np.zeros_like(dy)
    dweights = np.zeros_like(weights)
    stacked: dict[str, list] = {}
    on_input = spec.moe.weights_on_input
    for rows, slots, pe, y, c in per_expert:
        w = weights[rows, slots][:, None]  # (n_e, 1)
        dy_e = dy[rows] if on_input else w * dy[rows]
        dx_e, g = mlp_backward(c, pe, spec.activation, spec.gated_mlp, dy_e)
        if "experts/out/bias" in p:
            g["out/bias"] = dy_e.sum(axis=0)
        if on_input:  # x_e = w x: dw = <dx_e, x>, dx = w dx_e
            dweights[rows, slots] = (dx_e * tokens[rows]).sum(axis=-1)
            dx_e = w * dx_e
        else:
            dweights[rows, slots] = (dy[rows] * y).sum(axis=-1)
        np.add.at(dx, rows, dx_e)
        for k, v in g.items():
            stacked.setdefault(k, []).append(v)
    grads.update({f"experts/{k}": np.stack(v) for k, v in stacked.items()})
    if shared is not None:
        c, y, gate = shared
        dy_s = dy
        if gate is not None:
            dxg, grads["shared_gate/weight"] = shared_gate_backward(tokens, p, gate, y, dy)
            dx += dxg
            dy_s = gate * dy
        dx_s, g = mlp_backward(c, sub(p, "shared"), spec.activation, spec.gated_mlp, dy_s)
        dx += dx_s
        grads.update({f"shared/{k}": v for k, v in g.items()})
        if "shared/out/bias" in p:
            grads["shared/out/bias"] = dy_s.sum(axis=0)
    dx_r, g = router_backward(rcache, p, dweights, router(spec))
    grads.update(g)
    return (dx + dx_r).reshape(dout.shape), grads


def _sublayer_forward(spec: TransformerSpec, block: Block):
    def run(name: str, p: Params, h: np.ndarray) -> tuple[np.ndarray, Any]:
        if name == "mamba":
            y, c = mamba_forward(h, p, mamba_shape(spec))
            return y + p.get("out/bias", 0.0), c
        if name == "mamba2":
            y, c = mamba2_forward(h, p, mamba2_shape(spec))
            return y + p.get("out/bias", 0.0), c
        if name == "gated_deltanet":
            return deltanet_forward(h, p, deltanet_shape(spec))
        if name == "attention":
            if spec.mla is not None:
                y, c = mla_forward(h, p, mla_shape(spec, 1, block.mixer))
            else:
                y, c = attention_forward(h, p, attention_shape(spec, 1, block.mixer))
            return y + p.get("out/bias", 0.0), c
        if block.moe:
            return _moe_forward(spec, p, h)
        y, c = mlp_forward(h, p, spec.activation, spec.gated_mlp)
        return y + p.get("out/bias", 0.0), c
    return run


def _bias_grad(grads: Params, p: Params, dy: np.ndarray) -> None:
    if "out/bias" in p:
        grads["out/bias"] = dy.reshape(-1, dy.shape[-1]).sum(axis=0)


def _sublayer_backward(spec: TransformerSpec, block: Block):
    def run_backward(name: str, p: Params, c: Any, dy: np.ndarray) -> tuple[np.ndarray, Params]:
        if name == "mamba":
            dh, g = mamba_backward(c, p, mamba_shape(spec), dy)
            _bias_grad(g, p, dy)
            return dh, g
        if name == "mamba2":
            dh, g = mamba2_backward(c, p, mamba2_shape(spec), dy)
            _bias_grad(g, p, dy)
            return dh, g
        if name == "gated_deltanet":
            return deltanet_backward(c, p, deltanet_shape(spec), dy)
        if name == "attention":
            if spec.mla is not None:
                dh, g = mla_backward(c, p, mla_shape(spec, 1, block.mixer), dy)
            else:
                dh, g = attention_backward(c, p, attention_shape(spec, 1, block.mixer), dy)
            _bias_grad(g, p, dy)
            return dh, g
        if block.moe:
            return _moe_backward(spec, p, c, dy)
        dh, g = mlp_backward(c, p, spec.activation, spec.gated_mlp, dy)
        _bias_grad(g, p, dy)
        return dh, g
    return run_backward


def _block_f(spec: TransformerSpec, block: Block, p: Params, x: np.ndarray):
    return block_forward(spec, block, p, x, _sublayer_forward(spec, block))


def _block_b(spec: TransformerSpec, block: Block, p: Params, c, dy: np.ndarray, grads: Params, prefix: str):
    dx, g = block_backward(spec, block, p, c, dy, _sublayer_backward(spec, block))
    grads.update({f"{prefix}/{k}": v for k, v in g.items()})
    return dx


def _lm_weight(spec: TransformerSpec, params: Params) -> np.ndarray:
    return params["embedding/word/weight"].T if spec.tied_embeddings else params["head/lm/weight"]


def _add(grads: Params, name: str, g: np.ndarray) -> None:
    grads[name] = grads[name] + g if name in grads else g


def _embed(spec: TransformerSpec, params: Params, tokens: np.ndarray) -> np.ndarray:
    """Token embeddings times the embedding scale (Gemma sqrt(hidden), Granite multiplier)."""
    x = embedding_forward(params["embedding/word/weight"], tokens)  # (B, s) -> (B, s, h)
    return x if spec.embedding_scale is None else x * spec.embedding_scale


def _embed_backward(spec: TransformerSpec, tokens: np.ndarray, dx: np.ndarray, grads: Params) -> None:
    dx = dx if spec.embedding_scale is None else dx * spec.embedding_scale
    _add(grads, "embedding/word/weight", embedding_backward(spec.vocab, tokens, dx))


def _head_forward(spec: TransformerSpec, params: Params, x: np.ndarray, labels: np.ndarray, norm: str,
                  mask: np.ndarray | None = None):
    """Norm, output projection, logit transforms and cross-entropy: (loss, cache)."""
    x_out, ncache = norm_f(spec, sub(params, norm), x) if norm else (x, None)
    logits = x_out @ _lm_weight(spec, params) + params.get("head/lm/bias", 0.0)  # (B, s, h) @ (h, V)
    z, capped = logits_forward(logits, spec.logit_scale, spec.final_logit_softcap)
    loss, probs = cross_entropy_forward(z, labels, mask)
    return loss, (x_out, ncache, capped, probs, labels, mask, norm)


def _head_backward(spec: TransformerSpec, params: Params, cache, dloss: float, grads: Params) -> np.ndarray:
    x_out, ncache, capped, probs, labels, mask, norm = cache
    dlogits = logits_backward(cross_entropy_backward(probs, labels, dloss, mask), spec.logit_scale, capped)
    flat_x, flat_d = x_out.reshape(-1, x_out.shape[-1]), dlogits.reshape(-1, dlogits.shape[-1])
    dw = flat_x.T @ flat_d  # (B*s, h).T @ (B*s, V) -> (h, V)
    _add(grads, "embedding/word/weight" if spec.tied_embeddings else "head/lm/weight", dw.T if spec.tied_embeddings else dw)
    if "head/lm/bias" in params:
        _add(grads, "head/lm/bias", flat_d.sum(axis=0))
    dx = dlogits @ _lm_weight(spec, params).T  # (B, s, V) @ (V, h)
    return norm_b(sub(params, norm), ncache, dx, grads, norm) if ncache is not None else dx


def _mtp_forward(spec: TransformerSpec, params: Params, h0: np.ndarray, batch: Batch):
    """The MTP modules on the main model's last hidden state: (sum of lambda/D * L_k, caches)."""
    caches, total, h = [], 0.0, h0
    weight = spec.mtp_loss_weight / spec.mtp_layers
    for k in range(spec.mtp_layers):
        p = sub(params, f"mtp/{k}")
        ids, labels, mask = mtp_inputs(batch.tokens, batch.labels, k + 1)
        e, ce = norm_f(spec, sub(p, "embed_norm"), _embed(spec, params, ids))
        hn, ch = norm_f(spec, sub(p, "hidden_norm"), h)
        z = np.concatenate([e, hn], axis=-1) @ p["proj/weight"]  # (B, s, 2h) @ (2h, h)
        h, cb = _block_f(spec, mtp_block(spec), sub(p, "block"), z)
        loss, chead = _head_forward(spec, params, h, labels, f"mtp/{k}/head_norm", mask)
        total += weight * loss
        caches.append((ids, e, ce, hn, ch, z, cb, chead))
    return total, caches


def _mtp_backward(spec: TransformerSpec, params: Params, caches, grads: Params) -> np.ndarray:
    """dL/dh0 of _mtp_forward, the modules' grads added to `grads`."""
    weight = spec.mtp_loss_weight / spec.mtp_layers
    h_dim = spec.hidden
    dh = None
    for k in reversed(range(spec.mtp_layers)):
        ids, e, ce, hn, ch, z, cb, chead = caches[k]
        p, prefix = sub(params, f"mtp/{k}"), f"mtp/{k}"
        dout = _head_backward(spec, params, chead, weight, grads)
        if dh is not None:
            dout = dout + dh
        dz = _block_b(spec, mtp_block(spec), sub(p, "block"), cb, dout, grads, f"{prefix}/block")
        cat = np.concatenate([e, hn], axis=-1)
        grads[f"{prefix}/proj/weight"] = cat.reshape(-1, 2 * h_dim).T @ dz.reshape(-1, h_dim)  # (2h, B*s) @ (B*s, h)
        dcat = dz @ p["proj/weight"].T  # (B, s, h) @ (h, 2h)
        de = norm_b(sub(p, "embed_norm"), ce, dcat[..., :h_dim], grads, f"{prefix}/embed_norm")
        _embed_backward(spec, ids, de, grads)
        dh = norm_b(sub(p, "hidden_norm"), ch, dcat[..., h_dim:], grads, f"{prefix}/hidden_norm")
    return dh


def loss_and_grads(spec: TransformerSpec, params: Params, batch: Batch) -> tuple[float, Params]:
    """Mean cross-entropy of the global batch (plus the MTP losses) and every parameter's gradient."""
    grads: Params = {}
    seq = batch.tokens.shape[1]
    x = _embed(spec, params, batch.tokens)
    if "embedding/position/weight" in params:
        x = x + params["embedding/position/weight"][:seq]
    if batch.types is not None:
        x = x + embedding_forward(params["embedding/type/weight"], batch.types)
    emb_norm = None
    if spec.embedding_norm:
        x, emb_norm = norm_f(spec, sub(params, "embedding/norm"), x)
    caches = []
    for i in range(spec.layers):
        x, c = _block_f(spec, block_of(spec, i), sub(params, f"layers/{i}"), x)
        caches.append(c)
    loss, head = _head_forward(spec, params, x, batch.labels, "head/norm" if spec.final_norm else "")
    mtp = None
    if spec.mtp_layers:
        extra, mtp = _mtp_forward(spec, params, x, batch)
        loss += extra

    dx = _head_backward(spec, params, head, 1.0, grads)
    if mtp is not None:
        dx = dx + _mtp_backward(spec, params, mtp, grads)
    for i in reversed(range(spec.layers)):
        dx = _block_b(spec, block_of(spec, i), sub(params, f"layers/{i}"), caches[i], dx, grads, f"layers/{i}")
    if emb_norm is not None:
        dx = norm_b(sub(params, "embedding/norm"), emb_norm, dx, grads, "embedding/norm")
    if batch.types is not None:
        grads["embedding/type/weight"] = embedding_backward(spec.type_vocab, batch.types, dx)
    if "embedding/position/weight" in params:
        dpos = np.zeros_like(params["embedding/position/weight"])
        dpos[:seq] = dx.sum(axis=0)
        grads["embedding/position/weight"] = dpos
    _embed_backward(spec, batch.tokens, dx, grads)
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
