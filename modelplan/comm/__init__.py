"""Collectives: operations, bytes and steps per algorithm, alpha-beta times on cluster links.

Entry points:
- `cost.collective_time_s(op, nbytes, group_size, ranks_per_node, cluster, algo="auto")`: seconds.
- `cost.collective_cost(...)`: a frozen `CollectiveCost` (algo, bytes, steps, links, algbw, busbw).
- `exact.bytes_per_rank(op, algo, nbytes, group_size, group_rank, root)`: exact ledger bytes.
- `clusters.load_cluster(ref)` / `clusters.load_accelerator(ref)`: presets or TOML files.
- `topology.shape_of_ranks(ranks, gpus_per_node)`: where a group sits (nodes, ranks per node).
"""
