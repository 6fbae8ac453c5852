"""Context parallelism in the executor: each rank of a cp group holds one contiguous 1/cp slice
of every sequence (positions [cp_rank * s/cp, (cp_rank + 1) * s/cp)) and every layer but
attention works on its slice alone. Attention exchanges keys and values as the plan's
`cp_comm_type` says (`kind`), all three executed:

- 'all_gather' (Transformer Engine `AttnFuncWithCPAndKVAllGather`, Llama 3 sec. 3.3.2): one
  AllGather of this rank's K, V (after rotary, before the GQA repeat) in forward, again in
  backward (only the local K, V are kept for it), and one ReduceScatter of the whole sequence's
  dK, dV.
- 'p2p' (ring attention, Liu et al. 2023; TE `AttnFuncWithCPAndKVP2P`,
  torch.distributed.tensor.experimental._attention's ring): the K, V block travels the ring in
  cp - 1 send/recv steps, each step's partial output merged by log-sum-exp
  (`layers/ring_attention.py`); backward passes the K, V round again and the dK, dV accumulator
  of each block after it, cp - 1 sends each (`send_kv`, `send_dkv`).
- 'a2a' (DeepSpeed-Ulysses, Jacobs et al. 2023, arXiv 2309.14509): an AllToAll of each of Q, K,
  V from sequence shards to head shards before attention, and of the output back after;
  backward the same on dO and on dQ, dK, dV (`seq_to_heads`, `heads_to_seq`).

The queries' positions start at `offset` (rotary, causal mask, learned positions). TE and
PyTorch split each sequence in 2 cp chunks for load balance (rank i holds chunks i and
2cp-1-i); the contiguous split here computes the same values and moves the same bytes (every
ring step passes the whole block either way), only the per-rank work differs.

The loss each rank computes is the mean over its own tokens; with equal shares the mean over
the dp x cp ranks of those means is the batch mean, so the gradients are averaged over the dp x
cp group (Megatron's data-parallel group with context parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelplan.comm.regions import Region
from modelplan.execute.mappings import GroupMember
from modelplan.specs.load import load_engine
from modelplan.specs.training import TrainingSpec

EXECUTED_CP_TYPES = ("p2p", "all_gather", "a2a")
SEQ_AXIS = 3  # of the stacked (2, b, kv_heads, s, d) K, V
HEAD_DIM_AXIS, SEQ_DIM_AXIS = 1, 2  # of a (b, heads, s, d) tensor


def cp_comm_type(training: TrainingSpec) -> str:
    """The run's cp_comm_type, else its engine's (`EngineProfile.cp_comm_type`)."""
    return training.cp_comm_type or load_engine(training.framework).cp_comm_type


@dataclass(frozen=True)
class ContextParallel(GroupMember):
    """This rank's context-parallel group (`size` cp, `rank` cp_rank) and its exchange."""

    kind: str = "all_gather"
    """The plan's cp_comm_type: p2p | all_gather | a2a."""

    def offset(self, seq_local: int) -> int:
        """Position of this rank's first token."""
        return self.rank * seq_local

    # -- all_gather --------------------------------------------------------------------------
    def gather_kv(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The whole sequence's K, V from every rank's (b, kv_heads, s/cp, d) slice: one AllGather."""
        kv = self.comm.all_gather(np.stack([k, v]), self.group, axis=SEQ_AXIS, label=Region.CP_KV)  # (2, b, KV, s, d)
        return kv[0], kv[1]

    def scatter_dkv(self, dk: np.ndarray, dv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This rank's slice of the summed whole-sequence dK, dV: one ReduceScatter."""
        dkv = self.comm.reduce_scatter(np.stack([dk, dv]), self.group, axis=SEQ_AXIS, label=Region.CP_DKV)
        return dkv[0], dkv[1]

    # -- p2p ring ----------------------------------------------------------------------------
    @property
    def next_rank(self) -> int:
        """Global rank the ring sends to (cp_rank + 1)."""
        return self.group.ranks[(self.rank + 1) % self.size]

    @property
    def prev_rank(self) -> int:
        """Global rank the ring receives from (cp_rank - 1)."""
        return self.group.ranks[(self.rank - 1) % self.size]

    def send_kv(self, kv: np.ndarray) -> None:
        """The (2, b, KV, s/cp, d) K, V block this rank holds, to the next ring rank (TE: one
        send_recv of the KV buffer per step, `flash_attn_p2p_communicate`)."""
        self.comm.send(kv, self.next_rank, self.group, label=Region.CP_KV)

    def recv_kv(self) -> np.ndarray:
        return self.comm.recv(self.prev_rank, self.group, label=Region.CP_KV)

    def send_dkv(self, dkv: np.ndarray) -> None:
        """A block's dK, dV accumulator, to the next ring rank (TE backward: one per step after
        the first, in the K, V dtype)."""
        self.comm.send(dkv, self.next_rank, self.group, label=Region.CP_DKV)

    def recv_dkv(self) -> np.ndarray:
        return self.comm.recv(self.prev_rank, self.group, label=Region.CP_DKV)

    # -- a2a (Ulysses) -----------------------------------------------------------------------
    def seq_to_heads(self, t: np.ndarray, label: str) -> np.ndarray:
        """(b, n, s/cp, d) -> (b, n/cp, s, d): head group j to rank j, every rank's sequence
        slice of this rank's heads back (one AllToAll; Ulysses' first all-to-all)."""
        chunks = np.split(t, self.size, axis=HEAD_DIM_AXIS)  # cp x (b, n/cp, s/cp, d)
        got = self.comm.all_to_all(chunks, self.group, label=label)
        return np.concatenate(got, axis=SEQ_DIM_AXIS)  # cp x (b, n/cp, s/cp, d) -> (b, n/cp, s, d)

    def heads_to_seq(self, t: np.ndarray, label: str) -> np.ndarray:
        """(b, n/cp, s, d) -> (b, n, s/cp, d): the inverse AllToAll (Ulysses' second)."""
        chunks = np.split(t, self.size, axis=SEQ_DIM_AXIS)  # cp x (b, n/cp, s/cp, d)
        got = self.comm.all_to_all(chunks, self.group, label=label)
        return np.concatenate(got, axis=HEAD_DIM_AXIS)  # cp x (b, n/cp, s/cp, d) -> (b, n, s/cp, d)

    def local_heads(self, n: int) -> slice:
        """This rank's heads of n (a2a: contiguous groups of n/cp)."""
        per = n // self.size
        return slice(self.rank * per, (self.rank + 1) * per)
