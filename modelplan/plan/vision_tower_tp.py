"""Tensor parallelism of a vision tower's blocks, by engine.

- Megatron-LM splits them over the language model's tp: examples/multimodal/model.py builds
  `vision_config = deepcopy(base_config)` (its tensor_model_parallel_size is the language model's
  unless a separate encoder pipeline stage sets --encoder-tensor-model-parallel-size) and turns off
  sequence_parallel, tp_comm_overlap and context parallelism for it; the ViT layers are column /
  row parallel (megatron/core/models/vision/vit_layer_specs.py: linear_qkv and linear_fc1
  ColumnParallel, linear_proj and linear_fc2 RowParallel). So each block's heads and MLP width are
  split over tp, with f / g around the attention and the MLP (Shoeybi et al. 2019 sec. 3: one
  AllReduce of the (images x tokens, h) activation after each row-parallel output in forward,
  one of its input gradient in backward), all exposed; the norms and their inputs stay whole.
- Replicated elsewhere: HF / FSDP / DeepSpeed / torchtitan run the transformers tower whole (it has
  no tp_plan), as Megatron-LM runs an `hf://` vision model (build_hf_model; model.py asserts
  --encoder-tensor-model-parallel-size < 2 for it). A tower whose heads or MLP width tp does not
  divide (Megatron's divide() refuses that split) and a layer-list tower (DaViT, Swin, SAM: no
  Megatron ViT) are priced that way too.
The projector (Megatron's MultimodalProjector, column then row parallel) stays priced whole: its
`count.vision` leaves are one GEMM each (`plan/vision_tower.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.blocks import Block
from modelplan.count.vision_step import tower_frozen
from modelplan.plan.parallel.tp import LOSS_VALUE_BYTES, tp_seconds

if TYPE_CHECKING:
    from modelplan.plan.commcost import CommPricer
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec

TOWER_BLOCK = Block("full_attention", False, False, False)
"""A tower block: bidirectional attention and a dense MLP (`vision_tower.tower_block_spec`)."""


def tower_tp(spec: "TransformerSpec", framework: str, tp: int) -> int:
    """TP ranks the tower's blocks are split over: tp under Megatron for a uniform ViT whose heads
    and MLP width tp divides, else 1 (replicated; module docstring)."""
    v = getattr(spec, "vision", None)
    if v is None or tp == 1 or framework != "megatron" or v.tower is not None or v.layers == 0:
        return 1
    kv = v.kv_heads or v.heads
    return tp if v.heads % tp == 0 and kv % tp == 0 and v.ffn_hidden % tp == 0 else 1


def tower_activation_saving(spec: "TransformerSpec", dtype_bytes: int, images: int, tp: int) -> int:
    """Bytes the tower's blocks do not keep on one rank under a `tp` split (Korthikanti et al. 2022
    sec. 4.2.1 without sequence parallelism: of `count.vision.vision_activation_bytes`' per-token
    terms, Q, K, V, the output-projection input, the MLP's inner tensors and the fused kernel's fp32
    log-sum-exp are split, the norms' inputs and outputs, 4h, stay whole)."""
    if tp == 1 or images == 0:
        return 0
    v, d = spec.vision, dtype_bytes
    inner = 3 if v.gated_mlp else 2
    split = d * (4 * v.hidden + inner * v.ffn_hidden) + 4 * v.heads  # per token, whole model
    return images * v.layers * v.tokens * (split - split // tp)


def tower_tp_seconds(spec: "TransformerSpec", training: "TrainingSpec", pricer: "CommPricer", shape, tp: int,
                     images: int) -> float:
    """Exposed seconds of the split tower's f / g AllReduces on one micro-batch of `images` images:
    `vision.layers` attention + MLP blocks of (images x tokens, h) activations (`parallel/tp.py`
    `tp_seconds`, no sequence parallelism), forward and backward (a frozen tower: the forward's only)."""
    if tp == 1 or images == 0:
        return 0.0
    v = spec.vision
    tokens = images * v.tokens
    block = tp_seconds(pricer, shape, tp, False, tokens * v.hidden * training.dtype_bytes, tokens, LOSS_VALUE_BYTES)
    per_block = block.block_s / 2 if tower_frozen(training) else block.block_s  # forward half only
    return v.layers * per_block
