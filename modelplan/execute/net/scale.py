"""What verify can execute for a network, and a scaled-down copy that keeps its structure.

`scale_network` leaves small networks alone (at most 200,000 parameters and 20 MFLOPs of
forward per sample: the 2-3-2-1 MLP, LeNet-5) and otherwise caps every width (out_features,
out_channels, hidden_size, embedding_dim) at 8 * q, q = lcm(tp, the largest conv groups), keeping
a width that q divided a multiple of q (a depthwise conv, groups = out_channels, keeps groups equal
to its capped channels and does not enter q; an attention residual's keys and values keep their
ratio to its queries, its heads a divisor of them; a context-attention or focal-modulation leaf's stacked
input keeps its parity, 1 + 2 C, 2 C or 2 C + L + 1); the vocabulary at 32 rows; images at 32 x 32, or 64 x 64
when every BatchNorm2d would otherwise see fewer than 2 x 2 pixels (ResNet's last stage) or the
stack needs more; sequences at 6 steps. Inferred sizes
(in_features, in_channels, num_features, input_size) are re-inferred. Every layer, residual
block, norm, pool and flag stays, so the executed step exercises the same code paths.
"""

from __future__ import annotations

import math
from typing import Any

from modelplan.count.network import count_network_params, network_layers
from modelplan.errors import SpecError
from modelplan.count.network_tree import network_tree
from modelplan.plan.net_evaluator import network_plan_problems
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

SMALL_PARAMS = 200_000
SMALL_FLOPS = 20_000_000
WIDTHS = ("out_features", "out_channels", "hidden_size", "embedding_dim")
INFERRED = ("in_features", "in_channels", "num_features", "input_size")


def _depthwise(node: dict) -> bool:
    """A depthwise conv (groups = out_channels > 1): it shrinks with its channels."""
    return node.get("type", "").startswith("conv") and node.get("groups", 1) == node.get("out_channels") > 1


def _groups(node: Any) -> int:
    if isinstance(node, dict):
        own = node.get("groups", 1) if node.get("type", "").startswith("conv") and not _depthwise(node) else 1
        return max([own] + [_groups(v) for v in node.values()])
    if isinstance(node, list):
        return max([1] + [_groups(v) for v in node])
    return 1


def _shrink(node: Any, cap: int, q: int) -> Any:
    """A copy of a spec tree (dicts/lists) with capped widths and inferred sizes cleared."""
    if isinstance(node, list):
        return _fit_stacked([_shrink(v, cap, q) for v in node])
    if not isinstance(node, dict):
        return node
    out = {k: _shrink(v, cap, q) for k, v in node.items() if k not in INFERRED}
    for key in WIDTHS:
        if key in out and out[key] > cap:
            out[key] = cap if node[key] % q == 0 else cap + 1
    if _depthwise(node):
        out["groups"] = out["out_channels"]
    if out.get("type") == "groupnorm":  # groups that divide the capped widths (and the narrower ones they divided)
        out["num_groups"] = math.gcd(out["num_groups"], cap)
    if out.get("combine") == "attend":
        _keep_attention(out, node)
    if out.get("type") == "embedding":
        out["num_embeddings"] = min(out["num_embeddings"], 32)
    if out.get("proj_size"):
        out["proj_size"] = min(out["proj_size"], max(out["hidden_size"] // 2, 1))
    if out.get("type") == "layernorm" and out.get("normalized_shape") and len(out["normalized_shape"]) == 1:
        out["normalized_shape"] = None
    return out


def _parity(item: dict) -> int | None:
    """The parity of the channels a stacked-input leaf reads: separable 1 + 2 C, additive 2 C,
    focal modulation 2 C + L + 1; None for any other item."""
    kind = item.get("type")
    if kind == "focalmodulation":
        return (item["focal_level"] + 1) % 2
    return {"separableattention": 1, "additiveattention": 0}.get(kind)


def _fit_stacked(items: list) -> list:
    """A capped conv before a separable (1 + 2 C channels), additive (2 C) attention or focal
    modulation (2 C + L + 1) leaf, one channel narrower where capping broke that parity."""
    for before, item in zip(items, items[1:]):
        parity = _parity(item) if isinstance(item, dict) else None
        while isinstance(before, dict) and before.get("type") == "sequential":  # MobileViTV2ConvLayer's convolution
            before = before["layers"][-1]
        if parity is not None and before.get("type", "").startswith("conv") and before["out_channels"] % 2 != parity:
            before["out_channels"] -= 1
    return items


def _last_width(items: list) -> dict | None:
    """The last item of a branch that sets a width (out_channels / out_features)."""
    return next((item for item in reversed(items) if "out_channels" in item or "out_features" in item), None)


def _width(item: dict) -> int:
    return item.get("out_channels", item.get("out_features"))


def _keep_attention(block: dict, original: dict) -> None:
    """An attention residual after capping: keys and values in the queries' capped width and the
    original values-to-keys ratio (the caps apply to each branch's layers alone), heads dividing both."""
    query, keys_values = _last_width(block["main"]), _last_width(block.get("shortcut", []))
    was_query, was_kv = _last_width(original["main"]), _last_width(original.get("shortcut", []))
    if query is not None and keys_values is None:  # stacked by a nested block (CvT's concat): heads dividing the queries
        block["heads"] = math.gcd(block["heads"], _width(query))
    if query is None or keys_values is None:
        return
    width = _width(query)
    values = (_width(was_kv) - _width(was_query)) * width // _width(was_query)
    keys_values["out_channels" if "out_channels" in keys_values else "out_features"] = width + values
    block["heads"] = math.gcd(block["heads"], width, values)


def _inputs(shape: list[int], tokens: bool) -> list[list[int]]:
    """Candidate smaller input shapes, smallest first, ending with the original."""
    if len(shape) == 3:
        return [[shape[0], min(shape[1], s), min(shape[2], s)] for s in (32, 64, 128)] + [shape]
    if tokens or len(shape) <= 2:
        return [[min(shape[0], 6)] + shape[1:], shape]
    return [shape]


def is_small(spec: NetworkSpec) -> bool:
    """Small enough to execute as it is."""
    flops = sum(row.forward_flops for row in network_layers(spec))
    return count_network_params(spec).total <= SMALL_PARAMS and flops <= SMALL_FLOPS


def scale_network(spec: NetworkSpec, plan: Plan) -> NetworkSpec:
    """A copy small enough for a seconds-long float64 step (see the module docstring)."""
    if is_small(spec):
        return spec
    data = spec.model_dump(exclude_none=True)
    q = math.lcm(plan.tp, _groups(data["layers"]))
    layers = _shrink(data["layers"], 8 * q, q)
    fallback = spec
    for shape in _inputs(list(spec.input_shape), spec.tokens_input):
        try:
            small = NetworkSpec.model_validate(data | {"layers": layers, "input_shape": shape,
                                                       "name": f"{spec.name} (scaled down)"})
        except (SpecError, ValueError):
            continue
        if _well_conditioned(small):
            return small
        fallback = small if fallback is spec else fallback
    return fallback


def _well_conditioned(spec: NetworkSpec) -> bool:
    """Every BatchNorm2d sees at least 4 x 4 pixels per sample: with 1 x 1 and a micro-batch of 2
    the statistics rest on 2 values and float64 gradients lose the 1e-9 agreement; 2 x 2 was still
    too few for a deep stack (EfficientNet-B7's 55 blocks at a 64 px input ended on 2 x 2 and its
    sharded gradients differed from the reference by 1.5e-9; at 128 px, 4 x 4, they agree)."""
    return all(math.prod(r.input_shape[1:]) >= 16 for r in network_layers(spec) if r.type == "batchnorm2d")


def check_network_plan(spec: NetworkSpec, training: TrainingSpec, plan: Plan) -> int:
    """The planner's rules for a network plan (`net_evaluator.network_plan_problems`, one SpecError
    naming every broken rule); returns num_microbatches."""
    problems = network_plan_problems(spec, training, plan, len(network_tree(spec)))
    if problems:
        raise SpecError("; ".join(p.message for p in problems))
    return plan.num_microbatches(training.global_batch)
