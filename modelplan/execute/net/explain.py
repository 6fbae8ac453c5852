"""The tensor-parallel walk-through behind `modelplan verify ... --explain`: real numbers, step by step.

For the first micro-batch, every tensor-parallel rank runs the forward and backward of the
(scaled-down) network on its shards while a recording hook keeps, for each split layer, its
input, its weight shard, its local (partial) output and the output after the collective; one
device runs the same micro-batch whole. The steps pair them up: the textbook C = A B with B split
by columns, C_i = A B_i per rank, the AllGather that concatenates [C_1 ... C_p], and the check
that the concatenation is the single-device C; for a Megatron pair, the row-parallel partial
products and the AllReduce that sums them; then the weight-gradient shards against the
single-device gradient. Only the tensor-parallel view (dp = pp = 1) is walked through.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from modelplan.comm.communicator import Group
from modelplan.comm.ops import Axis
from modelplan.count.network import network_layers
from modelplan.count.network_tree import leaves_of, network_tree
from modelplan.execute.net.engine import net_param_defs
from modelplan.execute.net.loss import loss_backward, loss_forward
from modelplan.execute.net.model import LeafHooks, Params, backward_nodes, forward_nodes
from modelplan.execute.net.params import init_params, make_batch
from modelplan.execute.net.saved import RunContext
from modelplan.execute.net.scale import scale_network
from modelplan.execute.net.tensor_parallel import NetTensorParallel
from modelplan.execute.simcomm import run_spmd
from modelplan.plan.net_layout import network_stages
from modelplan.plan.net_tp import TpRole
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan

MAX_SHOWN = 64
"""Largest matrix (elements) whose values are shown; bigger ones are given by shape."""
MAX_STEPS = 12
"""Layer steps shown in full; the rest are summarised in one step."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Matrix(_Frozen):
    """A named array as a 2-d table (rows: first dim), values omitted when large."""

    label: str
    shape: list[int]
    values: list[list[float]] | None = None


class WalkStep(_Frozen):
    """One step of the walk-through."""

    title: str
    text: str
    ranks: list[list[Matrix]] = Field(default_factory=list)
    """Per tensor-parallel rank, the matrices it holds or computes in this step."""
    result: list[Matrix] = Field(default_factory=list)
    """Whole results (after the collective, and the single-device value)."""
    check: str = ""
    """The comparison with the single-device run, e.g. 'max |difference| = 0.0e+00'."""
    passed: bool = True


class TpWalkthrough(_Frozen):
    """The walk-through of one micro-batch."""

    model: str
    tp: int
    micro_batch: int
    steps: list[WalkStep]

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.steps)


def _matrix(label: str, a: np.ndarray) -> Matrix:
    a = np.asarray(a, dtype=float)
    table = a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(1, -1)
    values = table.tolist() if a.size <= MAX_SHOWN else None
    return Matrix(label=label, shape=list(a.shape), values=values)


class _Recorder(LeafHooks):
    """Keeps (input, params, local output, final output) of every leaf, around inner hooks."""

    def __init__(self, inner: LeafHooks) -> None:
        self.inner, self.seen = inner, {}

    def before_forward(self, node, x, p):
        self.seen[node.path] = {"x": x, "p": dict(p)}

    def feature(self, node):
        return self.inner.feature(node)

    def add_bias(self, node):
        return self.inner.add_bias(node)

    def after_forward(self, node, y, p):
        out = self.inner.after_forward(node, y, p)
        self.seen[node.path].update(local=y, y=out)
        return out

    def before_backward(self, node, dy):
        return self.inner.before_backward(node, dy)

    def after_backward(self, node, dx):
        return self.inner.after_backward(node, dx)


def _one_micro_batch(nodes, params, batch, hooks):
    tape: list = []
    y = forward_nodes(nodes, params, batch.inputs, RunContext(0, 0, batch.inputs.shape[0]), {}, hooks, tape)
    loss, cache = loss_forward(batch.loss, y, batch.targets)
    grads: Params = {}
    backward_nodes(nodes, params, tape, loss_backward(batch.loss, cache, batch.targets, 1.0), grads, hooks,
                   need_dx=False)
    return loss, grads


def _rank_program(comm, nodes, roles, defs, full, batch):
    tp = comm.world_size
    local = {}
    for d in defs:
        value = full[d.name]
        if d.tp_dim is not None:
            n = value.shape[d.tp_dim]
            index = [slice(None)] * value.ndim
            index[d.tp_dim] = slice(comm.rank * n // tp, (comm.rank + 1) * n // tp)
            value = value[tuple(index)]
        local[d.name] = value
    rec = _Recorder(NetTensorParallel(comm, Group(Axis.TP, tuple(range(tp))), roles))
    loss, grads = _one_micro_batch(nodes, local, batch, rec)
    return rec.seen, grads, loss


def _diff(a: np.ndarray, b: np.ndarray) -> tuple[str, bool]:
    err = float(np.max(np.abs(a - b)))
    scale = max(float(np.max(np.abs(b))), 1e-300)
    return f"max |difference| = {err:.1e} (relative {err / scale:.1e})", err / scale < 1e-9


def tp_walkthrough(spec: NetworkSpec, plan: Plan, seed: int = 0, scale: bool = True) -> TpWalkthrough:
    """Record one micro-batch under tp = plan.tp and lay it out as steps (module docstring)."""
    if scale:
        spec = scale_network(spec, plan)
    tp, b = plan.tp, plan.micro_batch
    stage = network_stages(network_tree(spec), 1, tp)[0]
    layers = network_layers(spec)
    full = init_params(layers, seed)
    batch = make_batch(layers, b, seed)
    defs = net_param_defs([stage])
    run = run_spmd(tp, _rank_program, stage.nodes, stage.roles, defs, full, batch)
    seen = [r[0] for r in run.results]
    ref = _Recorder(LeafHooks())
    ref_loss, ref_grads = _one_micro_batch(stage.nodes, full, batch, ref)
    steps = [WalkStep(title="Input", text=f"One micro-batch of {b} sample(s) enters every rank whole.",
                      result=[_matrix("x", batch.inputs)])]
    split = [leaf for leaf in leaves_of(stage.nodes)
             if stage.roles[leaf.path].role is not TpRole.REPLICATED or stage.roles[leaf.path].gather_after]
    layer_steps = [s for leaf in split for s in _leaf_steps(leaf, stage.roles[leaf.path], seen, ref.seen[leaf.path], tp)]
    steps += _capped(layer_steps, MAX_STEPS, "split layers")
    replicated = [leaf.path for leaf in leaves_of(stage.nodes) if stage.roles[leaf.path].role is TpRole.REPLICATED]
    out_path = list(leaves_of(stage.nodes))[-1].path
    text, ok = _diff(seen[0][out_path]["y"], ref.seen[out_path]["y"])
    steps.append(WalkStep(
        title="Replicated layers and the output",
        text=(f"Layers {', '.join(replicated)} are not split (tp {tp} does not divide them, or they need "
              "every feature): each rank computes them whole on the same input. "
              f"Loss on every rank {run.results[0][2]:.12g}, single device {ref_loss:.12g}.") if replicated
        else f"Loss on every rank {run.results[0][2]:.12g}, single device {ref_loss:.12g}.",
        result=[_matrix("output (rank 0)", seen[0][out_path]["y"]), _matrix("output (one device)", ref.seen[out_path]["y"])],
        check=text, passed=ok))
    steps += _capped(_gradient_steps(stage, defs, [r[1] for r in run.results], ref_grads, tp), MAX_STEPS // 3,
                     "weight gradients")
    return TpWalkthrough(model=spec.name, tp=tp, micro_batch=b, steps=steps)


def _capped(steps: list[WalkStep], keep: int, what: str) -> list[WalkStep]:
    """The first `keep` steps, then one step summarising the comparisons of the rest."""
    if len(steps) <= keep:
        return steps
    rest = steps[keep:]
    checked = sum(1 for s in rest if s.check)
    ok = all(s.passed for s in rest)
    return steps[:keep] + [WalkStep(
        title=f"... {len(rest)} more steps ({what})",
        text=(f"They repeat the same pattern; {checked} of their results were compared with one device: "
              + ("all equal." if ok else "NOT all equal.")), passed=ok)]


def _leaf_steps(leaf, role, seen, ref, tp) -> list[WalkStep]:
    path, kind = leaf.path, leaf.info.type
    mine = [s[path] for s in seen]
    steps = []
    if role.role is TpRole.COLUMN:
        n = leaf.layer.out_features if kind == "linear" else leaf.layer.out_channels
        per = n // tp
        bias = "bias" in ref["p"]
        ranks = [[_matrix(f"B_{i + 1} = W[:, {i * per}:{(i + 1) * per}]", m["p"]["weight"])]
                 + ([_matrix(f"b_{i + 1}", m["p"]["bias"])] if bias else [])
                 + [_matrix(f"C_{i + 1} = A B_{i + 1}" + (f" + b_{i + 1}" if bias else ""), m["local"])]
                 for i, m in enumerate(mine)]
        axis = 1 if kind != "linear" else ref["y"].ndim - 1
        joined = np.concatenate([m["local"] for m in mine], axis=axis)
        text, ok = _diff(joined, ref["y"])
        steps.append(WalkStep(
            title=f"{path} ({kind}): column-parallel, C = A B with B split by columns",
            text=(f"A = the layer's input, the same on every rank; B = its weight W "
                  f"({' x '.join(map(str, ref['p']['weight'].shape))}, inputs x outputs). B is split by output "
                  f"columns: rank i holds {per} of the {n} columns (and of the bias) and computes its partial "
                  "product C_i = A B_i with no communication. Side by side, [C_1 ... C_p] is C = A B."),
            ranks=ranks, result=[_matrix("A", ref["x"]), _matrix("C = A B" + (" + b" if bias else "") + " on one device",
                                                                  ref["y"])],
            check="[C_1 ... C_p] against C: " + text, passed=ok))
    elif role.role is TpRole.SHARDED:
        steps.append(WalkStep(
            title=f"{path} ({kind}): on each rank's slice",
            text="Each rank applies the layer to its own slice of the features; nothing is exchanged.",
            ranks=[[_matrix(f"slice {i + 1}", m["local"])] for i, m in enumerate(mine)]))
    elif role.role is TpRole.ROW:
        text, ok = _diff(mine[0]["y"], ref["y"])
        steps.append(WalkStep(
            title=f"{path} ({kind}): row-parallel, then AllReduce",
            text=("Its input arrives split by features, so rank i multiplies its slice X_i by the matching "
                  "rows W_i: Y = sum_i X_i W_i. An AllReduce sums the partial products on every rank; the "
                  "bias is added once, after the sum."),
            ranks=[[_matrix(f"X_{i + 1}", m["x"]), _matrix(f"W_{i + 1} (rows)", m["p"]["weight"]),
                    _matrix(f"X_{i + 1} W_{i + 1}", m["local"])] for i, m in enumerate(mine)],
            result=[_matrix("Y after AllReduce (+ bias)", mine[0]["y"]), _matrix("Y on one device", ref["y"])],
            check=text, passed=ok))
    if role.gather_after:
        text, ok = _diff(mine[0]["y"], ref["y"])
        after = "" if role.role is TpRole.COLUMN else (
            " The layers since the split act on each feature separately, so applying them to each slice "
            "and then concatenating gives the same as applying them to C.")
        steps.append(WalkStep(
            title=f"AllGather after {path}",
            text=(f"The {tp} slices are concatenated in rank order, [C_1 ... C_{tp}], so every rank holds the "
                  f"whole activation, equal to what one device computes without any split.{after}"),
            result=[_matrix("after AllGather (every rank)", mine[0]["y"]), _matrix("one device", ref["y"])],
            check=text, passed=ok))
    return steps


def _gradient_steps(stage, defs, grads, ref_grads, tp) -> list[WalkStep]:
    steps = []
    for d in defs:
        if d.tp_dim is None or not d.name.endswith("weight"):
            continue
        whole = np.concatenate([g[d.name] for g in grads], axis=d.tp_dim)
        text, ok = _diff(whole, ref_grads[d.name])
        column = stage.roles[d.name.rsplit("/", 1)[0]].role is TpRole.COLUMN
        how = ("dW_i = A^T dC_i: each rank takes its slice of dL/dC (the AllGather's backward) and "
               "needs no communication; dA = sum_i dC_i W_i^T is all-reduced, except for the "
               "network's input, which needs no gradient.") if column else \
              ("dW_i = X_i^T dY with the whole dY every rank already holds; dX_i = dY W_i^T stays split.")
        steps.append(WalkStep(
            title=f"Backward: gradient of {d.name}", text=how,
            ranks=[[_matrix(f"dW_{i + 1}", g[d.name])] for i, g in enumerate(grads)],
            result=[_matrix("concatenated", whole), _matrix("one device", ref_grads[d.name])],
            check=text, passed=ok))
    return steps
