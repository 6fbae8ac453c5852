"""The numpy oracle: the executor's single-device references, looped over the steps with the
optimizer state carried from step to step (`optimizer_step` with the step number), each step
from its own updated weights or, anchored, from the weights `starts` gives it (`result.Starts`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from modelplan.execute.optim import OptimizerConfig, optimizer_step
from modelplan.execute.oracle.result import OracleKind, OracleRun, OracleStep, Starts, start_of

Params = dict[str, np.ndarray]


def numpy_run(params: Params, batches: Sequence[Any], optimizer: OptimizerConfig,
              loss_and_grads: Callable[[Params, Any], tuple[float, Params]], starts: Starts = None) -> OracleRun:
    """One step per batch: `loss_and_grads(params, batch)` then the element-wise update of every
    parameter (a parameter without a gradient gets zeros, as the executor's flat buffers do);
    step t starts from `starts[t - 1]` where given, else from step t - 1's update."""
    params = {k: v.copy() for k, v in params.items()}
    states = {k: optimizer.init_state(v.size) for k, v in params.items()}
    steps = []
    for t, batch in enumerate(batches, start=1):
        anchor = start_of(starts, t)
        if anchor is not None:
            params = {k: anchor[k].copy() for k in params}
        loss, grads = loss_and_grads(params, batch)
        grads = {k: grads.get(k, np.zeros_like(v)) for k, v in params.items()}
        params = {k: optimizer_step(optimizer, v.reshape(-1), grads[k].reshape(-1), states[k], t).reshape(v.shape)
                  for k, v in params.items()}
        steps.append(OracleStep(loss, grads, {k: v.copy() for k, v in params.items()}))
    return OracleRun(OracleKind.NUMPY, tuple(steps))


def numpy_transformer_run(spec, params: Params, batches: Sequence[Any], optimizer: OptimizerConfig,
                          micro_batch: int = 1, seed: int = 0, starts: Starts = None) -> OracleRun:
    """`execute/reference.py`'s whole-batch step, once per batch (`micro_batch`, `seed`: the
    networks' arguments; a transformer step has neither per-micro-batch statistics nor dropout)."""
    from modelplan.execute.reference import loss_and_grads

    return numpy_run(params, batches, optimizer, lambda p, b: loss_and_grads(spec, p, b), starts)


def numpy_network_run(spec, params: Params, batches: Sequence[Any], optimizer: OptimizerConfig,
                      micro_batch: int, seed: int = 0, starts: Starts = None) -> OracleRun:
    """`execute/net/model.py`'s micro-batched step (BatchNorm statistics per micro-batch), once per batch."""
    from modelplan.count.network import network_layers
    from modelplan.count.network_tree import network_tree
    from modelplan.execute.net.model import loss_and_grads
    from modelplan.execute.net.params import init_buffers

    nodes = tuple(n for unit in network_tree(spec) for n in unit)
    buffers = init_buffers(network_layers(spec))
    return numpy_run(params, batches, optimizer,
                     lambda p, b: loss_and_grads(nodes, p, b, micro_batch, seed, buffers)[:2], starts)
