"""Context parallelism in the executor: each rank of a cp group holds one contiguous 1/cp slice
of every sequence (positions [cp_rank * s/cp, (cp_rank + 1) * s/cp)) and every layer but
attention works on its slice alone. Attention exchanges keys and values as the plan's
`cp_comm_type` says; executed: 'all_gather' (Transformer Engine `AttnFuncWithCPAndKVAllGather`,
Llama 3 sec. 3.3.2): one AllGather of this rank's K, V (after rotary, before the GQA repeat) in
forward, again in backward (only the local K, V are kept for it), and one ReduceScatter of the
whole sequence's dK, dV. The queries' positions start at `offset` (rotary, causal mask, learned
positions). TE splits each sequence in 2 cp chunks for load balance; the contiguous split here
computes the same values, only the per-rank work differs.

The loss each rank computes is the mean over its own tokens; with equal shares the mean over
the dp x cp ranks of those means is the batch mean, so the gradients are averaged over the dp x
cp group (Megatron's data-parallel group with context parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelplan.comm.regions import Region
from modelplan.execute.mappings import GroupMember

EXECUTED_CP_TYPES = ("all_gather",)
SEQ_AXIS = 3  # of the stacked (2, b, kv_heads, s, d) K, V


@dataclass(frozen=True)
class ContextParallel(GroupMember):
    """This rank's context-parallel group (`size` cp, `rank` cp_rank)."""

    def offset(self, seq_local: int) -> int:
        """Position of this rank's first token."""
        return self.rank * seq_local

    def gather_kv(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The whole sequence's K, V from every rank's (b, kv_heads, s/cp, d) slice: one AllGather."""
        kv = self.comm.all_gather(np.stack([k, v]), self.group, axis=SEQ_AXIS, label=Region.CP_KV)  # (2, b, KV, s, d)
        return kv[0], kv[1]

    def scatter_dkv(self, dk: np.ndarray, dv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This rank's slice of the summed whole-sequence dK, dV: one ReduceScatter."""
        dkv = self.comm.reduce_scatter(np.stack([dk, dv]), self.group, axis=SEQ_AXIS, label=Region.CP_DKV)
        return dkv[0], dkv[1]
