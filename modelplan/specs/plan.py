"""A parallel plan: how one training step is split over dp x pp x tp (x cp, ep) ranks.

A plan is what the planner outputs and what a user may write by hand; its validity against a
model and a training spec is checked in `modelplan.plan.validate` (one place, every number in
the message).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from modelplan.specs.base import Spec

TpOverlap = Literal["none", "ring", "userbuffers"]
"""How TP collectives overlap the GEMMs (`modelplan.comm.tp_overlap`)."""


class Schedule(StrEnum):
    """Pipeline schedules, the one place their names are spelled. Each has one module of the same
    name under `modelplan.plan.pipeline` (its action lists, stage layout and validity rule)."""

    GPIPE = "gpipe"
    """All forwards, then all backwards (Huang et al. 2019)."""
    ONE_F_ONE_B = "1f1b"
    """PipeDream-Flush: warmup forwards, then one forward one backward (Narayanan et al. 2021)."""
    INTERLEAVED = "interleaved"
    """Interleaved 1F1B over vpp model chunks per rank (Narayanan et al. 2021, sec. 2.2.2)."""
    ZB_H1 = "zb-h1"
    """1F1B with the backward split into B (input) and W (weights), W delayed to fill the bubble
    (Qi et al. 2024, Zero Bubble Pipeline Parallelism, sec. 2.1)."""
    ZB_V = "zb-v"
    """Zero bubble on two chunks per rank in a V (stage r and 2 pp - 1 - r), B and W split
    (Qi et al. 2024, sec. 6)."""
    DUALPIPE = "dualpipe"
    """Bidirectional: half the micro-batches from each end, two copies of every stage per rank
    pair (DeepSeek-V3 technical report, sec. 3.2.1)."""


class Plan(Spec):
    """Parallel degrees and the per-step settings that go with them (Megatron-LM vocabulary)."""

    dp: int = Field(1, gt=0)
    """Data-parallel size (replicas; with zero>=1 also the sharding degree)."""
    tp: int = Field(1, gt=0)
    """Tensor-parallel size (Megatron column/row split inside each layer)."""
    pp: int = Field(1, gt=0)
    """Pipeline-parallel size (stages)."""
    vpp: int = Field(1, gt=0)
    """Virtual pipeline stages (model chunks) per pipeline rank; > 1 only with 'interleaved'."""
    cp: int = Field(1, gt=0)
    """Context-parallel size (sequence split for attention)."""
    ep: int = Field(1, gt=0)
    """Expert-parallel size (MoE experts split over this many data-parallel ranks)."""
    micro_batch: int = Field(1, gt=0)
    """Sequences per micro-batch per data-parallel rank."""
    schedule: Schedule = Schedule.ONE_F_ONE_B
    """Pipeline schedule (`Schedule`: gpipe, 1f1b, interleaved, ...)."""
    sequence_parallel: bool = False
    """Megatron sequence parallelism: norms/dropout sharded over tp, AllReduce -> RS + AG."""
    recompute: Literal["none", "selective", "full"] | None = None
    """Activation recompute; None means the training spec's setting."""
    zero: Literal[0, 1, 2, 3] = 0
    """ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also weights (FSDP)."""
    scatter_gather: bool = True
    """Megatron's pipeline scatter/gather (Narayanan et al. 2021, sec. 4.1; on by default,
    --no-scatter-gather-tensors-in-pipeline turns it off): every TP rank of a stage holds the same
    boundary tensor, so each sends only its 1/tp chunk to the next stage, which all-gathers the
    chunks over TP. Applies only with tp > 1 and without sequence parallelism (then the tensors
    are already sequence shards, different on every TP rank, and Megatron skips it); see
    `pipeline_scatter_gather`."""

    reshard_after_forward: bool | Literal["default"] = "default"
    """ZeRO-3 / FSDP: free each unit's gathered parameters after its forward and gather them again
    in backward (True, FSDP2's ZeRO-3), or keep them until the unit's backward (False, ZeRO-2-like
    memory for parameters); 'default': the engine's rule (torchtitan: True, False under pipeline
    parallelism, where the stage keeps them across micro-batches)."""
    fsdp_shard_size: int | None = Field(None, gt=0)
    """HSDP: shard ZeRO-3 states over groups of this many data-parallel ranks (8: one node) and
    replicate across the groups (gradients all-reduced between replicas); None: shard over all
    dp * cp ranks."""
    etp: int | None = Field(None, gt=0)
    """Expert tensor-parallel size (Megatron-core `--expert-tensor-parallel-size`): experts split
    over etp ranks and the expert-parallel group folded over the tp x dp ranks; None: tp."""
    tp_overlap: TpOverlap | None = None
    """TP collectives overlapped with the GEMMs beside them (`modelplan.comm.tp_overlap`): 'ring'
    (torchtitan async TP; TE ring_exchange everywhere), 'userbuffers' (Megatron --tp-comm-overlap
    with Transformer Engine's default ring / pipelined / bulk map, 16 SMs taken by pipelined and
    bulk collectives), 'none'; None: the engine's setting (`TrainingSpec.tp_comm_overlap`).
    Needs sequence parallelism."""
    dp_overlap: bool | None = None
    """Data-parallel traffic overlapped with compute (Megatron --overlap-grad-reduce and
    --overlap-param-gather, FSDP prefetch; the last gradient bucket and the first parameter
    bucket stay exposed, `modelplan.comm.dp_overlap`); None: the cost model's setting."""
    offload_optimizer: Literal["none", "cpu", "nvme"] = "none"
    """ZeRO-Offload (cpu) / ZeRO-Infinity (nvme): fp32 master weights and optimizer states off the
    GPU, the step on the host CPU (`modelplan.comm.offload`); needs the cluster's [host] table."""
    offload_activations: bool = False
    """Saved activations of all but two blocks of a stage moved to host memory after their
    forward and back before their backward (Megatron-core --cpu-offloading)."""
    rank_order: str = "tp-cp-dp-pp"
    """Rank order, fastest axis first (Megatron-LM's order string; 'tp-cp-pp-dp' is Megatron's
    --use-tp-pp-dp-mapping): which axes share a node's NVLink (`modelplan.plan.placement`)."""
    zeropp: bool = False
    """ZeRO++ (Wang et al. 2023) on ZeRO-3: int8 weight gathers (qwZ), a secondary weight shard
    inside the node for the backward gather (hpZ), int4 gradient all-to-all (qgZ)
    (`modelplan.comm.hierarchy`)."""
    first_stage_layers: int | None = Field(None, gt=0)
    """Blocks of the first virtual pipeline stage, the one that also runs the embedding
    (Megatron-LM `--decoder-first-pipeline-num-layers` at vpp 1; Megatron's figure counts the first
    rank's vpp chunks together, megatron/core/transformer/transformer_block.py
    get_num_layers_to_build, so it is vpp x this one); None: the planner's split
    (`plan.stages.split_layers`, searched by `modelplan plan`)."""
    last_stage_layers: int | None = Field(None, gt=0)
    """Blocks of the last virtual pipeline stage, the one that also runs the output layer and the
    loss (`--decoder-last-pipeline-num-layers`); None: the planner's split."""

    @model_validator(mode="after")
    def _check(self) -> "Plan":
        if self.vpp > 1 and self.schedule is not Schedule.INTERLEAVED:
            raise ValueError(f"vpp ({self.vpp}) > 1 needs schedule 'interleaved', not '{self.schedule}'")
        if self.schedule is Schedule.INTERLEAVED and self.pp == 1:
            raise ValueError("schedule 'interleaved' needs pp > 1")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence_parallel needs tp > 1")
        if self.etp is None and self.dp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide dp ({self.dp})")
        if self.etp is not None and (self.tp * self.dp * self.cp) % (self.ep * self.etp):
            raise ValueError(f"ep * etp ({self.ep} * {self.etp}) must divide tp * dp * cp "
                             f"({self.tp} * {self.dp} * {self.cp})")
        if self.fsdp_shard_size is not None and (self.dp * self.cp) % self.fsdp_shard_size:
            raise ValueError(f"fsdp_shard_size ({self.fsdp_shard_size}) must divide dp * cp ({self.dp} * {self.cp})")
        if self.tp_overlap not in (None, "none") and not self.sequence_parallel:
            raise ValueError(f"tp_overlap '{self.tp_overlap}' needs sequence_parallel (Megatron --tp-comm-overlap and "
                             "async TP overlap its AllGather / ReduceScatter)")
        if self.zeropp and self.zero != 3:
            raise ValueError(f"zeropp needs zero 3 (got zero {self.zero})")
        if sorted(self.rank_order.split("-")) != ["cp", "dp", "pp", "tp"]:
            raise ValueError(f"rank_order '{self.rank_order}' must name each of tp, cp, dp, pp once (e.g. tp-cp-dp-pp)")
        return self

    @property
    def stage_split(self) -> tuple[int | None, int | None] | None:
        """(first, last) stage blocks the plan fixes (`plan.stages.split_layers`), or None."""
        if self.first_stage_layers is None and self.last_stage_layers is None:
            return None
        return (self.first_stage_layers, self.last_stage_layers)

    @property
    def world_size(self) -> int:
        """Ranks the plan needs: dp * tp * pp * cp (ep lives inside dp)."""
        return self.dp * self.tp * self.pp * self.cp

    def pipeline_scatter_gather(self, numel: int) -> bool:
        """Whether a stage-boundary tensor of `numel` elements travels as 1/tp chunks plus a TP
        AllGather: `scatter_gather`, tp > 1, no sequence parallelism, and tp dividing the tensor
        (Megatron-LM p2p_communication._communicate falls back to whole tensors otherwise). The
        executor and the communication list both ask this one rule."""
        return pipeline_scatter_gather(self.scatter_gather, self.tp, self.sequence_parallel, numel)

    def num_microbatches(self, global_batch: int) -> int:
        """Micro-batches per pipeline per step: global_batch / (micro_batch * dp)."""
        per_step = self.micro_batch * self.dp
        if global_batch % per_step:
            raise ValueError(
                f"global_batch ({global_batch}) must be divisible by micro_batch * dp "
                f"({self.micro_batch} * {self.dp} = {per_step})"
            )
        return global_batch // per_step


def pipeline_scatter_gather(scatter_gather: bool, tp: int, sequence_parallel: bool, numel: int) -> bool:
    """`Plan.pipeline_scatter_gather` for the bare fields (the planner's hot path)."""
    return scatter_gather and tp > 1 and not sequence_parallel and numel % tp == 0
