"""Fine-tuning settings: full, LoRA (Hu et al. 2021) or QLoRA (Dettmers et al. 2023).

Field names follow PEFT's `LoraConfig` (r, target_modules, lora_dropout) and transformers'
`BitsAndBytesConfig` (4-bit NF4 with double quantization, or 8-bit LLM.int8 frozen weights).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from modelplan.specs.base import Spec

FinetuneMethod = Literal["full", "lora", "qlora"]
BaseQuant = Literal["nf4", "int8"]
LayoutName = Literal["llama", "gpt2", "opt", "phi", "neox"]
"""The values of `modelplan.count.linears.Layout` (specs sit left of count, so spelled out here)."""
ALL_LINEAR = "all-linear"
"""PEFT's target_modules shortcut: every linear layer except the output layer."""


class FinetuneSpec(Spec):
    """What a fine-tuning step trains and how the frozen base is stored."""

    method: FinetuneMethod = "full"
    """full: every parameter trains (the training spec's model states); lora: low-rank adapters
    on a frozen base kept at the training precision; qlora: adapters on a quantized frozen base."""
    lora_rank: int = Field(8, gt=0)
    """LoRA rank r (PEFT LoraConfig.r, default 8): each adapted Linear(in, out) gains
    lora_A (in x r) and lora_B (r x out)."""
    lora_targets: tuple[str, ...] | None = None
    """Module names PEFT matches against the last part of each module's dotted name (q_proj,
    c_attn, ...), or ('all-linear',); None: PEFT's default for the layout (q_proj, v_proj for
    Llama-style models, c_attn for GPT-2, query_key_value for NeoX/Falcon/BLOOM)."""
    lora_layout: LayoutName | None = None
    """HF module naming of the model (see modelplan.count.linears); None: inferred from the
    target names and the spec (an ambiguity is an error that asks for it)."""
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    """PEFT lora_dropout (default 0): above 0 each adapter keeps a dropped copy of its input."""
    adapter_dtype: Literal["fp32", "bf16"] = "fp32"
    """Adapter weights' dtype: fp32 (PEFT's default autocast_adapter_dtype upcasts 16-bit
    adapters) or bf16 (the QLoRA paper's qlora.py casts LoRA layers to bf16)."""
    base_quant: BaseQuant | None = None
    """qlora only: nf4 (bitsandbytes 4-bit NormalFloat, block 64; default) or int8 (LLM.int8)."""
    double_quant: bool = True
    """nf4 only: quantize the fp32 block constants to 8 bits in blocks of 256 (QLoRA sec. 3)."""

    @model_validator(mode="after")
    def _check(self) -> "FinetuneSpec":
        if self.base_quant is not None and self.method != "qlora":
            raise ValueError(f"base_quant ({self.base_quant}) needs method 'qlora', not '{self.method}'")
        if self.lora_targets is not None:
            if not self.lora_targets or any(not t.strip() for t in self.lora_targets):
                raise ValueError("lora_targets: give module names like q_proj,v_proj (or all-linear)")
            if ALL_LINEAR in self.lora_targets and len(self.lora_targets) > 1:
                raise ValueError("lora_targets: all-linear stands alone (it already names every linear layer)")
        return self

    @property
    def uses_adapters(self) -> bool:
        """LoRA or QLoRA: only adapters train."""
        return self.method != "full"

    @property
    def frozen_format(self) -> str:
        """How the frozen base weights are stored: 'training' (the compute dtype), 'nf4' or 'int8'."""
        if self.method != "qlora":
            return "training"
        return self.base_quant or "nf4"

    @property
    def adapter_bytes(self) -> int:
        """Bytes per adapter weight (and per adapter gradient)."""
        return 4 if self.adapter_dtype == "fp32" else 2
