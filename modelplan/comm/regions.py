"""The names of the communication regions of a training step, spelled once: the communication
list (`modelplan.plan`) files its calls under them and the executor labels the same calls in its
ledger (`modelplan.execute`), so the two are compared name by name. Megatron-LM's region names
(`tensor_parallel/mappings.py`): a tensor-parallel region is entered through f and left through g
around each sub-layer; the other axes name what they move."""

from __future__ import annotations

from enum import StrEnum


class Region(StrEnum):
    """Where in the step a call is made (the ledger's label)."""

    TP_ATTENTION_IN = "tp/attention/in"
    """f before the column-parallel QKV projection."""
    TP_ATTENTION_OUT = "tp/attention/out"
    """g after the row-parallel output projection."""
    TP_MLP_IN = "tp/mlp/in"
    TP_MLP_OUT = "tp/mlp/out"
    TP_EMBEDDING = "tp/embedding"
    """g after the vocab-parallel embedding."""
    TP_LM_HEAD_IN = "tp/lm-head/in"
    """f before the vocab-parallel output head."""
    TP_CROSS_ENTROPY_MAX = "tp/cross-entropy/max"
    TP_CROSS_ENTROPY_TARGET = "tp/cross-entropy/target"
    TP_CROSS_ENTROPY_SUM = "tp/cross-entropy/sum"
    TP_PARTIAL_GRADS = "tp/partial-grads"
    """AllReduce of gradients that are partial sums over tp (sequence parallelism, MoE router)."""
    EP_DISPATCH = "ep/dispatch"
    EP_COMBINE = "ep/combine"
    CP_KV = "cp/attention/kv"
    CP_DKV = "cp/attention/dkv"
    PP_FORWARD = "pp/forward"
    PP_BACKWARD = "pp/backward"
    PP_FORWARD_GATHER = "pp/forward/gather"
    PP_BACKWARD_GATHER = "pp/backward/gather"
    PP_TIED_EMBEDDING = "pp/tied-embedding-grads"
    PP_REPLICA = "pp/replica-grads"
    """AllReduce of a unit's gradient between the pipeline ranks holding a copy (DualPipe)."""
    DP_BROADCAST = "dp/broadcast"
    DP_GRADS = "dp/grads"
    DP_PARAMS = "dp/params"
    WORLD_START = "world/start"
