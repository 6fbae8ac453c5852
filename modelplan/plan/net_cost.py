"""Time of one micro-batch on one stage of a network, per tensor-parallel rank.

Kernels per leaf (shapes from `count/network_layers.py`, tensor-parallel roles from
`plan/net_tp.py`; the planner's roofline `plan/compute.py` times them):
- Linear: one GEMM (rows = b * leading dims, k = in, n = out); backward dgrad + wgrad
  (the network's first leaf skips dgrad). Column-parallel splits n, row-parallel k.
- Conv: implicit GEMM (cuDNN): m = b * output pixels, k = C_in/groups * kernel, n = C_out/groups,
  `groups` times, moving input + weight + output once (not the im2col matrix).
- RNN/LSTM/GRU per layer and direction: the input projection over the whole sequence as one
  GEMM, then `seq` small recurrent GEMMs (b, G*h, h_out) one after the other, each paying the
  kernel overhead (cuDNN's persistent kernels are not modelled), plus one fused cell kernel per
  step; backward twice the GEMMs.
- Every other leaf is memory-bound (Williams et al. 2009): bytes = accesses per element x
  elements x dtype; forward reads the input and writes the output (2 accesses; norms 3 with
  their statistics pass), backward reads dy and what was saved and writes dx (3; norms 5).
  Bias adds ride in the GEMM epilogue; flatten is free. Window attention and a residual's
  attention combine: their two batched GEMMs per head plus the softmax pass over the scores;
  additive attention its w_g and proj GEMMs, focal modulation its depthwise convs and
  projection_context, each plus one memory-bound pass. A sharded leaf works on 1/tp.
Tensor-parallel collectives are those of `parallel/tp.leaf_calls` (the list verify checks),
priced on the tp group and exposed by `tp_exposed_fraction`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from modelplan.count.network_tree import LeafNode
from modelplan.comm.topology import GroupShape
from modelplan.plan.commcost import CommPricer
from modelplan.plan.compute import Roofline
from modelplan.plan.kernels import Elementwise, Gemm
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.parallel.tp import leaf_calls
from modelplan.plan.net_layout import StagePlan
from modelplan.plan.net_tp import TpRole
from modelplan.specs.costmodel import CostModel
from modelplan.count import cross_attention, window_attention
from modelplan.specs.context_attention import AdditiveAttention
from modelplan.specs.focal_modulation import FocalModulation
from modelplan.specs.layers import Attend
from modelplan.specs.layers import Conv, Linear, Recurrent, WindowAttention
from modelplan.specs.network_walk import as_tuple

NORMS = ("batchnorm1d", "batchnorm2d", "layernorm", "layernorm2d", "groupnorm")


@dataclass(frozen=True)
class ConvGemm(Gemm):
    """An implicit-GEMM convolution: moves input, weight and output once (cuDNN)."""

    io_elements: int = 0

    def bytes_moved(self, dtype_bytes: int) -> int:
        return dtype_bytes * self.io_elements


@dataclass(frozen=True)
class StageTime:
    """One micro-batch of one stage on one tp rank (seconds)."""

    fwd_s: float
    """Forward kernels (compute only)."""
    bwd_s: float
    """Backward kernels (compute only)."""
    tp_s: float
    """Exposed tensor-parallel collectives, forward and backward."""
    tp_hidden_s: float
    """Tensor-parallel time overlapped with compute."""
    gemm_flops: float
    """FLOPs of the stage's GEMMs, forward + backward (per tp rank)."""

    @property
    def total_s(self) -> float:
        return self.fwd_s + self.bwd_s + self.tp_s


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _split(role: TpRole, tp: int) -> tuple[int, int]:
    """(n divisor, k divisor) of a leaf's GEMM under its role."""
    if role is TpRole.COLUMN:
        return tp, 1
    if role is TpRole.ROW:
        return 1, tp
    return 1, 1


def leaf_gemms(leaf: LeafNode, b: int, tp: int, role: TpRole) -> list[tuple[Gemm, int]]:
    """(forward GEMM, how many times) of a matmul leaf on one tp rank."""
    info, layer = leaf.info, leaf.layer
    n_div, k_div = _split(role, tp)
    if isinstance(layer, Linear):
        rows = b * _numel(info.input_shape[:-1])
        return [(Gemm(leaf.path, rows, layer.out_features // n_div, info.input_shape[-1] // k_div), 1)]
    if isinstance(layer, Conv):
        kernel = _numel(as_tuple(layer.kernel_size, layer.spatial_dims, "kernel_size", leaf.path))
        g = layer.groups
        m = b * _numel(info.output_shape[1:])
        k = info.input_shape[0] // g // k_div * kernel
        n = layer.out_channels // g // n_div
        io = b * (_numel(info.input_shape) // k_div + _numel(info.output_shape) // n_div) + g * k * n
        return [(ConvGemm(leaf.path, m, n, k, g, io), 1)]
    if isinstance(layer, Recurrent):
        seq, gh = info.input_shape[0], layer.gates * layer.hidden_size
        out = []
        for k in range(layer.num_layers):
            in_l = info.input_shape[1] if k == 0 else layer.directions * layer.h_out
            out.append((Gemm(f"{leaf.path}/ih{k}", b * seq, gh, in_l), layer.directions))
            out.append((Gemm(f"{leaf.path}/hh{k}", b, gh, layer.h_out), layer.directions * seq))
            if layer.proj_size:
                out.append((Gemm(f"{leaf.path}/hr{k}", b, layer.proj_size, layer.hidden_size), layer.directions * seq))
        return out
    if isinstance(layer, WindowAttention):  # q k^T and p v of every head of every window, batched
        hp, wp = window_attention.padded_grid(layer, info.input_shape)
        t, d = layer.window_size ** 2, info.input_shape[0] // 3 // layer.heads
        batch = b * layer.heads * (hp * wp // t)
        return [(Gemm(f"{leaf.path}/scores", t, t, d), batch), (Gemm(f"{leaf.path}/values", t, d, t), batch)]
    if isinstance(layer, Attend):  # q k^T (P, M, d) and p v (P, d, M) of every head (and patch offset), batched
        groups = cross_attention.groups(layer, info.input_shape)
        p, m = _numel(info.output_shape[1:]) // groups, _numel(info.input_shape[1:]) // groups
        d, d_v = (width // layer.heads for width in cross_attention.widths(info.input_shape, info.output_shape))
        return [(Gemm(f"{leaf.path}/scores", p, m, d), b * layer.heads * groups),
                (Gemm(f"{leaf.path}/values", p, d_v, m), b * layer.heads * groups)]
    if isinstance(layer, AdditiveAttention):  # q^ @ w_g (P, 1, C) and proj (P, C, C)
        p, c = b * _numel(info.output_shape[1:]), info.output_shape[0]
        return [(Gemm(f"{leaf.path}/weights", p, 1, c), 1), (Gemm(f"{leaf.path}/proj", p, c, c), 1)]
    if isinstance(layer, FocalModulation):  # each level's depthwise conv (C groups of k^2 x 1), projection_context
        m, c = b * _numel(info.output_shape[1:]), info.output_shape[0]
        convs = [(ConvGemm(f"{leaf.path}/focal_{level}", m, 1, k * k, c, 2 * m * c + c * k * k), 1)
                 for level, k in enumerate(layer.kernels())]
        return convs + [(Gemm(f"{leaf.path}/context", m, c, c), 1)]
    return []


def leaf_elementwise(leaf: LeafNode, b: int, share: int) -> list[tuple[Elementwise, int]]:
    """(memory-bound kernel, how many times) of a non-matmul leaf, per tp rank."""
    info, t = leaf.info, leaf.info.type
    n = b * max(_numel(info.input_shape), _numel(info.output_shape)) // share
    if t == "flatten" or t in ("linear", "conv1d", "conv2d"):
        return []
    if isinstance(leaf.layer, Recurrent):
        layer = leaf.layer
        cells = b * layer.gates * layer.hidden_size
        return [(Elementwise(f"{leaf.path}/cell", cells, 3, 4), layer.num_layers * layer.directions * info.input_shape[0])]
    if t in NORMS:
        return [(Elementwise(leaf.path, n, 3, 5), 1)]
    if t == "embedding":
        return [(Elementwise(leaf.path, b * _numel(info.output_shape), 1, 2), 1)]
    if isinstance(leaf.layer, WindowAttention):  # the scores' scale, bias, mask and softmax
        return [(Elementwise(f"{leaf.path}/softmax", b * window_attention.scores(leaf.layer, info.input_shape), 2, 3), 1)]
    if isinstance(leaf.layer, Attend):  # the scores' scale and softmax
        scores = cross_attention.scores(leaf.layer, info.input_shape, info.output_shape)
        return [(Elementwise(f"{leaf.path}/softmax", b * scores, 2, 3), 1)]
    return [(Elementwise(leaf.path, n, 2, 3), 1)]


def _leaf_terms(leaf: LeafNode, b: int, tp: int, role: TpRole, input_grad: bool, roofline: Roofline,
                dtype_bytes: int) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """One leaf's forward, backward and FLOP terms on one tp rank, in the order `stage_time` adds them."""
    fwd, bwd, flops = [], [], []
    for gemm, times in leaf_gemms(leaf, b, tp, role):
        dgrad, wgrad = gemm.backward()
        if isinstance(gemm, ConvGemm):
            dgrad = ConvGemm(dgrad.name, dgrad.m, dgrad.n, dgrad.k, dgrad.batch, gemm.io_elements)
            wgrad = ConvGemm(wgrad.name, wgrad.m, wgrad.n, wgrad.k, wgrad.batch, gemm.io_elements)
        fwd.append(times * roofline.gemm_time_s(gemm, dtype_bytes))
        bwd.append(times * roofline.gemm_time_s(wgrad, dtype_bytes))
        flops.append(times * 2 * gemm.flops)
        if input_grad:
            bwd.append(times * roofline.gemm_time_s(dgrad, dtype_bytes))
            flops.append(times * gemm.flops)
    for op, times in leaf_elementwise(leaf, b, tp if role is TpRole.SHARDED else 1):
        op = Elementwise(op.name, op.elements, op.fwd_bytes_per_element * dtype_bytes,
                         op.bwd_bytes_per_element * dtype_bytes)
        fwd.append(times * roofline.elementwise_fwd_s(op))
        bwd.append(times * roofline.elementwise_bwd_s(op))
    return tuple(fwd), tuple(bwd), tuple(flops)


def stage_time(stage: StagePlan, b: int, tp: int, roofline: Roofline, pricer: CommPricer,
               tp_shape: GroupShape, dtype_bytes: int, cost: CostModel, memo: dict | None = None) -> StageTime:
    """Forward/backward compute and tensor-parallel time of one micro-batch of `b` samples.
    `memo` keeps each leaf's terms by (path, b, tp, role, input grad) for one roofline and dtype:
    a leaf priced once for every stage cut that holds it."""
    fwd = bwd = flops = 0.0
    memo = {} if memo is None else memo
    for leaf in stage.leaves:
        role = stage.roles[leaf.path].role
        input_grad = stage.needs_input_grad(leaf)
        key = (leaf.path, b, tp, role, input_grad)
        terms = memo.get(key)
        if terms is None:
            terms = memo[key] = _leaf_terms(leaf, b, tp, role, input_grad, roofline, dtype_bytes)
        for x in terms[0]:
            fwd += x
        for x in terms[1]:
            bwd += x
        for x in terms[2]:
            flops += x
    calls = RankCalls()
    leaf_calls(calls, stage, tp, b, dtype_bytes, 1)
    comm = calls.price(pricer, lambda _axis, _size: tp_shape)
    exposed = comm * cost.tp_exposed_fraction
    return StageTime(fwd, bwd, exposed, comm - exposed, flops)


def boundary_bytes(stage: StagePlan, b: int, dtype_bytes: int) -> int:
    """Bytes of one forward send from this stage to the next (`net_commlist` pp/forward)."""
    return b * _numel(stage.output_shape) * dtype_bytes
