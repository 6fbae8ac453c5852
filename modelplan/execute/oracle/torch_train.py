"""The training loop of the torch oracle: torch.optim optimizers and LR schedulers, autograd.

The optimizer and schedule are the executor's `OptimizerConfig` mapped onto torch's own classes
(torch.optim.SGD / Adam / AdamW, lr_scheduler.LinearLR for the warm-up and CosineAnnealingLR for
the decay, chained by SequentialLR), so the update rule is torch's, not the executor's. A
parameter that took no part in the step's graph (an expert no token was routed to) gets a zero
gradient, as the executor's flat buffers give it: torch would otherwise skip its update, and
AdamW's weight decay still moves it. Anchored (`result.Starts`), a step's weights are copied
into the same leaf tensors before its forward, so torch.optim keeps its state across steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle.result import OracleKind, OracleRun, OracleStep, Starts, start_of


def torch_optimizer(torch, params: list, cfg: OptimizerConfig):
    """torch.optim's optimizer with the executor's hyper-parameters."""
    if cfg.kind == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr)
    if cfg.kind == "momentum":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum)
    cls = torch.optim.Adam if cfg.kind == "adam" else torch.optim.AdamW
    return cls(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)


def torch_scheduler(torch, optimizer, cfg: OptimizerConfig):
    """Linear warm-up to lr over warmup_steps, then cosine decay to min_lr_ratio * lr over
    decay_steps, as torch's schedulers (stepped once after every optimizer step); None: constant."""
    sched = torch.optim.lr_scheduler
    parts, milestones = [], []
    if cfg.warmup_steps >= 2:  # factor (e + 1) / W at scheduler epoch e = step - 1
        parts.append(sched.LinearLR(optimizer, start_factor=1.0 / cfg.warmup_steps, end_factor=1.0,
                                    total_iters=cfg.warmup_steps - 1))
    if cfg.decay_steps:
        if parts:
            milestones.append(cfg.warmup_steps - 1)
        parts.append(sched.CosineAnnealingLR(optimizer, T_max=cfg.decay_steps, eta_min=cfg.min_lr_ratio * cfg.lr))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else sched.SequentialLR(optimizer, parts, milestones=milestones)


Layout = Callable[[str, np.ndarray], np.ndarray]
"""(parameter name, array) -> the same array in the other layout (executor <-> torch)."""


def load_weights(torch, named: dict[str, Any], values: dict[str, np.ndarray], to_torch: Layout) -> None:
    """Copy executor-layout `values` into the leaf tensors `named` (torch layout), in place."""
    with torch.no_grad():
        for name, tensor in named.items():
            tensor.copy_(torch.from_numpy(np.ascontiguousarray(to_torch(name, values[name]))))


def train_torch(torch, named: dict[str, Any], loss_of: Callable[[Any], Any], batches: Sequence[Any],
                cfg: OptimizerConfig, to_executor: Layout, starts: Starts = None,
                to_torch: Layout = lambda _name, a: a) -> OracleRun:
    """Run one optimizer step per batch on the leaf tensors `named` (torch layout);
    `loss_of(batch)` builds the step's mean loss, `to_executor(name, array)` maps back and
    `to_torch` forth (for the weights `starts` gives a step)."""
    params = list(named.values())
    optimizer = torch_optimizer(torch, params, cfg)
    scheduler = torch_scheduler(torch, optimizer, cfg)
    steps = []
    for t, batch in enumerate(batches, start=1):
        anchor = start_of(starts, t)
        if anchor is not None:
            load_weights(torch, named, anchor, to_torch)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(batch)
        loss.backward()
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads = {n: to_executor(n, p.grad.detach().numpy().copy()) for n, p in named.items()}
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        updated = {n: to_executor(n, p.detach().numpy().copy()) for n, p in named.items()}
        steps.append(OracleStep(float(loss.detach()), grads, updated))
    return OracleRun(OracleKind.TORCH, tuple(steps))
