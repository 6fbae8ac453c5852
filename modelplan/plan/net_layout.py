"""How a generic network (MLP, CNN, RNN) is cut into pipeline stages, shared by the planner and
the executor so both run the same split.

**Pipeline**: the units (`LayerInfo.unit`: a leaf, or a whole residual block) are cut into `pp * vpp`
contiguous stages minimising the largest stage's training FLOPs (3x matmul + 2x elementwise
forward FLOPs, the count's convention), the classic linear-partition problem; among optimal
splits the one that packs the earlier stages fullest is taken, so the answer is unique.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from modelplan.count.network_tree import LeafNode, Node, leaves_of
from modelplan.errors import SpecError
from modelplan.plan.net_tp import LeafTp, assign_tp
from modelplan.plan.pipeline.actions import VirtualStage


@dataclass(frozen=True)
class UnitsSplit:
    """Units per stage: stage v holds units [bounds[v], bounds[v+1])."""

    bounds: tuple[int, ...]
    flops: tuple[int, ...]
    """Training FLOPs per sample of each stage."""

    def stage(self, v: int) -> range:
        """Unit indices of stage v."""
        return range(self.bounds[v], self.bounds[v + 1])


def training_flops(leaf: LeafNode) -> int:
    """Forward + backward FLOPs per sample: 3x matmul, 2x elementwise (count.network's rule)."""
    info = leaf.info
    return 3 * info.matmul_flops + 2 * (info.forward_flops - info.matmul_flops)


def split_units(units: list[tuple[Node, ...]], stages: int) -> UnitsSplit:
    """Contiguous split of the units into `stages` parts with the smallest largest part."""
    weights = [sum(training_flops(leaf) for leaf in leaves_of(u)) for u in units]
    n = len(weights)
    if stages > n:
        raise SpecError(f"pp * vpp ({stages}) must not exceed the network's units ({n})")
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    inf = float("inf")
    # suffix[k][i]: smallest bottleneck of units [i, n) in k stages (linear-partition DP)
    suffix = [[inf] * (n + 1) for _ in range(stages + 1)]
    suffix[0][n] = 0
    for k in range(1, stages + 1):
        for i in range(n - k, -1, -1):
            suffix[k][i] = min(max(prefix[e] - prefix[i], suffix[k - 1][e]) for e in range(i + 1, n - k + 2))
    bottleneck = suffix[stages][0]
    bounds = [0]
    for k in range(stages, 1, -1):  # pack this stage fullest while the rest still fits
        start = bounds[-1]
        end = max(e for e in range(start + 1, n - k + 2)
                  if prefix[e] - prefix[start] <= bottleneck and suffix[k - 1][e] <= bottleneck)
        bounds.append(end)
    bounds.append(n)
    flops = tuple(prefix[bounds[v + 1]] - prefix[bounds[v]] for v in range(stages))
    return UnitsSplit(tuple(bounds), flops)


def unit_name(unit: tuple[Node, ...]) -> str:
    """A unit's name: the path of its leaf or residual block (e.g. 'conv1', 'layer1/0')."""
    return unit[0].path


@dataclass(frozen=True)
class StagePlan(VirtualStage):
    """One (virtual) pipeline stage of a network under a plan."""

    units: tuple[str, ...]
    """Names of the units it holds, in order (each unit is one DP bucket)."""
    nodes: tuple[Node, ...]
    """Its nodes in execution order."""
    roles: dict[str, LeafTp]
    """Tensor-parallel role per leaf path."""
    unit_nodes: tuple[tuple[Node, ...], ...]
    """Nodes of each unit."""
    train_flops: int
    """Training FLOPs per sample of the stage."""

    @cached_property
    def leaves(self) -> tuple[LeafNode, ...]:
        """Every leaf of its nodes in execution order (`leaves_of`)."""
        return tuple(leaves_of(self.nodes))

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Per-sample shape the stage receives."""
        return self.leaves[0].info.input_shape

    @property
    def output_shape(self) -> tuple[int, ...]:
        """Per-sample shape the stage sends on."""
        return self.nodes[-1].info.output_shape

    def needs_input_grad(self, leaf: LeafNode) -> bool:
        """Whether the leaf's backward computes dx: all but the network's very first leaf."""
        return not (self.is_first_stage and self.nodes[0] is leaf)


def network_stages(units: list[tuple[Node, ...]], num_stages: int, tp: int) -> list[StagePlan]:
    """The network's (virtual) stages with each leaf's tensor-parallel role."""
    split = split_units(units, num_stages)
    out = []
    for v in range(num_stages):
        mine = [units[k] for k in split.stage(v)]
        nodes = tuple(n for u in mine for n in u)
        out.append(StagePlan(v, num_stages, tuple(unit_name(u) for u in mine), nodes,
                             assign_tp(nodes, tp), tuple(mine), split.flops[v]))
    return out


def describe_stages(stages: list[StagePlan]) -> str:
    """One line: each stage's first..last unit and its training FLOPs per sample."""
    parts = [(f"{st.units[0]}..{st.units[-1]}" if len(st.units) > 1 else st.units[0])
             + f" ({st.train_flops:,} FLOPs/sample)" for st in stages]
    return "pipeline stages (balanced by training FLOPs): " + " | ".join(parts)
