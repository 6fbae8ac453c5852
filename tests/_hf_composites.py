"""A multimodal composite as transformers 5.24 builds it: the config class of a model_type from
keyword sub-configs, written as its config.json dict, and the model AutoModelForImageTextToText
builds from it on the meta device (the reference of tests/test_hf_muse.py, test_hf_cosmos3.py,
test_hf_nemotron_omni.py, test_hf_reused.py)."""

from __future__ import annotations

import json

from _hf_reference import transformers_module


def built(model_type: str, kwargs: dict, cls: str | None = None):
    """(config.json dict, model on the meta device) of `model_type`'s config class built from
    `kwargs`; `cls`: the class name the auto mapping must pick."""
    import torch

    transformers = transformers_module()
    cfg = transformers.AutoConfig.for_model(model_type, **kwargs)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    if cls is not None:
        assert type(model).__name__ == cls
    return json.loads(cfg.to_json_string(use_diff=False)), model
