"""The vocabulary shared by the cost model, the communication list and the executor's ledger."""

from __future__ import annotations

from enum import StrEnum


class Collective(StrEnum):
    """Communication operations (names as in NCCL / torch.distributed)."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"
    BARRIER = "barrier"


class Axis(StrEnum):
    """Process-group axes of the rank grid (torchtitan's word 'axis', never 'dim')."""

    TP = "tp"
    CP = "cp"
    DP = "dp"
    PP = "pp"
    EP = "ep"
    WORLD = "world"
