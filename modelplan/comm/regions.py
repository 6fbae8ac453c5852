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
    TP_MAMBA_IN = "tp/mamba/in"
    """f before the Mamba mixer's column-parallel in_proj (d_inner split over tp)."""
    TP_MAMBA_OUT = "tp/mamba/out"
    """g after its row-parallel out_proj."""
    TP_MAMBA_X_PROJ = "tp/mamba/x_proj"
    """AllReduce of x_proj's output (dt, B, C of all channels) in forward, of its gradient in backward."""
    TP_CROSS_ATTENTION_IN = "tp/cross_attention/in"
    TP_CROSS_ATTENTION_OUT = "tp/cross_attention/out"
    TP_Q_NORM_STATS = "tp/attention/q_norm/stats"
    """AllReduce of a q norm's per-token statistics over all heads (OLMo 2) in forward."""
    TP_Q_NORM_GRAD_STATS = "tp/attention/q_norm/grad-stats"
    TP_K_NORM_STATS = "tp/attention/k_norm/stats"
    TP_K_NORM_GRAD_STATS = "tp/attention/k_norm/grad-stats"
    TP_MTP_EMBEDDING = "tp/mtp/embedding"
    """g after the multi-token-prediction modules' vocab-parallel embedding lookups (last stage)."""
    TP_EMBEDDING = "tp/embedding"
    """g after the vocab-parallel embedding."""
    TP_LM_HEAD_IN = "tp/lm-head/in"
    """f before the vocab-parallel output head."""
    TP_CROSS_ENTROPY_MAX = "tp/cross-entropy/max"
    TP_CROSS_ENTROPY_TARGET = "tp/cross-entropy/target"
    TP_CROSS_ENTROPY_SUM = "tp/cross-entropy/sum"
    TP_PARTIAL_GRADS = "tp/partial-grads"
    """AllReduce of gradients that are partial sums over tp (sequence parallelism, MoE router)."""
    TP_EXPERTS_IN = "tp/experts/in"
    """AllGather over tp of the expert buffer an MoE rank received (sequence-parallel dispatch,
    `plan/parallel/ep.py`); its backward a ReduceScatter."""
    TP_EXPERTS_OUT = "tp/experts/out"
    """ReduceScatter over tp of the experts' partial outputs before the combine; backward an AllGather."""
    EP_DISPATCH = "ep/dispatch"
    EP_COMBINE = "ep/combine"
    CP_KV = "cp/attention/kv"
    CP_DKV = "cp/attention/dkv"
    CP_QKV = "cp/attention/qkv"
    """Ulysses (a2a) AllToAll of Q, K, V."""
    CP_OUT = "cp/attention/out"
    """Ulysses (a2a) AllToAll of the attention output (and of its gradient)."""
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


SUBLAYER_REGIONS: dict[str, tuple[Region, Region]] = {
    "attention": (Region.TP_ATTENTION_IN, Region.TP_ATTENTION_OUT),
    "mamba": (Region.TP_MAMBA_IN, Region.TP_MAMBA_OUT),
    "cross_attention": (Region.TP_CROSS_ATTENTION_IN, Region.TP_CROSS_ATTENTION_OUT),
    "mlp": (Region.TP_MLP_IN, Region.TP_MLP_OUT),
}
"""(f, g) regions around each kind of block sub-layer."""
