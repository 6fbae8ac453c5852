"""The parameter table of a transformer spec: names, global shapes, how each one is split, and
which communication unit (ZeRO/DDP bucket) it lives in; plus seeded initialisation and data.

Names are slash paths: `embedding/word/weight`, `layers/3/attention/q/weight`,
`layers/3/mlp/experts/in/weight`, `head/lm/weight`. Units group the parameters one collective
moves together: `embedding/word`, `embedding/extra`, `layers/<i>` (dense part of block i),
`layers/<i>/experts` (its routed experts) and `head` (final norm, output projection).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

Init = Literal["normal", "norm_weight", "bias"]


@dataclass(frozen=True)
class ParamDef:
    """One parameter tensor of the whole (unsharded) model."""

    name: str
    shape: tuple[int, ...]
    unit: str
    """Communication unit (bucket) that holds it."""
    tp_dim: int | None = None
    """Dimension split over tensor-parallel ranks (column-parallel: out dim; row-parallel: in dim)."""
    ep_dim: int | None = None
    """Dimension split over expert-parallel ranks (the expert index)."""
    sequence_parallel_grad: bool = False
    """Replicated over tp but fed sequence shards under sequence parallelism: grad is all-reduced over tp."""
    tensor_partial_grad: bool = False
    """Replicated over tp but its gradient is a partial sum whenever tp > 1 (the MoE router)."""
    init: Init = "normal"

    @property
    def numel(self) -> int:
        """Elements of the whole tensor."""
        out = 1
        for n in self.shape:
            out *= n
        return out


def _linear(prefix: str, unit: str, fan_in: int, fan_out: int, bias: bool, kind: str) -> list[ParamDef]:
    """A column- or row-parallel linear layer: weight (in, out) and optional bias (out,)."""
    if kind == "column":
        defs = [ParamDef(f"{prefix}/weight", (fan_in, fan_out), unit, tp_dim=1)]
        if bias:
            defs.append(ParamDef(f"{prefix}/bias", (fan_out,), unit, tp_dim=0, init="bias"))
    else:  # row-parallel: split the input dim; the bias is added once after the reduce
        defs = [ParamDef(f"{prefix}/weight", (fan_in, fan_out), unit, tp_dim=0)]
        if bias:
            defs.append(ParamDef(f"{prefix}/bias", (fan_out,), unit, sequence_parallel_grad=True, init="bias"))
    return defs


def _norm(prefix: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    defs = [ParamDef(f"{prefix}/weight", (spec.hidden,), unit, sequence_parallel_grad=True, init="norm_weight")]
    if spec.norm_bias:
        defs.append(ParamDef(f"{prefix}/bias", (spec.hidden,), unit, sequence_parallel_grad=True, init="bias"))
    return defs


def _mlp(prefix: str, unit: str, spec: TransformerSpec, ffn: int) -> list[ParamDef]:
    h, bias = spec.hidden, spec.mlp_bias
    defs = _linear(f"{prefix}/in", unit, h, ffn, bias, "column")
    if spec.gated_mlp:
        defs += _linear(f"{prefix}/gate", unit, h, ffn, bias, "column")
    return defs + _linear(f"{prefix}/out", unit, ffn, h, bias, "row")


def _experts(prefix: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    moe, h = spec.moe, spec.hidden
    E, f = moe.num_experts, moe.expert_ffn_hidden
    names = ["in", "gate"] if spec.gated_mlp else ["in"]
    defs = []
    for name in names:  # column-parallel inside each expert
        defs.append(ParamDef(f"{prefix}/{name}/weight", (E, h, f), unit, tp_dim=2, ep_dim=0))
        if spec.mlp_bias:
            defs.append(ParamDef(f"{prefix}/{name}/bias", (E, f), unit, tp_dim=1, ep_dim=0, init="bias"))
    defs.append(ParamDef(f"{prefix}/out/weight", (E, f, h), unit, tp_dim=1, ep_dim=0))
    if spec.mlp_bias:
        defs.append(ParamDef(f"{prefix}/out/bias", (E, h), unit, ep_dim=0, init="bias"))
    return defs


def block_param_defs(spec: TransformerSpec, i: int) -> list[ParamDef]:
    """Parameters of block i (attention, norms, dense MLP or MoE)."""
    unit, p = f"layers/{i}", f"layers/{i}"
    h, d = spec.hidden, spec.dim_head
    defs = _norm(f"{p}/attention/norm", unit, spec)
    defs += _linear(f"{p}/attention/q", unit, h, spec.heads * d, spec.qkv_bias, "column")
    defs += _linear(f"{p}/attention/k", unit, h, spec.num_kv_heads * d, spec.qkv_bias, "column")
    defs += _linear(f"{p}/attention/v", unit, h, spec.num_kv_heads * d, spec.qkv_bias, "column")
    defs += _linear(f"{p}/attention/out", unit, spec.heads * d, h, spec.attn_out_bias, "row")
    if spec.num_norms_per_layer == 2:
        defs += _norm(f"{p}/mlp/norm", unit, spec)
    if not spec.is_moe_layer(i):
        return defs + _mlp(f"{p}/mlp", unit, spec, spec.ffn_hidden)
    moe = spec.moe
    defs.append(ParamDef(f"{p}/mlp/router/weight", (h, moe.num_experts), unit, tensor_partial_grad=True))
    if moe.router_bias:
        defs.append(ParamDef(f"{p}/mlp/router/bias", (moe.num_experts,), unit, tensor_partial_grad=True, init="bias"))
    if moe.shared_experts:
        shared_ffn = moe.shared_experts * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden)
        defs += _mlp(f"{p}/mlp/shared", unit, spec, shared_ffn)
    return defs + _experts(f"{p}/mlp/experts", f"{unit}/experts", spec)


def embedding_param_defs(spec: TransformerSpec) -> list[ParamDef]:
    """Token (vocab-parallel), position, token-type embeddings and the embedding norm."""
    defs = [ParamDef("embedding/word/weight", (spec.vocab, spec.hidden), "embedding/word", tp_dim=0)]
    if spec.position == "learned":
        defs.append(ParamDef("embedding/position/weight", (spec.max_positions, spec.hidden), "embedding/extra", sequence_parallel_grad=True))
    if spec.type_vocab:
        defs.append(ParamDef("embedding/type/weight", (spec.type_vocab, spec.hidden), "embedding/extra", sequence_parallel_grad=True))
    if spec.embedding_norm:
        defs += _norm("embedding/norm", "embedding/extra", spec)
    return defs


def head_param_defs(spec: TransformerSpec) -> list[ParamDef]:
    """Final norm and the (untied) output projection to the vocabulary."""
    defs = _norm("head/norm", "head", spec) if spec.final_norm else []
    if not spec.tied_embeddings:
        defs.append(ParamDef("head/lm/weight", (spec.hidden, spec.vocab), "head", tp_dim=1))
    if spec.lm_head_bias:
        defs.append(ParamDef("head/lm/bias", (spec.vocab,), "head", tp_dim=0, init="bias"))
    return defs


def param_defs(spec: TransformerSpec) -> list[ParamDef]:
    """Every parameter of the model in forward order (tied output head not repeated)."""
    defs = embedding_param_defs(spec)
    for i in range(spec.layers):
        defs += block_param_defs(spec, i)
    return defs + head_param_defs(spec)


def init_params(spec: TransformerSpec, rng: np.random.Generator, std: float = 0.2) -> dict[str, np.ndarray]:
    """Every parameter, drawn in `param_defs` order from `rng` (float64).

    Matrices N(0, std); biases N(0, std/2); norm weights 1 + N(0, std/2). Non-zero biases and
    non-unit norm weights make a bias added twice or a missing norm gradient visible."""
    out = {}
    for d in param_defs(spec):
        if d.init == "norm_weight":
            out[d.name] = 1.0 + rng.normal(0.0, std / 2, d.shape)
        elif d.init == "bias":
            out[d.name] = rng.normal(0.0, std / 2, d.shape)
        else:
            out[d.name] = rng.normal(0.0, std, d.shape)
    return out


@dataclass(frozen=True)
class Batch:
    """One global batch: inputs and next-token (or masked-token) labels."""

    tokens: np.ndarray  # (global_batch, seq) int64
    labels: np.ndarray  # (global_batch, seq) int64
    types: np.ndarray | None = None  # (global_batch, seq) token-type ids (BERT segments)

    def rows(self, start: int, stop: int) -> "Batch":
        """Sequences [start, stop)."""
        types = None if self.types is None else self.types[start:stop]
        return Batch(self.tokens[start:stop], self.labels[start:stop], types)


def make_batch(spec: TransformerSpec, training: TrainingSpec, rng: np.random.Generator) -> Batch:
    """Random token ids; labels are the sequence shifted by one (plus one fresh last token)."""
    B, s = training.global_batch, training.seq_len
    stream = rng.integers(0, spec.vocab, size=(B, s + 1))
    types = rng.integers(0, spec.type_vocab, size=(B, s)) if spec.type_vocab else None
    return Batch(stream[:, :-1], stream[:, 1:], types)
