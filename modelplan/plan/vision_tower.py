"""A vision tower's time and activations on the first pipeline stage, per micro-batch.

The tower and its projector are the `vision` unit of the first stage (`plan/stages.py`: before the
embedding, as Megatron-core's LLaVAModel runs its vision model on the first pipeline stage). Each
micro-batch of b sequences sends b x images_per_seq images through it (`count.vision_step`):

- compute: the tower's matmuls per image (`count.vision.vision_forward_flops`) at the roofline's
  GEMM rate, its attention scores (QK^T, AV) at the fused-attention rates of the text blocks
  (flash / sdpa; eager: GEMMs), one kernel overhead per matmul and block; a trained tower's
  backward is the dgrad + wgrad pair of every GEMM (2 x forward) and the fused kernel's backward
  (2.5 x its forward, FlashAttention-2 sec. 4.1); a frozen tower runs forward only
  (`count.vision_step`). Norms and activations are not priced (below the matmuls' time for the
  towers of transformers' VLMs: O(t h) against O(t h^2) per block).
- tensor parallelism: the tower is replicated over tp: each TP rank of the first stage runs it on
  the micro-batch's images, as its parameters are held whole (`plan/shard.py`), as HF / FSDP /
  DeepSpeed run the transformers module (whose tower has no tp_plan). Megatron-LM's
  examples/multimodal/model.py builds the vision config as a deepcopy of the language model's, so
  it inherits tensor_model_parallel_size (with sequence_parallel, tp_comm_overlap off): that split
  is not modelled (the tower's time under Megatron at tp > 1 is an upper bound).
- recompute: full re-runs the tower blocks' forward, selective their attention core, as the plan
  does for the text blocks (`count.vision_step.tower_recompute_flops`; transformers'
  `gradient_checkpointing_enable` sets every submodule's `gradient_checkpointing`, the vision
  encoder's too), except on Megatron: Megatron-LM's examples/multimodal/model.py clears the vision
  config's recompute_granularity / method unless `--recompute-vision` ("Toggle --recompute* for
  the vision and language model separately"), so there the tower keeps everything, recomputes
  nothing;
- memory: the tower's activations per in-flight micro-batch join the first stage's
  (`count.vision_step.tower_activation_bytes`).

The tower's parameters are in the data-parallel gradient reduction as the `vision` unit
(`plan/shard.py` `unit_shards`), so its DP traffic is already priced; a frozen tower under an
adapter fine-tune reduces nothing (`plan/finetune.py`: adapters only).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from modelplan.count.vision import vision_forward_flops
from modelplan.count.vision_step import (images_per_sequence, tower_activation_bytes, tower_frozen, tower_recompute,
                                        tower_recompute_flops)
from modelplan.plan.compute import kernel_head_dim

if TYPE_CHECKING:
    from modelplan.plan.compute import Roofline
    from modelplan.plan.stage_time import BlockTerms
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec

SCORE = "tower/layers/attention/score"
FLASH_BWD_FACTOR = 2.5
"""Fused attention backward FLOPs per forward FLOP: recomputed Q K^T plus dV, dP, dQ, dK
(FlashAttention-2, Dao 2023, sec. 4.1; `count.attention.FusedAttention.bwd_flops`)."""


def tower_seconds(spec: "TransformerSpec", training: "TrainingSpec", roofline: "Roofline", micro_batch: int,
                  recompute: str) -> tuple[float, float]:
    """(forward, backward incl. recompute) seconds of the tower on one micro-batch's images on one
    rank of the first stage (module docstring); (0, 0) without images."""
    vision = spec.vision
    images = micro_batch * images_per_sequence(spec, training)
    if vision is None or images == 0:
        return 0.0, 0.0
    flops = vision_forward_flops(vision, spec.hidden)
    fused = training.attention != "eager"
    head_dim = vision.hidden // vision.heads
    tiles = kernel_head_dim(roofline.attention_kernel, head_dim) / head_dim  # the kernel's compiled head dim
    kernels = {key: vision.layers if key.startswith("tower/layers/") else 1 for key, v in flops.items() if v}
    if fused:
        kernels[SCORE] = vision.layers  # one fused call per block
    overhead_s = roofline.overhead_s * sum(kernels.values())
    score = images * flops.get(SCORE, 0)
    gemm = images * sum(flops.values()) - (score if fused else 0)
    score_fwd_s = score * tiles / roofline.flash_fwd_flops_per_s if fused else 0.0
    fwd_s = overhead_s + gemm / roofline.matmul_flops_per_s + score_fwd_s
    if tower_frozen(training):
        return fwd_s, 0.0
    bwd_s = 2 * overhead_s + 2 * gemm / roofline.matmul_flops_per_s  # dgrad + wgrad of every GEMM
    if fused:
        bwd_s += FLASH_BWD_FACTOR * score * tiles / roofline.flash_bwd_flops_per_s
    rerun = images * tower_recompute_flops(flops, recompute)
    if recompute == "full":  # the blocks' forward again, their scores in the fused kernel
        layers = rerun - (score if fused else 0)
        block_kernels = sum(n for key, n in kernels.items() if key.startswith("tower/layers/"))
        bwd_s += layers / roofline.matmul_flops_per_s + score_fwd_s + roofline.overhead_s * block_kernels
    elif recompute == "selective":
        bwd_s += score_fwd_s if fused else rerun / roofline.matmul_flops_per_s
    return fwd_s, bwd_s


def with_vision_tower(terms: "BlockTerms", spec: "TransformerSpec", training: "TrainingSpec",
                      roofline: "Roofline", micro_batch: int, recompute: str, framework: str) -> "BlockTerms":
    """`terms` with the tower's seconds in the first stage's embedding kernels (forward, and the
    backward with its recompute) and its activations in the first stage's bytes per micro-batch."""
    if getattr(spec, "vision", None) is None:
        return terms
    recompute = tower_recompute(recompute, framework)
    fwd_s, bwd_s = tower_seconds(spec, training, roofline, micro_batch, recompute)
    images = micro_batch * images_per_sequence(spec, training)
    k = terms.kernels
    kernels = k._replace(embedding_fwd_s=k.embedding_fwd_s + fwd_s, embedding_bwd_s=k.embedding_bwd_s + bwd_s)
    kept = tower_activation_bytes(spec, training, images, recompute)
    return replace(terms, kernels=kernels, embedding_activation_bytes=terms.embedding_activation_bytes + kept)
