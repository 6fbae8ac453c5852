"""Topology placement: which parallel axis fills the NVLink node and which runs on the network.

A rank order lists the axes fastest first (Megatron-LM's order string); an axis whose ranks are
`stride` apart (the product of the faster axes) has gpus_per_node // stride ranks per node while
stride < gpus_per_node (`plan.dims.strided_shape`). So the order decides which axes share the
node's NVLink and which cross the scale-out network, as Calculon's network-per-axis choice does.

Orders the engines run:
- "tp-cp-dp-pp": Megatron-LM's default `tp-cp-ep-dp-pp` (ep lives in dp), torchtitan's mesh
  [pp, dp_replicate, dp_shard, cp, tp] read slowest first;
- "tp-cp-pp-dp": Megatron-LM `--use-tp-pp-dp-mapping` (pipeline neighbours in one node, data
  parallel across nodes).
Other orders (tp or cp outside the fastest place) put tensor/context-parallel traffic on the
network; the search tries them only when asked (`allow_tp_across_nodes`).
"""

from __future__ import annotations

from itertools import permutations

from modelplan.comm.ops import Axis
from modelplan.comm.topology import GroupShape
from modelplan.plan.dims import EXPERT_DP, shape, strided_shape

DEFAULT_ORDER = "tp-cp-dp-pp"
ENGINE_ORDERS: tuple[str, ...] = ("tp-cp-dp-pp", "tp-cp-pp-dp")
"""Rank orders Megatron-LM and torchtitan can launch (module docstring)."""
_AXES = ("tp", "cp", "dp", "pp")


def parse_order(order: str) -> tuple[str, ...]:
    """'tp-cp-dp-pp' -> ('tp', 'cp', 'dp', 'pp'), each axis once."""
    axes = tuple(order.split("-"))
    if sorted(axes) != sorted(_AXES):
        raise ValueError(f"rank order '{order}' must name each of tp, cp, dp, pp once")
    return axes


def strides(order: str, tp: int, cp: int, dp: int, pp: int) -> dict[str, int]:
    """Rank distance between neighbours of each axis under `order`."""
    sizes = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
    out, stride = {}, 1
    for axis in parse_order(order):
        out[axis] = stride
        stride *= sizes[axis]
    return out


def placed_shapes(order: str, tp: int, cp: int, dp: int, pp: int, ep: int, gpus_per_node: int) -> dict:
    """`ParallelDims.group_shapes` under `order`: each axis's group on nodes (the DP entry is the
    dp x cp gradient group; EXPERT_DP every ep-th dp rank with its cp ranks)."""
    st = strides(order, tp, cp, dp, pp)
    s_cp, s_dp = st["cp"], st["dp"]
    if cp == 1:
        dp_shape = strided_shape(dp, s_dp, gpus_per_node)
    elif s_cp * cp == s_dp or s_dp * dp == s_cp:  # cp and dp adjacent: one strided run of dp * cp
        dp_shape = strided_shape(dp * cp, min(s_cp, s_dp), gpus_per_node)
    else:
        dp_shape = _exact([c * s_cp + d * s_dp for d in range(dp) for c in range(cp)], gpus_per_node)
    if ep == 1:
        expert = dp_shape
    else:
        expert = _exact([c * s_cp + d * s_dp for d in range(0, dp, ep) for c in range(cp)], gpus_per_node)
    return {
        Axis.TP: strided_shape(tp, st["tp"], gpus_per_node),
        Axis.CP: strided_shape(cp, s_cp, gpus_per_node),
        Axis.DP: dp_shape,
        Axis.PP: strided_shape(pp, st["pp"], gpus_per_node),
        Axis.EP: strided_shape(ep, s_dp, gpus_per_node),
        EXPERT_DP: expert,
    }


def _exact(ranks: list[int], gpus_per_node: int) -> GroupShape:
    per_node: dict[int, int] = {}
    for r in ranks:
        per_node[r // gpus_per_node] = per_node.get(r // gpus_per_node, 0) + 1
    return shape(len(ranks), max(per_node.values()))


def candidate_orders(tp: int, cp: int, dp: int, pp: int, gpus_per_node: int,
                     allow_tp_across_nodes: bool = False) -> list[str]:
    """Rank orders worth pricing, one per distinct placement: the engine orders, and with
    `allow_tp_across_nodes` every order of the four axes. An order whose TP group leaves the node
    while tp fits in one is dropped unless asked."""
    orders = list(ENGINE_ORDERS)
    if allow_tp_across_nodes:
        orders += ["-".join(p) for p in permutations(_AXES) if "-".join(p) not in orders]
    seen, out = set(), []
    for order in orders:
        shapes = placed_shapes(order, tp, cp, dp, pp, 1, gpus_per_node)
        tp_shape = shapes[Axis.TP]
        if not allow_tp_across_nodes and tp <= gpus_per_node and tp_shape.nodes > 1:
            continue
        key = tuple((s.size, s.nodes, s.ranks_per_node) for a, s in shapes.items() if a != EXPERT_DP)
        if key not in seen:
            seen.add(key)
            out.append(order)
    return out
