"""Render a `TorchtitanJob` as the Python config module torchtitan 0.3.0 imports.

The module starts from torchtitan's own recipe of the model family (`llama3_8b` /
`qwen3_30b_a3b` in the family's `config_registry`: data loader, tokenizer path, learning-rate
schedule, checkpointing), then replaces the model with the planned one and sets the parallel
degrees, batch, activation checkpointing, optimizer and fp8 converter. Every value is written
with `repr`, so the file is plain Python a reader can check line by line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.export.torchtitan import TorchtitanJob

FP8_CONVERTER = "Float8LinearConverter"
"""torchtitan 0.3.0's fp8 converter (`torchtitan.components.quantization`): a config class in
the model registry's `converters`, no longer a `[model] converters = ["float8"]` name."""
CONFIG_FUNCTION = "modelplan_job"
"""The function in it that returns the Trainer.Config; `--config` names it."""

RECIPES = {"llama3": "llama3_8b", "qwen3": "qwen3_30b_a3b"}
"""The family's config_registry function whose data, tokenizer and schedule the job keeps."""
BLOCKS = {"llama3": "Llama3TransformerBlock", "qwen3": "Qwen3TransformerBlock"}
MODELS = {"llama3": "Llama3Model", "qwen3": "Qwen3Model"}
PARALLELIZE = {"llama3": "parallelize_llama", "qwen3": "parallelize_qwen3"}
ROPES = {"llama3": "ComplexRoPE", "qwen3": "CosSinRoPE"}
"""The rotary embedding each family's registry uses."""
AC_CONFIGS = {"none": "None", "selective": "SelectiveAC.Config()", "full": "FullAC.Config()"}

_IMPORTS = '''\
from functools import partial

import torch.nn as nn

from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.components.optimizer import register_moe_load_balancing_hook
from torchtitan.components.optimizer.optimizer import OptimizersContainer, ParamGroupConfig
from torchtitan.components.quantization import {fp8}
from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.distributed.pipeline_parallel import pipeline_llm
from torchtitan.models.common import Embedding, Linear, RMSNorm, {rope}
from torchtitan.models.common.config_utils import (
    get_attention_config,
    make_ffn_config,
    make_gqa_config,
    make_moe_config,
    make_routed_experts_config,
    make_router_config,
)
from torchtitan.models.{family}.config_registry import {recipe}
from torchtitan.models.{family}.model import {block}, {model}
from torchtitan.models.{family}.parallelize import {parallelize}
from torchtitan.models.utils import validate_converter_order
from torchtitan.protocols.model_spec import ModelSpec
from torchtitan.trainer import Trainer
'''

_BODY = '''
LINEAR_INIT = {{"weight": partial(nn.init.trunc_normal_, std=0.02), "bias": nn.init.zeros_}}
NORM_INIT = {{"weight": nn.init.ones_}}
EMBEDDING_INIT = {{"weight": partial(nn.init.normal_, std=1.0)}}

# The planned model (modelplan spec -> torchtitan decoder config).
LAYERS = {layers!r}
DIM = {dim!r}
N_HEADS = {n_heads!r}
N_KV_HEADS = {n_kv_heads!r}
HEAD_DIM = {head_dim!r}
FFN_HIDDEN = {ffn_hidden!r}
VOCAB = {vocab!r}
NORM_EPS = {norm_eps!r}
TIED_EMBEDDINGS = {tied_embeddings!r}
QK_NORM = {qk_norm!r}
ROPE_MAX_SEQ_LEN = {rope_max_seq_len!r}
ROPE_THETA = {rope_theta!r}
MOE_LAYERS = {moe_layers!r}
NUM_EXPERTS = {num_experts!r}
TOP_K = {top_k!r}
EXPERT_FFN_HIDDEN = {expert_ffn_hidden!r}
SHARED_FFN_HIDDEN = {shared_ffn_hidden!r}


def _norm(dim):
    return RMSNorm.Config(normalized_shape=dim, eps=NORM_EPS, param_init=NORM_INIT)


def _block(i):
    attention = make_gqa_config(
        dim=DIM, n_heads=N_HEADS, n_kv_heads=N_KV_HEADS, head_dim=HEAD_DIM,
        wqkv_param_init=LINEAR_INIT, wo_param_init=LINEAR_INIT,
        inner_attention=get_attention_config("flex"), fuse_qkv=True,
        rope={rope}.Config(dim=HEAD_DIM, max_seq_len=ROPE_MAX_SEQ_LEN, theta=ROPE_THETA),
        qk_norm=_norm(HEAD_DIM) if QK_NORM else None,
    )
    if i not in MOE_LAYERS:
        mlp = make_ffn_config(dim=DIM, hidden_dim=FFN_HIDDEN, w1_param_init=LINEAR_INIT,
                              w2w3_param_init=LINEAR_INIT)
        return {block}.Config(attention_norm=_norm(DIM), ffn_norm=_norm(DIM),
                              attention=attention, feed_forward=mlp)
    shared = None
    if SHARED_FFN_HIDDEN:
        shared = make_ffn_config(dim=DIM, hidden_dim=SHARED_FFN_HIDDEN,
                                 w1_param_init=LINEAR_INIT, w2w3_param_init=LINEAR_INIT)
    moe = make_moe_config(
        num_experts=NUM_EXPERTS,
        router=make_router_config(dim=DIM, num_experts=NUM_EXPERTS, gate_param_init=LINEAR_INIT,
                                  top_k=TOP_K, score_func="softmax", route_norm=True),
        routed_experts=make_routed_experts_config(
            dim=DIM, hidden_dim=EXPERT_FFN_HIDDEN, num_experts=NUM_EXPERTS, top_k=TOP_K,
            param_init=LINEAR_INIT, comm_backend="standard"),
        shared_experts=shared,
    )
    return {block}.Config(attention_norm=_norm(DIM), ffn_norm=_norm(DIM), attention=attention,
                          moe=moe)


def modelplan_model():
    """The planned network as a torchtitan {model} config."""
    return {model}.Config(
        dim=DIM,
        vocab_size=VOCAB,
        enable_weight_tying=TIED_EMBEDDINGS,
        tok_embeddings=Embedding.Config(num_embeddings=VOCAB, embedding_dim=DIM,
                                        param_init=EMBEDDING_INIT),
        norm=_norm(DIM),
        lm_head=Linear.Config(in_features=DIM, out_features=VOCAB, param_init=LINEAR_INIT),
        layers=[_block(i) for i in range(LAYERS)],
    )


def {function}() -> Trainer.Config:
    """torchtitan's {recipe} recipe with the planned model, degrees, batch and recompute."""
    config = {recipe}()
    model = modelplan_model()
    converters = {converters}
    validate_converter_order(converters)
    for converter in converters:
        model = converter.build().convert(model)
    config.model_spec = ModelSpec(
        name="{family}", flavor="modelplan", model=model, parallelize_fn={parallelize},
        pipelining_fn=pipeline_llm,
        post_optimizer_build_fn=register_moe_load_balancing_hook if MOE_LAYERS else None,
        state_dict_adapter=None,
    )
    config.loss = ChunkedLossWrapper.Config(
        loss_fn=CrossEntropyLoss.Config(global_vocab_size=VOCAB))
    config.parallelism = ParallelismConfig(
{parallelism}
    )
    config.training = TrainingConfig(
{training}
        steps=config.training.steps,
    )
    config.activation_checkpoint = {ac}
    lr = config.optimizer.param_groups[0].optimizer_kwargs.get("lr", 3e-4)
    config.optimizer = OptimizersContainer.Config(param_groups=[
        ParamGroupConfig(pattern=r".*", optimizer_name={optimizer!r},
                         optimizer_kwargs={{"lr": lr, "betas": (0.9, 0.95), "eps": 1e-8,
                                           "weight_decay": 0.1}}),
    ])
    return config
'''


def _kwargs(table: dict) -> str:
    return "\n".join(f"        {key}={value!r}," for key, value in table.items())


def render_module(job: "TorchtitanJob", header: list[str]) -> str:
    """The module text: a docstring (header and notes), imports, the model, the job function."""
    model = job.model
    family = model.family
    doc = list(header)
    if job.notes:
        doc.append("Not expressible in torchtitan (check these by hand):")
        doc += [f"  - {note}" for note in job.notes]
    docstring = '"""' + "\n".join(line.replace('"""', "'''") for line in doc) + '\n"""\n\n'
    names = dict(family=family, recipe=RECIPES[family], block=BLOCKS[family],
                 model=MODELS[family], parallelize=PARALLELIZE[family], rope=ROPES[family])
    sizes = {key: value for key, value in model.model_dump().items() if key != "family"}
    converters = f"[{FP8_CONVERTER}.Config()]" if job.fp8 else "[]"
    body = _BODY.format(
        **sizes, **names, function=CONFIG_FUNCTION, converters=converters,
        parallelism=_kwargs(job.parallelism), training=_kwargs(job.training),
        ac=AC_CONFIGS[job.activation_checkpoint], optimizer=job.optimizer,
    )
    return docstring + _IMPORTS.format(fp8=FP8_CONVERTER, **names) + body
