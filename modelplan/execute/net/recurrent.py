"""`nn.RNN` / `nn.LSTM` / `nn.GRU` (batch_first): stacked layers, both directions, dropout
between layers, and backpropagation through time.

Parameters use torch's names (`weight_ih_l0`, `bias_hh_l1_reverse`, `weight_hr_l0`) in executor
layout: weight_ih (in, G*h), weight_hh (h_out, G*h), weight_hr (h, proj). Saved for backward
(the network_layers convention): layer 0's input; per layer and direction the emitted h_t and
the cell's tape; the dropped copy and mask between layers. Layer l > 0 re-reads the stored
outputs of layer l - 1 (concatenated again in backward, not kept twice).
"""

from __future__ import annotations

import numpy as np

from modelplan.execute.net.cells import CellTape, CellWeights, cell_backward, cell_forward
from modelplan.execute.net.saved import RunContext, Saved, dropout_keep
from modelplan.specs.layers import Recurrent

Params = dict[str, np.ndarray]


def _suffixes(layer: Recurrent) -> tuple[str, ...]:
    return ("", "_reverse")[: layer.directions]


def _weights(p: Params, name: str) -> CellWeights:
    return CellWeights(p[f"weight_hh_{name}"], p.get(f"bias_hh_{name}"), p.get(f"weight_hr_{name}"))


def _order(steps: int, suffix: str) -> range:
    return range(steps - 1, -1, -1) if suffix else range(steps)


def _concat(tapes: list[CellTape]) -> np.ndarray:
    return tapes[0].h if len(tapes) == 1 else np.concatenate([t.h for t in tapes], axis=2)


def recurrent_forward(layer: Recurrent, p: Params, x: np.ndarray, ctx: RunContext, path: str
                      ) -> tuple[np.ndarray, Saved]:
    """Output (N, T, D*h_out), or its last step (N, D*h_out) with output='last'."""
    n, steps, _ = x.shape
    layer_in = x
    tapes: list[list[CellTape]] = []
    drops: list[tuple[np.ndarray, np.ndarray] | None] = []
    for k in range(layer.num_layers):
        per_dir = []
        for suffix in _suffixes(layer):
            name = f"l{k}{suffix}"
            gi = layer_in @ p[f"weight_ih_{name}"]  # (N, T, in_l) @ (in_l, G*h)
            if f"bias_ih_{name}" in p:
                gi = gi + p[f"bias_ih_{name}"]
            per_dir.append(cell_forward(layer.type, layer.nonlinearity, gi, _weights(p, name),
                                        layer.hidden_size, _order(steps, suffix)))
        tapes.append(per_dir)
        out = _concat(per_dir)
        if layer.dropout and k < layer.num_layers - 1:
            keep = dropout_keep(ctx, f"{path}/l{k}", out.shape[1:], n, layer.dropout)
            out = out * keep / (1.0 - layer.dropout)
            drops.append((out, keep))
        else:
            drops.append(None)
        layer_in = out
    y = layer_in if layer.output == "sequence" else layer_in[:, -1]
    floats = [x] + [a for per_dir in tapes for t in per_dir for a in t.arrays()]
    floats += [d[0] for d in drops if d is not None]
    fixed = tuple(d[1] for d in drops if d is not None)
    return y, Saved(floats=tuple(floats), fixed=fixed, extra=(x, tapes, drops))


def recurrent_backward(layer: Recurrent, p: Params, saved: Saved, dy: np.ndarray, need_dx: bool = True
                       ) -> tuple[np.ndarray | None, Params]:
    """(dx, grads by torch name) by backpropagation through time."""
    x, tapes, drops = saved.extra
    n, steps, _ = x.shape
    width = layer.directions * layer.h_out
    if layer.output == "last":
        d_out = np.zeros((n, steps, width))
        d_out[:, -1] = dy
    else:
        d_out = dy
    grads: Params = {}
    dx = None
    for k in reversed(range(layer.num_layers)):
        if drops[k] is not None:
            d_out = d_out * drops[k][1] / (1.0 - layer.dropout)
        if k == 0:
            layer_in = x
        else:
            layer_in = drops[k - 1][0] if drops[k - 1] is not None else _concat(tapes[k - 1])
        d_in = np.zeros_like(layer_in) if (k > 0 or need_dx) else None
        for j, suffix in enumerate(_suffixes(layer)):
            name = f"l{k}{suffix}"
            dh = d_out[:, :, j * layer.h_out : (j + 1) * layer.h_out]
            dgi, g = cell_backward(layer.type, layer.nonlinearity, tapes[k][j], _weights(p, name), dh,
                                   _order(steps, suffix))
            w_ih = p[f"weight_ih_{name}"]
            flat_in, flat_d = layer_in.reshape(-1, w_ih.shape[0]), dgi.reshape(-1, w_ih.shape[1])
            grads[f"weight_ih_{name}"] = flat_in.T @ flat_d  # (N*T, in_l).T @ (N*T, G*h)
            grads[f"weight_hh_{name}"] = g["w_hh"]
            if layer.bias:
                grads[f"bias_ih_{name}"] = flat_d.sum(axis=0)
                grads[f"bias_hh_{name}"] = g["b_hh"]
            if "w_hr" in g:
                grads[f"weight_hr_{name}"] = g["w_hr"]
            if d_in is not None:
                d_in += dgi @ w_ih.T  # (N, T, G*h) @ (G*h, in_l)
        d_out = d_in
        dx = d_in
    return dx, grads
