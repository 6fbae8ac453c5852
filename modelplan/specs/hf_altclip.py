"""HF AltCLIP (Chen et al. 2022; transformers 5.24 modeling_altclip.py AltCLIPModel): an XLM-R text
encoder without its pooler (AltRobertaModel, add_pooling_layer=False), then pre_LN LayerNorm(h) and
transformation Linear(h, project_dim) on every token (counted as the spec's final norm and a
per-token classifier), the CLIP vision tower (AltCLIPVisionModel: CLIPVisionModel's modules), and
visual_projection Linear(h_vision, projection_dim, bias=False), text_projection
Linear(project_dim, projection_dim, bias=False) on the first token and logit_scale (1) as the
connector (each once per image-text pair)."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_vision import _clip
from modelplan.specs.hf_vision_models import architecture, with_defaults

HEADS = {"altclip": ("AltCLIPModel",)}
_TEXT = {"vocab_size": 250002, "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
         "num_attention_heads": 16, "max_position_embeddings": 514, "type_vocab_size": 1, "project_dim": 768,
         "layer_norm_eps": 1e-5}
"""AltCLIPTextConfig defaults (transformers 5.24 configuration_altclip.py)."""


def altclip(c: HFConfig) -> dict:
    """AltCLIPModel: the text tower with pre_LN and transformation, the CLIP vision tower, the projections."""
    architecture(c, "altclip", HEADS)
    raw, vision = c.data.get("text_config") or {}, c.data.get("vision_config") or {}
    if not isinstance(raw, dict) or not isinstance(vision, dict):
        raise SpecError(f"{c.source}: text_config / vision_config: expected objects")
    t = HFConfig({**_TEXT, **raw}, c.source, "text_config.")
    fields = GPT_MAPPERS["bert"](t)
    project = t.size("project_dim")
    fields.update(pooler=False, final_norm=True, classifier={"num_labels": project, "per_token": True})
    tower = _clip(with_defaults(HFConfig(vision, c.source, "vision_config."), "clip_vision_model"))
    proj = c.integer("projection_dim", 768)
    tower["connector"] = [dict(name="visual_projection", kind="linear", in_features=tower["hidden"], out_features=proj,
                               rows=1),
                          dict(name="text_projection", kind="linear", in_features=project, out_features=proj, rows=1),
                          dict(name="logit_scale", kind="vector", in_features=1)]
    return {**fields, "vision": tower}


ALTCLIP_MAPPERS = {"altclip": altclip}
