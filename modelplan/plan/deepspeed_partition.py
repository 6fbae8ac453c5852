"""DeepSpeed's default pipeline partition: `PipelineModule(partition_method="parameters")`.

DeepSpeed's pipeline engine places layers on stages itself (deepspeed/runtime/pipe/module.py
`_partition_layers`): under its default method 'parameters' it counts each layer's trainable
parameters and splits the layer list with `partition_balanced` (deepspeed/runtime/utils.py, the
linear partition problem solved by dynamic programming, minimising the largest minus the smallest
part). A Megatron-DeepSpeed GPT pipeline is [embedding, block x L, final norm, output] with tied
embeddings as a second copy of the word embedding at the end (`TiedLayerSpec`, counted again), so
the stages holding the embedding or the head get fewer blocks. The partition is the engine's
choice when the user sets no boundaries; `modelplan plan` searches its own split, and the DeepSpeed
export states both.
"""

from __future__ import annotations

from modelplan.plan.shard import unit_shards
from modelplan.specs.plan import Plan
from modelplan.specs.transformer import TransformerSpec


def partition_balanced(weights: list[int], num_parts: int) -> list[int]:
    """Part boundaries (num_parts + 1 indices into `weights`) as DeepSpeed's
    `ds_utils.partition_balanced` computes them: for the first i items in j parts, the cut k whose
    parts have the smallest (largest - smallest) weight, ties to the latest k; fewer items than
    parts: `partition_uniform`."""
    n, m = len(weights), num_parts
    if n <= m:
        return _partition_uniform(n, m)
    inf = float("inf")
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    dp_max = [[inf] * (m + 1) for _ in range(n + 1)]
    dp_min = [[inf] * (m + 1) for _ in range(n + 1)]
    dp_cost = [[inf] * (m + 1) for _ in range(n + 1)]
    position = [[0] * (m + 1) for _ in range(n + 1)]
    dp_max[0][0] = dp_cost[0][0] = 0
    for i in range(1, n + 1):
        for j in range(1, min(i, m) + 1):
            for k in range(i):
                part = prefix[i] - prefix[k]
                hi, lo = max(dp_max[k][j - 1], part), min(dp_min[k][j - 1], part)
                if dp_cost[i][j] >= hi - lo:
                    dp_cost[i][j], dp_max[i][j], dp_min[i][j], position[i][j] = hi - lo, hi, lo, k
    parts = [n]
    for j in range(m, 0, -1):
        parts.append(position[parts[-1]][j])
    return parts[::-1]


def _partition_uniform(num_items: int, num_parts: int) -> list[int]:
    """DeepSpeed's `ds_utils.partition_uniform` boundaries (the remainder to the first parts)."""
    parts = [0] * (num_parts + 1)
    if num_items <= num_parts:
        for p in range(num_parts + 1):
            parts[p] = min(p, num_items)
        return parts
    chunk, residual = divmod(num_items, num_parts)
    for p in range(num_parts):
        parts[p + 1] = parts[p] + chunk + (1 if p < residual else 0)
    return parts


def parameters_split(spec: TransformerSpec, tp: int, num_stages: int) -> tuple[int, ...]:
    """Blocks per pipeline stage under DeepSpeed's 'parameters' partition of a Megatron-DeepSpeed
    GPT pipeline at tensor-parallel size `tp` (module docstring; the final norm and the output
    layer as one item)."""
    numel = {u: s.numel for u, s in unit_shards(spec, Plan(tp=tp)).items()}
    blocks = [numel.get(f"layers/{i}", 0) + numel.get(f"layers/{i}/experts", 0) for i in range(spec.num_blocks)]
    embedding = numel.get("embedding/word", 0) + numel.get("embedding/extra", 0)
    tail = numel.get("head", 0) + (numel.get("embedding/word", 0) if spec.tied_embeddings else 0)
    weights = [embedding, *blocks, tail]
    bounds = partition_balanced(weights, num_stages)
    # item i + 1 is block i: count the blocks inside each part
    return tuple(sum(1 for item in range(bounds[s], bounds[s + 1]) if 1 <= item <= len(blocks))
                 for s in range(num_stages))
