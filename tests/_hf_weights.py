"""Our parameters loaded into a transformers model of the same family, and its gradients read
back in our names: one `Link` per HF tensor, saying which of our tensors make it and how.

Layouts: HF linears are (out, in), ours (in, out); Gemma's RMSNorm weight is an offset from 1
(output * (1 + weight)); fused expert tensors are HF's own stacking (gpt-oss gate_up_proj
(E, h, 2f) with gate and up interleaved; DeepSeek / Qwen-MoE gate_up_proj (E, 2f, h), gate first).
`float64_everywhere` keeps transformers' float32 casts (RMSNorm's x.float(), routers'
.type(torch.float32), softmax(dtype=float32)) from rounding a float64 model, so the comparison is
float64 against float64.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Link:
    """HF tensor `hf` is to_hf(our tensors `ours`); its gradient splits back by from_hf."""

    hf: str
    ours: tuple[str, ...]
    to_hf: Callable
    from_hf: Callable


def same(hf: str, ours: str) -> Link:
    return Link(hf, (ours,), lambda a: a, lambda g: [g])


def linear(hf: str, ours: str) -> Link:
    """nn.Linear weight (out, in) from our (in, out)."""
    return Link(hf, (ours,), lambda a: a.T, lambda g: [g.T])


def offset_norm(hf: str, ours: str) -> Link:
    """Gemma RMSNorm: output * (1 + weight)."""
    return Link(hf, (ours,), lambda a: a - 1.0, lambda g: [g])


def interleaved(hf: str, gate: str, up: str) -> Link:
    """gpt-oss gate_up (..., 2f): gate in even columns, up in odd ones."""
    def to_hf(g, u):
        out = np.empty(g.shape[:-1] + (2 * g.shape[-1],))
        out[..., 0::2], out[..., 1::2] = g, u
        return out
    return Link(hf, (gate, up), to_hf, lambda t: [t[..., 0::2], t[..., 1::2]])


def stacked_gate_up(hf: str, gate: str, up: str) -> Link:
    """DeepSeek / Qwen-MoE experts gate_up_proj (E, 2f, h) from our (E, h, f) gate and up."""
    def to_hf(g, u):
        return np.concatenate([g.transpose(0, 2, 1), u.transpose(0, 2, 1)], axis=1)

    def from_hf(t):
        half = t.shape[1] // 2
        return [t[:, :half].transpose(0, 2, 1), t[:, half:].transpose(0, 2, 1)]
    return Link(hf, (gate, up), to_hf, from_hf)


def experts_down(hf: str, ours: str) -> Link:
    """(E, h, f) from our (E, f, h)."""
    return Link(hf, (ours,), lambda a: a.transpose(0, 2, 1), lambda g: [g.transpose(0, 2, 1)])


def load(model, params: dict[str, np.ndarray], links: list[Link]) -> None:
    """Copy our parameters into the model (every HF parameter must be linked)."""
    import torch

    hp = dict(model.named_parameters())
    missing = sorted(set(hp) - {link.hf for link in links})
    assert not missing, f"HF parameters without a link: {missing}"
    with torch.no_grad():
        for link in links:
            value = link.to_hf(*[params[n] for n in link.ours])
            hp[link.hf].copy_(torch.tensor(np.ascontiguousarray(value)))


def grads_in_our_names(model, links: list[Link]) -> dict[str, np.ndarray]:
    """HF gradients (summed where several HF tensors are one of ours, e.g. a tied head)."""
    hp = dict(model.named_parameters())
    out: dict[str, np.ndarray] = {}
    for link in links:
        g = hp[link.hf].grad
        parts = link.from_hf(np.zeros(hp[link.hf].shape) if g is None else g.numpy())
        for name, part in zip(link.ours, parts):
            out[name] = out[name] + part if name in out else part
    return out


@contextmanager
def float64_everywhere():
    """Inside: float64 tensors ignore requests to become float32 (HF's upcasts for float16)."""
    import torch
    import torch.nn.functional as F

    def keep(dtype, t):
        return t.dtype == torch.float64 and dtype == torch.float32

    orig_to, orig_float, orig_type, orig_softmax = torch.Tensor.to, torch.Tensor.float, torch.Tensor.type, F.softmax

    def to(self, *args, **kwargs):
        if any(keep(a, self) for a in args) or keep(kwargs.get("dtype"), self):
            return self
        return orig_to(self, *args, **kwargs)

    def as_float(self, *args, **kwargs):
        return self if self.dtype == torch.float64 else orig_float(self, *args, **kwargs)

    def type_(self, dtype=None, *args, **kwargs):
        if dtype is None or keep(dtype, self):
            return self if dtype is not None else orig_type(self)
        return orig_type(self, dtype, *args, **kwargs)

    def softmax(x, *args, dtype=None, **kwargs):
        return orig_softmax(x, *args, dtype=None if keep(dtype, x) else dtype, **kwargs)

    torch.Tensor.to, torch.Tensor.float, torch.Tensor.type, F.softmax = to, as_float, type_, softmax
    torch.nn.functional.softmax = softmax
    try:
        yield
    finally:
        torch.Tensor.to, torch.Tensor.float, torch.Tensor.type = orig_to, orig_float, orig_type
        F.softmax = torch.nn.functional.softmax = orig_softmax
