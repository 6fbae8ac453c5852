"""The search's wider dimensions: overlap, offload, hierarchical sharding and placement.

For each plan point of the classic grid (tp, cp, pp, dp, ep, micro_batch, sp, recompute,
schedule, vpp, zero) the search also tries:
- `rank_order`: the placements of `plan/placement.py` (the engine orders; every order of the
  axes only with allow_tp_across_nodes);
- `tp_overlap`: none, and what the engine can run (Megatron: TE `ring` exchange and the
  `userbuffers` default map, the latter only where the accelerator's SM count is known;
  torchtitan: async TP `ring`), sequence parallelism only;
- `offload_activations`: off, and on where the cluster states its host, the engine is
  Megatron-core (the one that offloads saved activations) and the recompute is not full (full
  recompute keeps only block inputs; Calculon's rule);
- per ZeRO stage: HSDP shard groups of 1, 2 and 4 nodes' data-parallel ranks (zero >= 2,
  the evaluator's HSDP, `plan/fsdp.py`), ZeRO++ (DeepSpeed's: zero 3, at least two data-parallel
  ranks per node for hpZ's secondary shard), optimizer offload to cpu (and nvme where the host has it);
- `dp_overlap`: on and off where there is data-parallel traffic.
A user's `SearchSpace` value, or the training spec's fixed `tp_comm_overlap` / `dp_overlap`,
narrows each to what was asked.
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.plan.placement import candidate_orders

HSDP_NODES = (1, 2, 4)
"""HSDP shard groups the search tries, in nodes' worth of data-parallel ranks."""


class DpVariant(NamedTuple):
    """One data-parallel sharding choice under a ZeRO stage."""

    fsdp_shard_size: int | None
    zeropp: bool


class Extensions:
    """Which wider-dimension values one search tries (module docstring)."""

    def __init__(self, ev, space, training) -> None:
        self.gpn = ev.cluster.domain_gpus
        self.allow_across = space.allow_tp_across_nodes
        self.orders_asked = space.rank_order
        fw = ev.software.framework
        if training.tp_comm_overlap is not None:
            modes = [ev.tp_overlap_default]
        elif space.tp_overlap is not None:
            modes = list(space.tp_overlap)
        elif fw == "megatron":
            modes = ["none", "ring"] + (["userbuffers"] if ev.mech.sm_count else [])
        elif fw == "torchtitan":
            modes = ["none", "ring"]
        else:
            modes = ["none"]
        self.tp_modes = modes
        self.tp_strict = training.tp_comm_overlap is None and space.tp_overlap is not None
        """The user asked for these modes only: plans that cannot run them are not tried."""
        self.dp_overlaps = ([training.dp_overlap] if training.dp_overlap is not None
                            else list(space.dp_overlap) if space.dp_overlap is not None else [True, False])
        host = ev.host
        default_opts = ["none"] + (["cpu", "nvme"][: 1 + (host.nvme_read_Bps > 0)] if host is not None else [])
        self.opts = list(space.offload_optimizer) if space.offload_optimizer is not None else default_opts
        # activation offload as priced here (saved activations of non-recomputed blocks to the host)
        # is Megatron-core's (TransformerConfig cpu_offloading / fine_grained_activation_offloading);
        # DeepSpeed offloads only checkpoints (activation_checkpointing.cpu_checkpointing, with
        # recompute), torchtitan 0.3 has none (pytorch/torchtitan#2379), nor FSDP1 stacks: asked only
        self.acts = (list(space.offload_activations) if space.offload_activations is not None
                     else [False, True] if host is not None and fw == "megatron" else [False])
        self.shards_asked = space.fsdp_shard_size
        # ZeRO++ (qwZ, hpZ, qgZ) is DeepSpeed's alone (zero_quantized_weights, zero_hpz_partition_size,
        # zero_quantized_gradients; docs/_tutorials/zeropp.md): other engines try it only when asked
        self.zeropps = (list(space.zeropp) if space.zeropp is not None
                        else [False, True] if fw == "deepspeed" else [False])
        self._orders: dict[tuple, list[str]] = {}
        self._variants: dict[tuple, list[DpVariant]] = {}

    def orders(self, tp: int, cp: int, dp: int, pp: int) -> list[str]:
        """Rank orders to price for this grid."""
        key = (tp, cp, dp, pp)
        hit = self._orders.get(key)
        if hit is None:
            if self.orders_asked is not None:
                hit = list(self.orders_asked)
            else:
                hit = candidate_orders(tp, cp, dp, pp, self.gpn, self.allow_across)
            self._orders[key] = hit
        return hit

    def tp_overlaps(self, tp: int, sp: bool) -> list[str]:
        """TP overlap modes: the engine's with sequence parallelism, else only 'none'."""
        if tp > 1 and sp:
            return self.tp_modes
        return ["none"] if "none" in self.tp_modes or not self.tp_strict else []

    def activation_offloads(self, recompute: str) -> list[bool]:
        """Activation offload choices under a recompute policy."""
        return [False] if recompute == "full" and self.acts != [True] else self.acts

    def dp_variants(self, zero: int, tp: int, dp: int, ep: int, cp: int) -> list[DpVariant]:
        """HSDP shard groups and ZeRO++ under ZeRO stage `zero` (plain sharding first)."""
        key = (zero, tp, dp, ep, cp)
        hit = self._variants.get(key)
        if hit is None:
            hit = [DpVariant(None, False)]
            group = dp * cp
            if zero >= 2 and ep == 1 and cp == 1 and group > 1:
                per_node = max(1, self.gpn // (tp * cp)) if tp * cp < self.gpn else 1
                sizes = (self.shards_asked if self.shards_asked is not None
                         else [per_node * k for k in HSDP_NODES])
                hsdp = [DpVariant(s, False) for s in sorted(set(sizes)) if 2 <= s < group and group % s == 0]
                # asked sizes without 0 (plain sharding): HSDP alone where one of them applies
                plain = self.shards_asked is None or 0 in self.shards_asked or not hsdp
                hit = (hit if plain else []) + hsdp
            if zero == 3 and True in self.zeropps and group > 1 and tp * cp < self.gpn:
                hit.append(DpVariant(None, True))
            if self.zeropps == [True]:
                hit = [v for v in hit if v.zeropp] or hit
            self._variants[key] = hit
        return hit

    def dp_overlap_choices(self, dp: int, cp: int) -> list[bool | None]:
        """DP overlap on / off, or None (nothing to overlap) without data parallelism."""
        return self.dp_overlaps if dp * cp > 1 else [None]

    def leaves_per_point(self, tp: int, cp: int, dp: int, pp: int, ep: int, sp: bool, recompute: str,
                         zeros: list[int]) -> int:
        """Plans one classic point (zero excluded) stands for across every wider dimension."""
        per_zero = sum(len(self.dp_variants(z, tp, dp, ep, cp)) for z in zeros)
        return (len(self.orders(tp, cp, dp, pp)) * len(self.tp_overlaps(tp, sp)) * len(self.activation_offloads(recompute))
                * per_zero * len(self.opts) * len(self.dp_overlap_choices(dp, cp)))
