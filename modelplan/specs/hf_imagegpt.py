"""HF ImageGPT (Chen et al. 2020; transformers 5.24 modeling_imagegpt.py ImageGPTModel /
ImageGPTForImageClassification): GPT-2's blocks (hf_gpt) over a sequence of colour-cluster ids,
with ImageGPTLayerNorm, x / sqrt(mean(x^2) + eps) * weight: an RMSNorm without bias, and untied
tables; the classifier is score Linear(n_embd, num_labels, bias=False) on the mean of the
positions. ImageGPTForCausalImageModeling's lm_head predicts vocab_size - 1 ids (no start token):
one row fewer than the spec's LM head, refused."""

from __future__ import annotations

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"imagegpt": ("ImageGPTModel", "ImageGPTForImageClassification")}
DEFAULTS = {"imagegpt": {"vocab_size": 513, "n_positions": 1024, "n_embd": 512, "n_layer": 24, "n_head": 8,
                         "activation_function": "quick_gelu", "tie_word_embeddings": False}}
"""ImageGPTConfig defaults (transformers 5.24 configuration_imagegpt.py)."""


def imagegpt(c: HFConfig) -> dict:
    """ImageGPTModel (no head) or ImageGPTForImageClassification (the pooled score head)."""
    name = architecture(c, "imagegpt", HEADS)
    c = with_defaults(c, "imagegpt", DEFAULTS)
    fields = {**GPT_MAPPERS["gpt2"](c), "norm": "rmsnorm", "norm_bias": False, "lm_head": False,
              "tied_embeddings": False}
    if name.endswith("ForImageClassification"):
        fields["classifier"] = {"num_labels": labels(c), "bias": False}
    return fields


IMAGEGPT_MAPPERS = {"imagegpt": imagegpt}
