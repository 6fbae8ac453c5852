"""Element-wise optimizers on flat float64 arrays: SGD, SGD with momentum, Adam and AdamW.

Because every update is element-wise, a ZeRO shard of a flat buffer is updated exactly as the
same elements of the whole buffer would be: that is what makes optimizer-state sharding exact.
Weight decay applies to every parameter (no norm/bias exclusion) to keep the rule one line.
"""

from __future__ import annotations

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
    if cfg.kind == "sgd":
        return w - cfg.lr * g
    if cfg.kind == "momentum":
        # torch.optim.SGD: buf = mu * buf + g (buf = g on the first step); w -= lr * buf
        (buf,) = state
        buf[:] = g if step == 1 else cfg.momentum * buf + g
        return w - cfg.lr * buf
    m, v = state
    b1, b2 = cfg.betas
    if cfg.kind == "adam":  # L2 penalty folded into the gradient (Kingma & Ba 2015; torch.optim.Adam)
        g = g + cfg.weight_decay * w
    else:  # decoupled weight decay (Loshchilov & Hutter 2019; torch.optim.AdamW)
        w = w * (1.0 - cfg.lr * cfg.weight_decay)
    m[:] = b1 * m + (1.0 - b1) * g
    v[:] = b2 * v + (1.0 - b2) * g * g
    m_hat = m / (1.0 - b1**step)
    v_hat = v / (1.0 - b2**step)
    return w - cfg.lr * m_hat / (np.sqrt(v_hat) + cfg.eps)
