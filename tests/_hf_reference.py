"""transformers' own modules as the reference for parameter counts and FLOPs: a config dict is
built into the HF class its `architectures` names (AutoModelForCausalLM otherwise) on the meta
device, and sum(p.numel()) of its parameters is the expected count (tied tensors yielded once)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

HF = Path(__file__).parent / "data" / "hf"  # config.json files of published checkpoints


def config(name: str, **overrides) -> dict:
    """A fixture config with some keys replaced."""
    return {**json.loads((HF / f"{name}.json").read_text()), **overrides}


def fixture_names() -> list[str]:
    """Every shipped config.json fixture."""
    return sorted(path.stem for path in HF.glob("*.json"))


def transformers_module():
    """transformers, quiet (skips the test when torch or transformers is not installed)."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    return transformers


def hf_config(data: dict):
    """The transformers config object of a config dict."""
    transformers = transformers_module()
    kwargs = {k: v for k, v in data.items() if k not in ("architectures", "_name_or_path", "model_type")}
    return transformers.AutoConfig.for_model(data["model_type"], **kwargs)


@lru_cache(maxsize=1)
def _class_names() -> dict[str, str]:
    return {name.lower(): name for name in dir(transformers_module())}


def hf_class(data: dict):
    """The class `architectures[0]` names (published names may differ in case, e.g.
    PhiMoEForCausalLM); None means AutoModelForCausalLM."""
    arch = (data.get("architectures") or [None])[0]
    if arch is not None and arch.lower() in _class_names():
        return getattr(transformers_module(), _class_names()[arch.lower()])
    return None


def hf_model(data: dict, device: str = "meta"):
    """The HF model of a config dict on `device` (meta: shapes only, no memory)."""
    import torch

    transformers = transformers_module()
    cfg = hf_config(data)
    cls = hf_class(data)
    with torch.device(device):
        if cls is None:
            return transformers.AutoModelForCausalLM.from_config(cfg)
        return cls._from_config(cfg)


def hf_numel(data: dict) -> int:
    """sum(p.numel()) of the HF model of `data` built on the meta device."""
    return sum(p.numel() for p in hf_model(data).parameters())


def hf_mtp_numel(data: dict) -> int:
    """Parameters transformers' MtpModel adds to the main model (its shared embedding and head
    not counted again): the multi-token prediction modules the config declares."""
    import torch
    from transformers.modeling_layers import MtpModel

    main = hf_model(data)
    with torch.device("meta"):
        mtp = MtpModel(main, main.config.get_text_config().num_mtp_layers)
    own = {id(p) for p in main.parameters()}
    return sum(p.numel() for p in mtp.parameters() if id(p) not in own)


def hf_total_and_part(data: dict, prefixes: tuple[str, ...]) -> tuple[int, int]:
    """sum(p.numel()) of transformers' model of `data` (meta device), and of its parameters whose
    dotted name holds one of `prefixes` (a composite's tower + projector)."""
    total = part = 0
    for name, p in hf_model(data).named_parameters():
        total += p.numel()
        if any(f".{x}" in f".{name}" for x in prefixes):
            part += p.numel()
    return total, part


def hf_eager_composite(data: dict):
    """(config, model) of the HF composite of `data` on CPU in eval mode: eager attention on the
    composite, its text_config and vision_config; seed 0."""
    import torch

    cfg = hf_config(data)
    for sub in (cfg, cfg.text_config, cfg.vision_config):
        sub._attn_implementation = "eager"
    torch.manual_seed(0)
    return cfg, hf_class(data)._from_config(cfg).eval()


def hf_training_flops(data: dict, batch: int, seq: int, decoder_seq: int | None = None) -> int:
    """FLOPs FlopCounterMode counts for one forward + backward (loss on the model's own head)
    of the HF model of `data` on CPU, eager attention and eager experts, seed 0; the rotary
    embedding's inv_freq x positions outer product (no weight, no backward) is left out."""
    return sum(hf_training_flop_counts(data, batch, seq, decoder_seq).values())


def hf_training_flop_counts(data: dict, batch: int, seq: int, decoder_seq: int | None = None) -> dict[str, int]:
    """`hf_training_flops` by aten op (aten.mm, aten.bmm, aten.convolution, ...)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    transformers_module()
    cfg = hf_config(data)
    cfg._attn_implementation = "eager"
    for sub in ("text_config", "vision_config"):
        if getattr(cfg, sub, None) is not None:
            getattr(cfg, sub)._attn_implementation = "eager"
    if hasattr(cfg, "_experts_implementation"):
        cfg._experts_implementation = "eager"
    torch.manual_seed(0)
    cls = hf_class(data)
    import transformers

    model = (cls or transformers.AutoModelForCausalLM)._from_config(cfg)
    vocab = cfg.get_text_config().vocab_size
    ids = torch.randint(0, vocab, (batch, seq))
    if decoder_seq is not None:
        inputs = {"input_ids": ids, "labels": torch.randint(0, vocab, (batch, decoder_seq))}
    elif getattr(cfg, "num_labels", None) and (cls is not None and "Classification" in cls.__name__):
        inputs = {"input_ids": ids, "labels": torch.zeros(batch, dtype=torch.long)}
    else:
        inputs = {"input_ids": ids, "labels": ids}
    counter = FlopCounterMode(display=False)
    with counter:
        out = model(**inputs)
        out.loss.backward()
    by_module = counter.get_flop_counts()
    totals = {str(op): n for op, n in by_module["Global"].items()}
    for name, ops in by_module.items():
        if name.endswith("rotary_emb"):
            for op, n in ops.items():
                totals[str(op)] -= n
    return totals


COMPONENTS = {
    "embedding": ("embed_tokens.", "wte.", "wpe.", "word_embeddings.", "backbone.embeddings.", "model.embeddings."),
    "head": ("lm_head.",),
    "final_norm": ("model.norm.", "transformer.ln_f.", "transformer.norm_f.", "language_model.norm.",
                   "backbone.norm_f.", "model.norm_f.", "model.final_layernorm.", "model.embedding_norm.",
                   "model.final_norm."),
}
"""Name prefixes (after the module path) of the HF parameters outside the blocks, by modelplan's
breakdown key; every other parameter is a block's ("layers")."""


def hf_components(data: dict, skip: str | None = None) -> dict[str, int]:
    """sum(p.numel()) of the HF model of `data` split into embedding / layers / final_norm / head
    by parameter name (tied tensors yielded once, so a tied head is 0); parameters whose name
    contains `skip` (a vision tower) are left out."""
    out = {"embedding": 0, "layers": 0, "final_norm": 0, "head": 0}
    for name, p in hf_model(data).named_parameters():
        if skip is not None and skip in name:
            continue
        part = next((key for key, prefixes in COMPONENTS.items()
                     if any(name.startswith(x) or f".{x}" in f".{name}" for x in prefixes)), "layers")
        out[part] += p.numel()
    return out
