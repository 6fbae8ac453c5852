"""HF config mappers of composites built from another model_type's modules (transformers 5.24):
glmga (GlmgaConfig builds Glm46VForConditionalGeneration, hf_n18ocr.py's GLM-4.6V mapper) and
cosmos3_omni (Cosmos3OmniModel builds AutoModel of its qwen3_vl_vision / qwen3_vl_text sub-configs
and an untied lm_head: Qwen3-VL's modules, hf_vision.py's mapper) and cohere_compass (its
CohereCompassVisionModel is Qwen3-VL's tower, patch merger and deepstack mergers under new names, its
text model cohere_compass_text's, an untied lm_head: hf_vision.py's Qwen3-VL mapper over that text
model). A sub-config of another model_type would build other modules there: refused in one line."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig


def _reusing(target: str, subs: dict[str, str]):
    """A composite mapper that checks each sub-config's model_type, then maps with `target`'s
    (a model_type of MAPPERS, or a function of (config, MAPPERS))."""
    def mapper(c: HFConfig, text_mappers: dict) -> dict:
        for key, kind in subs.items():
            sub = c.sub(key)
            found = sub.text("model_type", kind) if sub is not None else kind
            if found != kind:
                raise SpecError(f"{c.source}: {key}.model_type: '{found}' not modelled for "
                                f"{c.text('model_type')} (supported: {kind})")
        return target(c, text_mappers) if callable(target) else text_mappers[target](c)
    return mapper


def _cohere_compass(c: HFConfig, text_mappers: dict) -> dict:
    """Qwen3-VL's tower and mergers (Qwen3VLVisionConfig's defaults are CohereCompassVisionConfig's)
    over the cohere_compass_text model."""
    from modelplan.specs.hf_vision import _qwen3_vl

    return _qwen3_vl(c, text_mappers, "cohere_compass_text")


REUSED_MAPPERS = {
    "glmga": _reusing("glm46v", {"text_config": "glm4v_text", "vision_config": "glm4v_vision"}),
    "cosmos3_omni": _reusing("qwen3_vl", {"text_config": "qwen3_vl_text", "vision_config": "qwen3_vl_vision"}),
    "cohere_compass": _reusing(_cohere_compass, {"text_config": "cohere_compass_text",
                                                 "vision_config": "cohere_compass_vision"}),
}
