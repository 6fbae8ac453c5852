"""`--mtp-layers N` of `modelplan count`, `plan` and `verify`: the multi-token prediction modules
the run trains (`TransformerSpec.mtp_layers`; DeepSeek-V3 sec. 2.2).

A HuggingFace config that declares MTP (`num_nextn_predict_layers`) loads with `mtp_layers` 0,
since transformers' DeepseekV3ForCausalLM builds none (`mtp_not_built`); the engines that train
DeepSeek-V3 build them (Megatron-LM `--mtp-num-layers`, Megatron-Bridge / NeMo DeepSeek recipes
`mtp_num_layers`), so this option puts them back into the count, the FLOPs, the memory and the
last pipeline stage (the code that prices a preset's mtp_layers).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from modelplan.specs.limits import MAX_LAYERS

MtpLayersOpt = Annotated[Optional[int], typer.Option(
    "--mtp-layers", max=MAX_LAYERS,
    help="Multi-token prediction modules the engine trains (Megatron-LM --mtp-num-layers; DeepSeek-V3: 1) "
         "[default: the model's; 0 for a HuggingFace config, whose class builds none].", show_default=False)]


def with_mtp_layers(spec, modules: int | None):
    """`spec` with `modules` MTP modules trained (None: unchanged); the declared modules left
    unbuilt drop by as many. One-line SpecError for a negative value or a model that takes none."""
    if modules is None:
        return spec
    from modelplan.errors import SpecError, validate_model
    from modelplan.specs.family import family_of

    if modules < 0:
        raise SpecError(f"--mtp-layers ({modules}) must be >= 0")
    if not family_of(spec).blocks:
        raise SpecError(f"--mtp-layers: {spec.name} is a '{spec.kind}' spec; MTP modules belong to a decoder")
    data = {**spec.model_dump(), "mtp_layers": modules, "mtp_not_built": max(0, spec.mtp_not_built - modules)}
    return validate_model(type(spec), data, f"--mtp-layers {modules}")


def mtp_warnings(spec, modules: int | None) -> list[str]:
    """The option acting on nothing, one line each (option_checks style): the model already
    trains that many modules."""
    if modules is None or getattr(spec, "mtp_layers", None) != modules:
        return []
    return [f"--mtp-layers {modules}: {spec.name} already trains {spec.mtp_layers} MTP module(s); nothing changes"]


def mtp_note(spec, modules: int | None) -> str | None:
    """The plan's note on a config that declares MTP modules it does not train (None: nothing to say)."""
    declared = getattr(spec, "mtp_not_built", 0)
    if modules is not None or not declared:
        return None
    return (f"the config declares {declared} MTP module(s) (num_nextn_predict_layers {declared}), not trained "
            f"in these plans: give --mtp-layers {declared} to plan an engine that trains them "
            "(Megatron-LM --mtp-num-layers)")
