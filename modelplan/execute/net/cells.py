"""One direction of one RNN / LSTM / GRU layer over a whole sequence, and its BPTT backward.

The input projection of every step (`gi = x_t @ W_ih + b_ih`) is one matmul over the sequence
before the loop; only the recurrence runs step by step. Equations and gate order are torch's
(PyTorch nn.LSTM / nn.GRU / nn.RNN docs): LSTM gates (i, f, g, o), c_t = f*c + i*g,
h_t = o*tanh(c_t) (times W_hr with a projection); GRU gates (r, z, n),
n = tanh(gi_n + r*(h W_hn + b_hn)), h_t = (1 - z)*n + z*h; RNN h_t = tanh or relu of the sum.
The state starts at zero. `order` is the time order (reversed for the backward direction);
arrays are stored at their time index either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelplan.execute.net.elementwise import sigmoid


@dataclass(frozen=True)
class CellWeights:
    """One layer-direction's weights in executor layout."""

    w_hh: np.ndarray
    """(h_out, G*h)."""
    b_hh: np.ndarray | None
    """(G*h,)."""
    w_hr: np.ndarray | None = None
    """LSTM projection (h, proj)."""


@dataclass(frozen=True)
class CellTape:
    """What BPTT keeps per step: outputs h_t and the cell's gates/states (see network_layers)."""

    h: np.ndarray
    """(N, T, h_out) emitted states."""
    gates: np.ndarray | None
    """LSTM (N, T, 4h) activated i, f, g, o; GRU (N, T, 3h) r, z, n; RNN None."""
    state: np.ndarray | None
    """LSTM c_t (N, T, h); GRU h W_hn + b_hn (N, T, h); RNN None."""
    m: np.ndarray | None
    """LSTM with projection: o * tanh(c_t) (N, T, h)."""

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The float arrays kept."""
        return tuple(a for a in (self.h, self.gates, self.state, self.m) if a is not None)


def cell_forward(kind: str, nonlinearity: str, gi: np.ndarray, w: CellWeights, hidden: int,
                 order: range) -> CellTape:
    """Run the recurrence over gi (N, T, G*h) = x_t @ W_ih + b_ih for every t."""
    n, steps, _ = gi.shape
    h_out = w.w_hh.shape[0]
    hs = np.empty((n, steps, h_out))
    gates = np.empty_like(gi) if kind != "rnn" else None
    state = np.empty((n, steps, hidden)) if kind != "rnn" else None
    ms = np.empty((n, steps, hidden)) if w.w_hr is not None else None
    h = np.zeros((n, h_out))
    c = np.zeros((n, hidden))
    b_hh = 0.0 if w.b_hh is None else w.b_hh
    for t in order:
        gh = h @ w.w_hh + b_hh  # (N, h_out) @ (h_out, G*h)
        if kind == "lstm":
            z = gi[:, t] + gh
            i, f = sigmoid(z[:, :hidden]), sigmoid(z[:, hidden : 2 * hidden])
            g, o = np.tanh(z[:, 2 * hidden : 3 * hidden]), sigmoid(z[:, 3 * hidden :])
            c = f * c + i * g
            m = o * np.tanh(c)
            h = m @ w.w_hr if w.w_hr is not None else m  # (N, h) @ (h, proj)
            gates[:, t] = np.concatenate([i, f, g, o], axis=1)
            state[:, t] = c
            if ms is not None:
                ms[:, t] = m
        elif kind == "gru":
            r = sigmoid(gi[:, t, :hidden] + gh[:, :hidden])
            z = sigmoid(gi[:, t, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
            hn = gh[:, 2 * hidden :]
            nn = np.tanh(gi[:, t, 2 * hidden :] + r * hn)
            h = (1.0 - z) * nn + z * h
            gates[:, t] = np.concatenate([r, z, nn], axis=1)
            state[:, t] = hn
        else:
            pre = gi[:, t] + gh
            h = np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, 0.0)
        hs[:, t] = h
    return CellTape(hs, gates, state, ms)


def cell_backward(kind: str, nonlinearity: str, tape: CellTape, w: CellWeights, dh_seq: np.ndarray,
                  order: range) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(dgi (N, T, G*h), {'w_hh', 'b_hh', 'w_hr'} grads) given dL/dh_t (N, T, h_out) from above."""
    n, steps, h_out = tape.h.shape
    hidden = tape.state.shape[2] if tape.state is not None else h_out
    dgi = np.empty((n, steps, w.w_hh.shape[1]))
    dgh_all = np.empty_like(dgi)
    dw_hr = np.zeros_like(w.w_hr) if w.w_hr is not None else None
    dh_next = np.zeros((n, h_out))
    dc_next = np.zeros((n, hidden))
    ts = list(order)
    for k in reversed(range(len(ts))):
        t = ts[k]
        prev = ts[k - 1] if k > 0 else None
        h_prev = tape.h[:, prev] if prev is not None else np.zeros((n, h_out))
        dh = dh_seq[:, t] + dh_next
        if kind == "lstm":
            i, f, g, o = np.split(tape.gates[:, t], 4, axis=1)
            c = tape.state[:, t]
            c_prev = tape.state[:, prev] if prev is not None else np.zeros_like(c)
            if w.w_hr is not None:
                dw_hr += tape.m[:, t].T @ dh  # (N, h).T @ (N, proj)
                dm = dh @ w.w_hr.T  # (N, proj) @ (proj, h)
            else:
                dm = dh
            tc = np.tanh(c)
            dc = dc_next + dm * o * (1.0 - tc * tc)
            dz = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                                 dc * i * (1 - g * g), dm * tc * o * (1 - o)], axis=1)
            dc_next = dc * f
            dgi[:, t] = dgh_all[:, t] = dz
        elif kind == "gru":
            r, z, nn = np.split(tape.gates[:, t], 3, axis=1)
            hn = tape.state[:, t]
            dn_pre = dh * (1.0 - z) * (1.0 - nn * nn)
            dr_pre = dn_pre * hn * r * (1.0 - r)
            dz_pre = dh * (h_prev - nn) * z * (1.0 - z)
            dgi[:, t] = np.concatenate([dr_pre, dz_pre, dn_pre], axis=1)
            dgh_all[:, t] = np.concatenate([dr_pre, dz_pre, dn_pre * r], axis=1)
            dh_carry = dh * z
        else:
            ht = tape.h[:, t]
            dpre = dh * (1.0 - ht * ht) if nonlinearity == "tanh" else dh * (ht > 0)
            dgi[:, t] = dgh_all[:, t] = dpre
        dh_next = dgh_all[:, t] @ w.w_hh.T  # (N, G*h) @ (G*h, h_out)
        if kind == "gru":
            dh_next = dh_next + dh_carry
    h_prev_all = np.zeros_like(tape.h)
    for k in range(1, len(ts)):
        h_prev_all[:, ts[k]] = tape.h[:, ts[k - 1]]
    flat_h = h_prev_all.reshape(-1, h_out)
    flat_d = dgh_all.reshape(-1, dgh_all.shape[2])
    grads = {"w_hh": flat_h.T @ flat_d}  # (N*T, h_out).T @ (N*T, G*h)
    if w.b_hh is not None:
        grads["b_hh"] = flat_d.sum(axis=0)
    if dw_hr is not None:
        grads["w_hr"] = dw_hr
    return dgi, grads
