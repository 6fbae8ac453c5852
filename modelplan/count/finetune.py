"""Memory of one fine-tuning replica: frozen base, adapter states, activations.

Full fine-tuning is `count_memory` (every parameter has gradients and optimizer states). LoRA and
QLoRA (Hu et al. 2021; Dettmers et al. 2023) freeze the base: its weights are kept at the
training precision (lora) or quantized (qlora: `modelplan.count.quant`) and have no gradients or
optimizer states; only the adapters do:
    adapter weights    trainable x adapter_bytes (fp32: PEFT's autocast; bf16: qlora.py)
    adapter gradients  the same
    optimizer states   trainable x 4 x states (fp32 Adam m and v: 8 B; QLoRA's paged_adamw_32bit)
Activations are the training activation model of `count.memory` (Korthikanti et al. 2022) for one
micro-batch, the same as full training: autograd still back-propagates through every frozen
layer to reach the adapters below it. Under full recompute (gradient checkpointing, as QLoRA
trains) it adds one block's full activations, the block being recomputed (the planner's working
set). Each adapter adds its r-wide lora_A output per token, and with lora_dropout > 0 the
dropped copy of its input and the 1-byte mask.

The terms are split by what a parallel plan does to them (phase 2: DP/FSDP shard the adapter
states, TP/PP split the frozen base and the activations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.linears import linear_modules
from modelplan.count.lora import LoraCount, count_lora, matched_modules
from modelplan.count.memory import (
    FP32_BYTES,
    activation_bytes_per_layer,
    embedding_activation_bytes,
    output_activation_bytes,
)
from modelplan.count.params import count_params
from modelplan.count.quant import weights_bytes
from modelplan.count.result import Result

if TYPE_CHECKING:
    from modelplan.specs.finetune import FinetuneSpec
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec


class FinetuneMemory(Result):
    """Bytes of one unsharded fine-tuning replica, by what holds them."""

    frozen_weights_bytes: int
    """Base model weights that do not train (quantized for qlora; 0 for full fine-tuning)."""
    trainable_weights_bytes: int
    """Weights that train: the adapters (lora/qlora) or the whole model (full)."""
    gradients_bytes: int
    """Gradients of the trainable weights."""
    optimizer_states_bytes: int
    """Optimizer states (and fp32 master weights for full mixed-precision training)."""
    activations_bytes: int
    """Activations of one micro-batch kept for backward, plus the recompute working set."""

    @property
    def total_bytes(self) -> int:
        """Everything above."""
        return (self.frozen_weights_bytes + self.trainable_weights_bytes + self.gradients_bytes
                + self.optimizer_states_bytes + self.activations_bytes)


class FinetuneCount(Result):
    """Trainable parameters and memory of a fine-tuning setup."""

    method: str
    frozen_format: str
    """How the frozen base is stored: training (the compute dtype), nf4 or int8."""
    trainable_params: int
    all_params: int
    """PEFT's 'all params': base plus adapters."""
    lora: LoraCount | None
    memory: FinetuneMemory


def adapter_activation_bytes_per_layer(spec: "TransformerSpec", finetune: "FinetuneSpec", lora: LoraCount,
                                       micro_batch: int, seq_len: int, dtype_bytes: int) -> int:
    """Bytes the adapters of one block keep per micro-batch: lora_A's r-wide output (lora_B's
    input) per adapted module, and with dropout the dropped input (dtype) and its 1-byte mask."""
    tokens = micro_batch * seq_len
    per_token = 0
    modules = matched_modules(linear_modules(spec, lora.layout), tuple(lora.targets))  # type: ignore[arg-type]
    for m in modules:
        if not m.in_block:
            continue
        share = m.count / spec.layers  # modules of this path per block (MoE paths never adapted)
        kept = lora.rank * dtype_bytes + ((dtype_bytes + 1) * m.in_features if finetune.lora_dropout > 0 else 0)
        per_token += share * kept
    return round(per_token * tokens)


def _activations(spec: "TransformerSpec", training: "TrainingSpec", micro_batch: int, extra_per_layer: int) -> int:
    """count.memory's activations of one micro-batch, plus the recompute working set and adapters."""
    s, d = training.seq_len, training.dtype_bytes
    per_layer = [activation_bytes_per_layer(spec, micro_batch, s, d, recompute=training.recompute, layer_index=i,
                                            attention=training.attention) for i in range(spec.layers)]
    working = 0
    if training.recompute == "full":  # the block being recomputed keeps all its activations
        working = activation_bytes_per_layer(spec, micro_batch, s, d, recompute="none", attention=training.attention)
        working += extra_per_layer
        extra_per_layer = 0  # recomputed blocks keep only their input until their backward
    return (embedding_activation_bytes(spec, micro_batch, s) + sum(per_layer) + spec.layers * extra_per_layer
            + working + output_activation_bytes(spec, micro_batch, s, d))


def count_finetune(spec: "TransformerSpec", training: "TrainingSpec", finetune: "FinetuneSpec",
                   micro_batch: int) -> FinetuneCount:
    """Trainable parameters (exact, PEFT's count) and memory of one fine-tuning replica."""
    total = count_params(spec).total
    d = training.dtype_bytes
    if not finetune.uses_adapters:
        from modelplan.count.memory import count_memory

        mem = count_memory(spec, training, micro_batch)
        memory = FinetuneMemory(
            frozen_weights_bytes=0, trainable_weights_bytes=mem.weights, gradients_bytes=mem.gradients,
            optimizer_states_bytes=mem.optimizer + mem.master_weights,
            activations_bytes=_activations(spec, training, micro_batch, 0),
        )
        return FinetuneCount(method="full", frozen_format="none", trainable_params=total, all_params=total,
                             lora=None, memory=memory)
    lora = count_lora(spec, finetune, total)
    fmt = finetune.frozen_format
    frozen = weights_bytes(total, linear_modules(spec, lora.layout), None if fmt == "training" else fmt,  # type: ignore[arg-type]
                           dtype_bytes=d, double_quant=finetune.double_quant)
    trainable = lora.trainable_params
    adapter_acts = adapter_activation_bytes_per_layer(spec, finetune, lora, micro_batch, training.seq_len, d)
    memory = FinetuneMemory(
        frozen_weights_bytes=frozen,
        trainable_weights_bytes=trainable * finetune.adapter_bytes,
        gradients_bytes=trainable * finetune.adapter_bytes,
        optimizer_states_bytes=trainable * FP32_BYTES * training.optimizer_states,
        activations_bytes=_activations(spec, training, micro_batch, adapter_acts),
    )
    return FinetuneCount(method=finetune.method, frozen_format=fmt, trainable_params=trainable,
                         all_params=lora.all_params, lora=lora, memory=memory)
