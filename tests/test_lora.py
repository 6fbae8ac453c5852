"""LoRA trainable-parameter counts (modelplan.count.lora): hand-worked, and equal to PEFT's own
get_nb_trainable_parameters on the same HF config built on the meta device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelplan.count.lora import count_lora, resolve_layout
from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.specs.finetune import FinetuneSpec
from modelplan.specs.hf import from_hf_config
from modelplan.specs.load import load_model

HF = Path(__file__).parent / "data" / "hf"  # config.json files as published on the HF Hub


def lora(spec, targets, rank=8, layout=None):
    """count_lora of a LoRA fine-tune of `spec`."""
    ft = FinetuneSpec(method="lora", lora_rank=rank, lora_targets=targets, lora_layout=layout)
    return count_lora(spec, ft, count_params(spec).total)


def test_gpt2_c_attn_by_hand():
    """GPT-2 small, r 8 on c_attn (Conv1D 768 -> 2304): 12 blocks x 8 x (768 + 2304) = 294,912."""
    result = lora(load_model("gpt2"), ("c_attn",))
    assert result.trainable_params == 12 * 8 * (768 + 2304) == 294_912
    assert result.all_params == 124_439_808 + 294_912  # base total (HF safetensors metadata) + adapters


def test_gpt2_c_proj_matches_both_projections():
    """PEFT matches `c_proj` in attn (768 -> 768) and in mlp (3072 -> 768): 12 x 8 x (1536 + 3840)."""
    assert lora(load_model("gpt2"), ("c_proj",)).trainable_params == 12 * 8 * (1536 + 3840)


def test_llama_3_8b_all_attention_by_hand():
    """Llama-3-8B (h 4096, 8 KV heads of 128), r 16 on q,k,v,o: 32 x 16 x (8192 + 5120 + 5120 + 8192)."""
    result = lora(load_model("llama-3-8b"), ("q_proj", "k_proj", "v_proj", "o_proj"), rank=16)
    assert result.trainable_params == 32 * 16 * (2 * 8192 + 2 * (4096 + 1024))


def test_default_targets_follow_peft():
    """No targets: PEFT's per-model default (q_proj, v_proj for Llama-style models)."""
    result = lora(load_model("mistral-7b"), None)
    assert result.targets == ["q_proj", "v_proj"]
    assert result.trainable_params == 32 * 8 * ((4096 + 4096) + (4096 + 1024))


def test_unknown_target_is_one_line_error():
    """A name no module has is an error naming the target."""
    with pytest.raises(SpecError, match="qkv_proj"):
        lora(load_model("llama-3-8b"), ("qkv_proj",))


def test_all_linear_on_plain_mlp_needs_a_layout():
    """all-linear on GPT-2 is ambiguous (fused c_attn vs separate q/k/v): the error asks for --lora-layout."""
    with pytest.raises(SpecError, match="lora-layout"):
        lora(load_model("gpt2"), ("all-linear",))
    assert resolve_layout(load_model("gpt2"), ("c_fc",)) == "gpt2"


def test_moe_expert_targets_rejected():
    """Adapters on MoE experts are not modelled; attention targets of an MoE model are."""
    spec = load_model("mixtral-8x7b")
    with pytest.raises(SpecError, match="MoE"):
        lora(spec, ("all-linear",))
    assert lora(spec, ("q_proj",)).trainable_params == 32 * 8 * (4096 + 4096)


# PEFT comparison: (config fixture, HF overrides, targets, rank, layout)
PEFT_CASES = [
    ("llama-2-7b", {}, ["q_proj", "v_proj"], 8, None),
    ("llama-3-8b", {}, "all-linear", 16, None),
    ("llama-3-8b", {}, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 64, None),
    ("mistral-7b-v0.1", {}, ["q_proj", "k_proj", "v_proj", "o_proj"], 8, None),
    ("mistral-7b-v0.1", {}, "all-linear", 32, None),
    ("qwen2-0.5b", {}, ["q_proj", "v_proj"], 8, None),
    ("qwen2-0.5b", {}, "all-linear", 64, None),
    ("qwen2-0.5b", {}, ["lm_head", "down_proj"], 4, None),
    ("gpt2", {}, ["c_attn"], 8, None),
    ("gpt2", {}, ["c_attn", "c_proj", "c_fc"], 16, None),
    ("gpt2", {}, "all-linear", 8, "gpt2"),
    ("opt-125m", {}, "all-linear", 8, "opt"),
    ("opt-350m", {}, "all-linear", 8, "opt"),
    ("phi-2", {"num_hidden_layers": 2}, ["q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2"], 8, None),
    ("pythia-160m", {}, ["query_key_value", "dense"], 8, None),
    ("falcon-7b", {"num_hidden_layers": 2}, "all-linear", 8, "neox"),
    ("mixtral-8x7b-v0.1", {"num_hidden_layers": 2}, ["q_proj", "k_proj", "v_proj", "o_proj"], 8, None),
]


@pytest.fixture(scope="module")
def peft_count():
    """(trainable, all) of PEFT's get_nb_trainable_parameters for a config dict, on the meta device."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    transformers.logging.set_verbosity_error()

    def count(data: dict, targets, rank: int) -> tuple[int, int]:
        kwargs = {k: v for k, v in data.items() if k not in ("architectures", "_name_or_path")}
        cfg = transformers.AutoConfig.for_model(**kwargs)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        wrapped = peft.get_peft_model(model, peft.LoraConfig(r=rank, target_modules=targets))
        return wrapped.get_nb_trainable_parameters()

    return count


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")  # PEFT's Conv1D fan_in_fan_out and tied-lm_head notices
@pytest.mark.parametrize(("name", "overrides", "targets", "rank", "layout"), PEFT_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(PEFT_CASES)])
def test_counts_equal_peft(peft_count, name, overrides, targets, rank, layout):
    """Trainable and all parameters equal PEFT's get_nb_trainable_parameters (print_trainable_parameters)."""
    data = {**json.loads((HF / f"{name}.json").read_text()), **overrides}
    spec = from_hf_config(data, "config.json")
    ours = lora(spec, (targets,) if isinstance(targets, str) else tuple(targets), rank, layout)
    assert (ours.trainable_params, ours.all_params) == peft_count(data, targets, rank)
