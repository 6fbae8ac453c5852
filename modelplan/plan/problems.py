"""Why a plan is invalid: a reason (counted by the search) and a one-line message with every number."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    """Why a plan is rejected (the search counts rejections by these)."""

    WORLD_SIZE = "world size"
    CLUSTER_SIZE = "cluster size"
    TP_HEADS = "tp vs heads"
    TP_KV_HEADS = "tp vs kv_heads"
    TP_FFN = "tp vs ffn_hidden"
    TP_NODE = "tp across nodes"
    TP_SPLITS_NOTHING = "tp splits no layer"
    PP_LAYERS = "pp*vpp vs layers"
    PP_UNITS = "pp vs units"
    BATCH = "batch divisibility"
    INTERLEAVED = "interleaved needs m % pp == 0"
    INTERLEAVED_PP = "interleaved needs pp > 1"
    SCHEDULE = "pipeline schedule"
    SEQUENCE_PARALLEL = "sequence parallel needs tp > 1"
    CP_SEQ = "cp vs seq_len"
    CP_COMM = "cp_comm_type"
    EP = "expert parallel"
    NOT_FOR_FAMILY = "not for this model family"
    ENGINE = "not run by the engine"
    MEMORY = "out of memory"
    HOST_MEMORY = "offload exceeds host memory"


@dataclass(frozen=True)
class Problem:
    """One broken rule: its reason and a one-line message with every number."""

    reason: Reason
    message: str
