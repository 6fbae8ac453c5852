"""Exact LoRA trainable-parameter counts, equal to PEFT's `get_nb_trainable_parameters`.

PEFT wraps every module whose name matches a target (the target equals the module's dotted
name or is its last part) with lora_A = Linear(in, r, bias=False) and
lora_B = Linear(r, out, bias=False) (Hu et al. 2021, eq. 3: W0 + B A with A in R^{r x in}); the
base stays frozen, so the trainable count is sum over adapted modules of r (in + out), and PEFT's
`all params` is the base model's parameters plus those (`print_trainable_parameters`).
`all-linear` adapts every linear layer except the output layer (PEFT tuners_utils).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.linears import (
    LAYOUTS,
    Layout,
    Linear,
    check_layout,
    linear_modules,
)
from modelplan.count.result import Result
from modelplan.errors import SpecError
from modelplan.specs.finetune import ALL_LINEAR

if TYPE_CHECKING:
    from modelplan.specs.finetune import FinetuneSpec
    from modelplan.specs.transformer import TransformerSpec

# PEFT utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, per layout
# (llama, mistral, mixtral, qwen2, gemma, opt: q_proj, v_proj; phi adds fc1, fc2).
PEFT_DEFAULT_TARGETS: dict[str, tuple[str, ...]] = {
    "llama": ("q_proj", "v_proj"),
    "gpt2": ("c_attn",),
    "opt": ("q_proj", "v_proj"),
    "phi": ("q_proj", "v_proj", "fc1", "fc2"),
    "neox": ("query_key_value",),
}


class LoraCount(Result):
    """Trainable and total parameters of a LoRA model, as PEFT counts them."""

    layout: str
    """HF module naming used to resolve the targets (modelplan.count.linears)."""
    targets: list[str]
    """The target names, as resolved (PEFT's default when none were given)."""
    rank: int
    trainable_params: int
    """Adapter parameters: sum of r (in + out) over adapted modules."""
    all_params: int
    """Base parameters plus adapters (PEFT's 'all params')."""
    adapted_modules: int
    """How many Linear modules carry an adapter."""
    breakdown_params: dict[str, int]
    """Adapter parameters per module path (`attention/q_proj`), whole model."""

    @property
    def trainable_percent(self) -> float:
        """100 x trainable / all, as print_trainable_parameters shows it."""
        return 100.0 * self.trainable_params / self.all_params if self.all_params else 0.0


def _compatible_layouts(spec: "TransformerSpec") -> list[Layout]:
    """Layouts whose MLP kind matches the spec (llama for gated MLPs, the rest for plain ones)."""
    out = []
    for layout in LAYOUTS:
        try:
            check_layout(spec, layout)
        except SpecError:
            continue
        out.append(layout)
    return out


def matched_modules(modules: list[Linear], targets: tuple[str, ...]) -> list[Linear]:
    """Modules PEFT adapts for `targets` (all-linear: every linear but the output layer)."""
    if targets == (ALL_LINEAR,):
        return [m for m in modules if m.path != "head/lm_head"]
    return [m for m in modules if m.name in targets]


def resolve_layout(spec: "TransformerSpec", targets: tuple[str, ...] | None, layout: Layout | None = None) -> Layout:
    """The module naming to read `targets` in: the given one, or the only one (up to identical
    adapted shapes) whose names contain every target and whose MLP kind fits the spec."""
    if layout is not None:
        check_layout(spec, layout)
        return layout
    compatible = _compatible_layouts(spec)
    if not compatible:
        raise SpecError(f"{spec.name}: no linear-module layout fits this model")
    if targets is None:
        if len(compatible) == 1:
            return compatible[0]
        raise SpecError(f"lora_targets: {spec.name} has a plain MLP, whose module names depend on the HF "
                        f"implementation: give --lora-layout ({', '.join(compatible)}) or --lora-targets")
    candidates = [l for l in compatible if targets == (ALL_LINEAR,)
                  or set(targets) <= {m.name for m in linear_modules(spec, l)}]
    if not candidates:
        names = {l: sorted({m.name for m in linear_modules(spec, l)}) for l in compatible}
        known = "; ".join(f"{l}: {', '.join(n)}" for l, n in names.items())
        raise SpecError(f"lora_targets: {', '.join(targets)} name no linear module of {spec.name} ({known})")
    shapes = {l: sorted((m.in_features, m.out_features, m.count) for m in matched_modules(linear_modules(spec, l), targets))
              for l in candidates}
    if len({tuple(v) for v in shapes.values()}) > 1:
        raise SpecError(f"lora_targets: {', '.join(targets)} adapt different shapes under layouts "
                        f"{', '.join(candidates)}: give --lora-layout")
    return candidates[0]


def count_lora(spec: "TransformerSpec", finetune: "FinetuneSpec", base_params: int) -> LoraCount:
    """Exact adapter parameters of `finetune` on `spec` (PEFT get_nb_trainable_parameters)."""
    layout = resolve_layout(spec, finetune.lora_targets, finetune.lora_layout)
    targets = finetune.lora_targets or PEFT_DEFAULT_TARGETS[layout]
    modules = linear_modules(spec, layout)
    adapted = matched_modules(modules, targets)
    missing = [t for t in targets if t != ALL_LINEAR and t not in {m.name for m in modules}]
    if missing:
        raise SpecError(f"lora_targets: {', '.join(missing)} name no linear module of {spec.name} (layout {layout})")
    moe = [m.path for m in adapted if m.path.startswith(("mlp/experts", "mlp/shared_experts", "mlp/router",
                                                         "mlp/shared_expert_gate"))]
    if moe:
        raise SpecError(f"lora_targets: adapters on MoE expert and router weights ({', '.join(sorted(set(moe)))}) are "
                        "not modelled (transformers fuses expert weights; target the attention projections)")
    r = finetune.lora_rank
    breakdown = {m.path: m.count * r * (m.in_features + m.out_features) for m in adapted}  # Hu et al. eq. 3
    trainable = sum(breakdown.values())
    return LoraCount(
        layout=layout, targets=list(targets), rank=r, trainable_params=trainable,
        all_params=base_params + trainable, adapted_modules=sum(m.count for m in adapted),
        breakdown_params=breakdown,
    )
