"""Exact parameter counts of a transformer, following PyTorch / HuggingFace module conventions.

Every count is the number of elements of the parameter tensors the HF module would create
(`sum(p.numel() for p in model.parameters())`, tied matrices once; buffers such as DeepSeek-V3's
e_score_correction_bias are not parameters). The breakdown uses slash-path keys whose parents are
sums of their children (nanoGPT's sizing notebook):

    embedding            token, position, token_type, norm, proj (OPT project_in)
    layers               attention/..., mamba/..., cross_attention/..., mlp/..., norm
                         (count.blocks lists the leaves)
    final_norm           one per stack
    head                 output (untied lm_head), bias, transform (BERT MLM), pooler, proj,
                         classifier
    vision               tower/{patch, class, position, layers, norms, head}, projector/...
                         (count.vision: Gemma 3, Mistral 3, Qwen-VL, LLaVA, Llama 4, ...)
    mtp                  multi-token prediction modules (DeepSeek-V3): norms, proj, block
    shared_blocks        Zamba's shared attention + MLP weights, once a copy (count.shared_block)

The four groups embedding, layers, final_norm and head are always present (0 when absent);
vision, mtp and every leaf appear only when non-zero. `network` specs are dispatched to
`modelplan.count.network` (imported lazily).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.blocks import (
    Block,
    block_of,
    block_params,
    mlp_params,
    mtp_block,
    norm_params,
    unused_expert_params,
)
from modelplan.count.conv_relative import final_pool_params
from modelplan.count.encoder_side import side_params
from modelplan.count.extras import embedding_extra_params, position_table_params
from modelplan.count.extras import frozen_params as extras_frozen_params
from modelplan.count.result import ParamCount
from modelplan.count.seq2seq import audio_params, embedding_norms, eoi_params, frozen_params, own_token_tables
from modelplan.count.shared_block import shared_params
from modelplan.count.side_paths import embedding_side_params, head_side_params
from modelplan.count.vision import vision_params
from modelplan.specs.extras import decoder_width, head_tied, table_width, token_width, transform_width
from modelplan.specs.family import family_of
from modelplan.specs.layer_sharing import reuses_weights

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec

__all__ = ["count_params", "not_built_params", "layer_params", "norm_params", "mlp_params", "with_parents", "vision_params", "TOP_LEVEL"]

TOP_LEVEL = ("embedding", "layers", "final_norm", "head")


def layer_params(spec: "TransformerSpec", index: int) -> dict[str, int]:
    """Leaf parameters of block `index` (0-based), keyed relative to the block (`attention/qkv`)."""
    return block_params(spec, block_of(spec, index))


def embedding_params(spec: "TransformerSpec") -> dict[str, int]:
    """Leaf parameters of the input side, keyed relative to `embedding/`."""
    h, e, w = spec.hidden, spec.embed_dim, table_width(spec)  # w: ELECTRA's factored width, else h
    return {
        # nn.Embedding(vocab, embed_dim); T5's encoder and decoder embed_tokens are tied to `shared`
        "token": spec.vocab * token_width(spec),
        "stack_token": own_token_tables(spec) * spec.vocab * token_width(spec),  # untied T5Gemma 2's decoder table
        # GPT-2 wpe / BERT position_embeddings: Embedding(max_positions, w), one per stack of an
        # encoder-decoder (BART's + 2 rows: count.seq2seq; BioGPT's: extras.position_offset); rotary/ALiBi: none
        "position": position_table_params(spec),
        "token_type": spec.type_vocab * w,  # BERT token_type_embeddings: Embedding(type_vocab, w)
        # BLOOM/BERT embedding LN; BART: each stack's layernorm_embedding
        "norm": embedding_norms(spec) * norm_params(spec, w),
        "audio_conv": audio_params(spec),  # Whisper conv1 / conv2 (count.seq2seq)
        "eoi": eoi_params(spec),  # T5Gemma 2's end-of-image vector
        "proj": e * h if e != h else 0,  # OPT project_in: Linear(embed_dim, h, bias=False)
        **embedding_extra_params(spec),  # ELECTRA embeddings_project, RoFormer's frozen table, ... (count/extras.py)
    }


def head_params(spec: "TransformerSpec") -> dict[str, int]:
    """Leaf parameters of the output side, keyed relative to `head/`."""
    h, e, t = spec.hidden, spec.embed_dim, transform_width(spec)  # t: h, or ELECTRA's embedding_size
    cls = spec.classifier
    bias = spec.extras is None or spec.extras.head_transform_bias
    return {
        "proj": h * e if e != h else 0,  # OPT project_out: Linear(h, embed_dim, bias=False)
        # BERT BertPredictionHeadTransform: dense h x t (+ bias), then a norm over t
        "transform": h * t + (t if bias else 0) + norm_params(spec, t) if spec.mlm_transform else 0,
        # lm_head: Linear(decoder width, vocab, bias=False); tied heads reuse the token embedding
        "output": spec.vocab * decoder_width(spec) if spec.lm_head and not head_tied(spec) else 0,
        "bias": spec.vocab if spec.lm_head_bias else 0,
        "bias_copy": spec.vocab if spec.head_bias_copy else 0,  # BertLMPredictionHead.bias, untied: unused
        "pooler": h * h + h if spec.pooler else 0,  # BertPooler: dense h x h + bias
        # classifier / score / qa_outputs: Linear(h, num_labels, bias)
        "classifier": h * cls.num_labels + (cls.num_labels if cls.bias else 0) if cls else 0,
        "input_pool": final_pool_params(spec),  # Inkling 2's final_input (count/conv_relative.py)
        **side_params(spec, "head"),  # BigBird's classification dense (count/encoder_side.py)
    }


def mtp_params(spec: "TransformerSpec") -> dict[str, int]:
    """One multi-token prediction module, keyed relative to `mtp/` (DeepSeek-V3 sec. 2.2; HF
    MtpLayer): enorm and hnorm, eh_proj Linear(2h, h, bias=False), one block, a post norm."""
    h = spec.hidden
    out = {"norms": 3 * norm_params(spec, h), "proj": 2 * h * h}
    for key, value in block_params(spec, mtp_block(spec)).items():
        out[f"block/{key}"] = value
    return out


def not_built_params(spec) -> dict[str, int]:
    """Parameters a checkpoint's config declares that its HF class does not build, by group (none
    in `count_params`): `mtp`, the spec's mtp_not_built modules as `mtp_params` counts them
    (transformers' MtpModel, which DeepseekV3ForCausalLM does not hold)."""
    modules = getattr(spec, "mtp_not_built", 0)
    return {"mtp": modules * sum(mtp_params(spec).values())} if modules else {}


def with_parents(leaves: dict[str, int], top_level: tuple[str, ...] = TOP_LEVEL) -> dict[str, int]:
    """Drop zero leaves, add every parent path as the sum of its children, keep `top_level`.

    Keys come out depth-first (a parent right before its children) in the order the leaves were
    given, so a breakdown built in model order reads top to bottom like the model.
    """
    tree: dict[str, int] = {key: 0 for key in top_level}
    for path, value in leaves.items():
        if value == 0:
            continue
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            key = "/".join(parts[:depth])
            tree[key] = tree.get(key, 0) + value
    seen = {key: i for i, key in enumerate(tree)}  # first-seen position of every path

    def order(path: str) -> tuple[int, ...]:
        parts = path.split("/")
        return tuple(seen["/".join(parts[:d])] for d in range(1, len(parts) + 1))

    return {key: tree[key] for key in sorted(tree, key=order)}


def _add(leaves: dict[str, int], prefix: str, values: dict[str, int], times: int = 1) -> None:
    for key, value in values.items():
        leaves[f"{prefix}/{key}"] = leaves.get(f"{prefix}/{key}", 0) + times * value


def count_params(spec) -> ParamCount:
    """Exact parameter counts of a model, by its family (`specs/family.py`)."""
    return family_of(spec).call("params", spec)


def count_transformer_params(spec) -> ParamCount:
    """`count_params` of a transformer."""
    leaves: dict[str, int] = {}
    _add(leaves, "embedding", {**embedding_params(spec), **embedding_side_params(spec)})
    per_layer: list[int] = []
    unused = 0
    cache: dict[Block, dict[str, int]] = {}
    for index in range(spec.num_blocks):
        kind = block_of(spec, index)
        if kind not in cache:
            cache[kind] = block_params(spec, kind)
        if reuses_weights(spec, index):  # ALBERT: an earlier block holds this block's weights
            per_layer.append(0)
            continue
        per_layer.append(sum(cache[kind].values()))
        unused += unused_expert_params(spec, kind)
        _add(leaves, "layers", cache[kind])
    stacks = 2 if spec.arch == "encoder_decoder" else 1  # T5: encoder and decoder final norms
    leaves["final_norm"] = stacks * norm_params(spec, spec.hidden) if spec.final_norm else 0
    _add(leaves, "head", {**head_params(spec), **head_side_params(spec)})
    if spec.vision is not None:
        _add(leaves, "vision", vision_params(spec.vision, spec.hidden))
    if spec.shared_block is not None:  # Zamba: tied across uses, once a copy
        _add(leaves, "shared_blocks", shared_params(spec))
    if spec.mtp_layers:
        _add(leaves, "mtp", mtp_params(spec), spec.mtp_layers)
        unused += spec.mtp_layers * unused_expert_params(spec, mtp_block(spec))
    breakdown = with_parents(leaves)
    total = sum(value for key, value in breakdown.items() if "/" not in key)
    return ParamCount(
        total=total,
        # fixed sinusoid tables (count.seq2seq) and RoFormer's (count.extras): requires_grad False
        trainable=total - frozen_params(spec) - extras_frozen_params(spec),
        active=total - unused,  # MoE: every routed expert except the top_k a token uses
        breakdown=breakdown,
        per_layer=per_layer,
    )
