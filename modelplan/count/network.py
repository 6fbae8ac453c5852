"""Parameters, FLOPs and memory of a generic network (MLP, CNN, RNN); exact Python ints.

`network_layers` is the per-leaf table the planner and executor share; the three `count_*`
functions sum it into the same result types the transformer calculator returns. Breakdown keys
are torch `named_parameters()` names with '/' for '.' (`layer1/0/conv1/weight`), and every
parent path (`layer1/0/conv1`, `layer1/0`, `layer1`) holds the sum of its children. The FLOP
and activation conventions are stated in `modelplan.count.network_layers`.
"""

from __future__ import annotations

import math

from modelplan.count.network_layers import (
    INDEX_BYTES,
    buffer_count,
    forward_flops,
    param_shapes,
    saved_for_backward,
)
from modelplan.count.result import FlopCount, MemoryCount, ParamCount, Result
from modelplan.errors import ModelplanError
from modelplan.specs.network import NetworkSpec
from modelplan.specs.network_walk import walk
from modelplan.specs.training import TrainingSpec

FLOP_CONVENTION = (
    "network: per sample (not per token); matmul FLOPs = 2*MACs of linear/conv/rnn weights; "
    "elementwise ops 1 FLOP per element (softmax 5, norms 5 + affine, pools per window element); "
    "backward = 2x forward for matmuls, 1x for elementwise ops; full recompute adds one forward"
)


class LayerInfo(Result):
    """One leaf of a network in execution order, with its per-sample costs."""

    path: str
    """Slash path (torch module name with '/' for '.'), e.g. 'layer1/0/conv1' or 'layer1/0/add'."""
    type: str
    """The layer's `type` ('linear', 'conv2d', 'lstm', ...) or 'add' for a residual sum."""
    unit: int
    """Smallest unit a pipeline stage or recompute checkpoint holds, in order from 0: each leaf
    outside residual blocks, or a whole residual block (sequential/repeat are transparent)."""
    input_shape: tuple[int, ...]
    """Per-sample input shape (no batch dim)."""
    output_shape: tuple[int, ...]
    """Per-sample output shape (no batch dim)."""
    params: int
    """Parameter elements of this leaf."""
    param_shapes: dict[str, tuple[int, ...]]
    """Parameter tensors by torch attribute name in torch layout (Linear weight is (out, in))."""
    buffers: int
    """Non-parameter state elements (BatchNorm running mean/var and batch counter)."""
    forward_flops: int
    """Forward FLOPs per sample: matmul_flops plus elementwise FLOPs."""
    matmul_flops: int
    """Forward FLOPs per sample of weight matmuls/convolutions (2 * MACs), bias excluded."""
    saved_elements: int
    """Float elements per sample kept for backward (stored in the compute dtype)."""
    saved_fixed_bytes: int
    """Bytes per sample kept for backward whatever the dtype (bool masks, int64 indices)."""
    activation_bytes: int
    """Bytes per sample kept for backward at the requested dtype."""


def network_layers(spec: NetworkSpec, dtype_bytes: int = 4) -> list[LayerInfo]:
    """Leaf layers in execution order with shapes, parameters, FLOPs and saved bytes per sample."""
    if dtype_bytes < 1:
        raise ModelplanError(f"dtype_bytes ({dtype_bytes}) must be >= 1")
    rows = []
    for leaf in walk(spec.layers, tuple(spec.input_shape)):
        shapes = param_shapes(leaf)
        matmul, other = forward_flops(leaf)
        elements, fixed = saved_for_backward(leaf)
        rows.append(
            LayerInfo(
                path=leaf.path,
                type=leaf.type,
                unit=leaf.unit,
                input_shape=leaf.input_shape,
                output_shape=leaf.output_shape,
                params=sum(math.prod(s) for s in shapes.values()),
                param_shapes=shapes,
                buffers=buffer_count(leaf),
                forward_flops=matmul + other,
                matmul_flops=matmul,
                saved_elements=elements,
                saved_fixed_bytes=fixed,
                activation_bytes=elements * dtype_bytes + fixed,
            )
        )
    return rows


def _with_parents(leaves: dict[str, int]) -> dict[str, int]:
    """Add every ancestor path as the sum of its descendants (nanoGPT sizing-notebook style)."""
    out: dict[str, int] = {}
    for key, value in leaves.items():
        parts = key.split("/")
        for cut in range(1, len(parts) + 1):
            prefix = "/".join(parts[:cut])
            out[prefix] = out.get(prefix, 0) + value
    return out


def count_network_params(spec: NetworkSpec) -> ParamCount:
    """Exact parameters: breakdown per tensor (`0/weight`) with parent sums; per_layer per leaf."""
    layers = network_layers(spec)
    tensors = {
        f"{row.path}/{name}": math.prod(shape)
        for row in layers
        for name, shape in row.param_shapes.items()
    }
    total = sum(row.params for row in layers)
    return ParamCount(
        total=total,
        trainable=total,
        active=total,
        breakdown=_with_parents(tensors),
        per_layer=[row.params for row in layers],
    )


def count_network_flops(spec: NetworkSpec, training: TrainingSpec) -> FlopCount:
    """FLOPs of one step of `training.global_batch` samples (conventions: FLOP_CONVENTION)."""
    layers = network_layers(spec)
    batch = training.global_batch
    matmul = sum(row.matmul_flops for row in layers)
    per_sample = sum(row.forward_flops for row in layers)
    other = per_sample - matmul
    forward = per_sample * batch
    # backward = 2x forward for weight matmuls (grad input + grad weight), 1x for elementwise ops
    model = (3 * matmul + 2 * other) * batch
    # Megatron convention: full recompute reruns the forward once more before the backward
    hardware = model + (forward if training.recompute == "full" else 0)
    breakdown = {row.path: row.forward_flops * batch for row in layers if row.forward_flops}
    return FlopCount(
        forward_per_token=per_sample,
        forward=forward,
        model=model,
        hardware=hardware,
        breakdown=_with_parents(breakdown),
        convention=FLOP_CONVENTION,
    )


def count_network_memory(spec: NetworkSpec, training: TrainingSpec, micro_batch: int) -> MemoryCount:
    """Bytes of model states and of the activations one micro-batch keeps for backward.

    Weights in the compute dtype; gradients in `training.grad_bytes`; optimizer states fp32
    (4 bytes each); an fp32 master copy under mixed precision (ZeRO paper, Rajbhandari et al.
    2020, sec. 3.1: 2 + 2 + 12 bytes per parameter for Adam). BatchNorm buffers are left out.
    Activations: micro_batch * the per-sample bytes of `network_layers` (all float activations
    in the compute dtype). With recompute 'full', only each unit's input is kept (a checkpoint per
    unit, as Megatron's full recompute keeps each layer's input; see `LayerInfo.unit`); the
    recomputed working set of one unit during its backward is not included.
    """
    if micro_batch < 1:
        raise ModelplanError(f"micro_batch ({micro_batch}) must be >= 1")
    dtype_bytes = training.dtype_bytes
    layers = network_layers(spec, dtype_bytes)
    params = sum(row.params for row in layers)
    if training.recompute == "full":
        per_layer, seen = [], set()
        for row in layers:
            first = row.unit not in seen
            seen.add(row.unit)
            width = INDEX_BYTES if row.type == "embedding" else dtype_bytes
            per_layer.append(math.prod(row.input_shape) * width * micro_batch if first else 0)
    else:
        per_layer = [row.activation_bytes * micro_batch for row in layers]
    return MemoryCount(
        weights=params * dtype_bytes,
        gradients=params * training.grad_bytes,
        optimizer=params * training.optimizer_state_bytes * training.optimizer_states,
        master_weights=params * 4 if training.uses_master_weights else 0,
        activations=sum(per_layer),
        activations_per_layer=per_layer,
    )
