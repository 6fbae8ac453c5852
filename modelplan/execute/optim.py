"""Element-wise optimizers on flat float64 arrays: SGD, SGD with momentum, Adam and AdamW,
with a learning-rate schedule (linear warm-up, then cosine decay).

Because every update is element-wise, a ZeRO shard of a flat buffer is updated exactly as the
same elements of the whole buffer would be: that is what makes optimizer-state sharding exact.
Weight decay applies to every parameter (no norm/bias exclusion) to keep the rule one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from modelplan.specs.training import Optimizer


@dataclass(frozen=True)
class OptimizerConfig:
    """Hyper-parameters of one optimizer (PyTorch's defaults except lr and weight decay)."""

    kind: Optimizer = "adamw"
    lr: float = 1e-2
    momentum: float = 0.9
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.1
    warmup_steps: int = 0
    """Linear warm-up: step t <= warmup_steps uses lr * t / warmup_steps (Goyal et al. 2017, sec. 2.2)."""
    decay_steps: int = 0
    """Cosine decay over this many steps after the warm-up, down to min_lr_ratio * lr
    (Loshchilov & Hutter 2017, SGDR eq. 5, one cycle); 0: constant after the warm-up."""
    min_lr_ratio: float = 0.1

    def lr_at(self, step: int) -> float:
        """Learning rate of optimizer step `step` (counted from 1)."""
        if step <= self.warmup_steps:
            return self.lr * step / self.warmup_steps
        if not self.decay_steps:
            return self.lr
        done = min(step - max(self.warmup_steps, 1), self.decay_steps)  # decay starts after step 1
        low = self.min_lr_ratio * self.lr
        return low + (self.lr - low) * (1.0 + math.cos(math.pi * done / self.decay_steps)) / 2.0

    @property
    def num_states(self) -> int:
        """State tensors per parameter: 0 (SGD), 1 (momentum buffer), 2 (Adam m and v)."""
        return {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}[self.kind]

    def init_state(self, numel: int) -> list[np.ndarray]:
        """Zeroed state buffers for `numel` elements."""
        return [np.zeros(numel) for _ in range(self.num_states)]


def optimizer_step(
    cfg: OptimizerConfig, w: np.ndarray, g: np.ndarray, state: list[np.ndarray], step: int
) -> np.ndarray:
    """Updated copy of w; `state` buffers are updated in place. `step` counts from 1."""
    lr = cfg.lr_at(step)
    if cfg.kind == "sgd":
        return w - lr * g
    if cfg.kind == "momentum":
        # torch.optim.SGD: buf = mu * buf + g (buf = g on the first step); w -= lr * buf
        (buf,) = state
        buf[:] = g if step == 1 else cfg.momentum * buf + g
        return w - lr * buf
    m, v = state
    b1, b2 = cfg.betas
    if cfg.kind == "adam":  # L2 penalty folded into the gradient (Kingma & Ba 2015; torch.optim.Adam)
        g = g + cfg.weight_decay * w
    else:  # decoupled weight decay (Loshchilov & Hutter 2019; torch.optim.AdamW)
        w = w * (1.0 - lr * cfg.weight_decay)
    m[:] = b1 * m + (1.0 - b1) * g
    v[:] = b2 * v + (1.0 - b2) * g * g
    m_hat = m / (1.0 - b1**step)
    v_hat = v / (1.0 - b2**step)
    return w - lr * m_hat / (np.sqrt(v_hat) + cfg.eps)


def update_sensitivity(cfg: OptimizerConfig, g: np.ndarray, state: list[np.ndarray], step: int) -> np.ndarray:
    """|d w_new / d g| per element of `optimizer_step` at `step` (counted from 1), `state` its
    buffers after that step and `g` the gradient it used (Adam: with the L2 term): how far a
    gradient error moves the updated weights, to first order. SGD and momentum: lr. Adam and
    AdamW: u = lr m_hat / (s + eps) with s = sqrt(v_hat), d m_hat/dg = c1 = (1 - b1) / (1 - b1^t),
    d v_hat/dg = 2 c2 g with c2 = (1 - b2) / (1 - b2^t) (Kingma & Ba 2015, Algorithm 1), so
    du/dg = lr (c1 / (s + eps) - m_hat c2 g / (s (s + eps)^2)); at step 1, lr eps / (|g| + eps)^2:
    lr / eps where the gradient is 0 (a near-zero gradient's rounding amplified by lr / eps)."""
    lr = cfg.lr_at(step)
    if cfg.num_states < 2:
        return np.full(g.shape, lr)
    m, v = state
    b1, b2 = cfg.betas
    c1, c2 = (1.0 - b1) / (1.0 - b1**step), (1.0 - b2) / (1.0 - b2**step)
    m_hat, s = m / (1.0 - b1**step), np.sqrt(v / (1.0 - b2**step))
    with np.errstate(divide="ignore", invalid="ignore"):
        second = np.where(s > 0, m_hat * c2 * g / (s * (s + cfg.eps) ** 2), 0.0)  # 0 where v = 0 (then g = m = 0)
    return lr * np.abs(c1 / (s + cfg.eps) - second)
