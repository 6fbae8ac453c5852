"""The parameter table of a transformer spec: names, global shapes, how each one is split, and
which communication unit (ZeRO/DDP bucket) it lives in; plus seeded initialisation and data.

Names are slash paths: `embedding/word/weight`, `layers/3/attention/q/weight`,
`layers/3/mlp/experts/in/weight`, `head/lm/weight`. Units group the parameters one collective
moves together: `embedding/word`, `embedding/extra`, `layers/<i>` (dense part of block i),
`layers/<i>/experts` (its routed experts), `head` (final norm, output projection) and, with
multi-token prediction, `mtp/<k>` and `mtp/<k>/experts` (module k, on the last stage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from modelplan.count.blocks import Block, block_of, mtp_block
from modelplan.execute.residual import norm_slots
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
    """A norm's weight (and bias) over the hidden features; none when non-affine. On the residual
    stream its gradient is a sum over sequence shards under sequence parallelism."""
    if not spec.norm_affine:
        return []
    defs = [ParamDef(f"{prefix}/weight", (spec.hidden,), unit, sequence_parallel_grad=True, init="norm_weight")]
    if spec.norm_bias:
        defs.append(ParamDef(f"{prefix}/bias", (spec.hidden,), unit, sequence_parallel_grad=True, init="bias"))
    return defs


def _mlp(prefix: str, unit: str, spec: TransformerSpec, ffn: int, bias: bool | None = None) -> list[ParamDef]:
    h, bias = spec.hidden, spec.mlp_bias if bias is None else bias
    defs = _linear(f"{prefix}/in", unit, h, ffn, bias, "column")
    if spec.gated_mlp:
        defs += _linear(f"{prefix}/gate", unit, h, ffn, bias, "column")
    return defs + _linear(f"{prefix}/out", unit, ffn, h, bias, "row")


def expert_bias(spec: TransformerSpec) -> bool:
    """Whether routed experts have biases (moe.expert_bias, else mlp_bias)."""
    return spec.mlp_bias if spec.moe.expert_bias is None else spec.moe.expert_bias


def _experts(prefix: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    moe, h, bias = spec.moe, spec.hidden, expert_bias(spec)
    E, f = moe.num_experts, moe.expert_ffn_hidden
    names = ["in", "gate"] if spec.gated_mlp else ["in"]
    defs = []
    for name in names:  # column-parallel inside each expert
        defs.append(ParamDef(f"{prefix}/{name}/weight", (E, h, f), unit, tp_dim=2, ep_dim=0))
        if bias:
            defs.append(ParamDef(f"{prefix}/{name}/bias", (E, f), unit, tp_dim=1, ep_dim=0, init="bias"))
    defs.append(ParamDef(f"{prefix}/out/weight", (E, f, h), unit, tp_dim=1, ep_dim=0))
    if bias:
        defs.append(ParamDef(f"{prefix}/out/bias", (E, h), unit, ep_dim=0, init="bias"))
    return defs


def _replicated(name: str, shape: tuple[int, ...], unit: str, init: Init = "normal") -> ParamDef:
    """Replicated over tp inside a tensor-parallel region: each rank's gradient is its local
    heads' (or local shards') share, all-reduced over tp."""
    return ParamDef(name, shape, unit, tensor_partial_grad=True, init=init)


def _qk_norms(p: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    """q/k norm weights: over all heads (split with the heads), per head, or one head_dim vector
    shared by the heads (replicated: its gradient sums the local heads)."""
    if not spec.qk_norm or spec.qk_norm_weight == "none" or not spec.norm_affine:
        return []
    d, defs = spec.dim_head, []
    for name, heads in (("q_norm", spec.heads), ("k_norm", spec.num_kv_heads)):
        kinds = ["weight"] + (["bias"] if spec.norm_bias else [])
        for kind in kinds:
            init = "norm_weight" if kind == "weight" else "bias"
            full = f"{p}/attention/{name}/{kind}"
            if spec.qk_norm_scope == "all_heads":
                defs.append(ParamDef(full, (heads * d,), unit, tp_dim=0, init=init))
            elif spec.qk_norm_weight == "per_head":
                defs.append(ParamDef(full, (heads, d), unit, tp_dim=0, init=init))
            else:
                defs.append(_replicated(full, (d,), unit, init))
    return defs


def _mla(p: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    """MLA (layers/mla.py): heads split over tp (q or q_b, kv_b columns; out rows), latents replicated."""
    mla, h, a = spec.mla, spec.hidden, spec.heads
    pa = f"{p}/attention"
    defs: list[ParamDef] = []
    if mla.q_lora_rank is None:
        defs += _linear(f"{pa}/q", unit, h, a * mla.qk_head_dim, False, "column")
    else:
        r = mla.q_lora_rank
        defs.append(_replicated(f"{pa}/q_a/weight", (h, r), unit))
        if spec.qkv_bias:
            defs.append(_replicated(f"{pa}/q_a/bias", (r,), unit, "bias"))
        defs.append(_replicated(f"{pa}/q_a_norm/weight", (r,), unit, "norm_weight"))
        defs += _linear(f"{pa}/q_b", unit, r, a * mla.qk_head_dim, False, "column")
    kv_a = mla.kv_lora_rank + mla.qk_rope_head_dim
    defs.append(_replicated(f"{pa}/kv_a/weight", (h, kv_a), unit))
    if spec.qkv_bias:
        defs.append(_replicated(f"{pa}/kv_a/bias", (kv_a,), unit, "bias"))
    defs.append(_replicated(f"{pa}/kv_a_norm/weight", (mla.kv_lora_rank,), unit, "norm_weight"))
    defs += _linear(f"{pa}/kv_b", unit, mla.kv_lora_rank, a * (mla.qk_nope_head_dim + mla.v_head_dim), False, "column")
    return defs + _linear(f"{pa}/out", unit, a * mla.v_head_dim, h, spec.attn_out_bias, "row")


def _attention(p: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    """q/k/v attention: column-parallel q, k, v, row-parallel out; q/k norms; sinks per head."""
    if spec.mla is not None:
        return _mla(p, unit, spec)
    h, d = spec.hidden, spec.dim_head
    defs = _linear(f"{p}/attention/q", unit, h, spec.heads * d, spec.qkv_bias, "column")
    defs += _linear(f"{p}/attention/k", unit, h, spec.num_kv_heads * d, spec.qkv_bias, "column")
    defs += _linear(f"{p}/attention/v", unit, h, spec.num_kv_heads * d, spec.qkv_bias, "column")
    if spec.attention_output_gate:  # Qwen3-Next: q_proj's second half, column-parallel with its heads
        defs += _linear(f"{p}/attention/gate", unit, h, spec.heads * d, spec.qkv_bias, "column")
    defs += _qk_norms(p, unit, spec)
    if spec.attention_sinks:
        defs.append(ParamDef(f"{p}/attention/sinks", (spec.heads,), unit, tp_dim=0, init="bias"))
    return defs + _linear(f"{p}/attention/out", unit, spec.heads * d, h, spec.attn_out_bias, "row")


def _mamba(p: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    """The Mamba mixer (layers/mamba.py): channels split over tp, x_proj and out_proj by their
    input channels; Jamba's dt/B/C norms replicated (applied after x_proj's AllReduce)."""
    ssm, h, pm = spec.ssm, spec.hidden, f"{p}/mamba"
    d, n, r = ssm.inner, ssm.state_size, ssm.dt_rank
    defs = _linear(f"{pm}/in_x", unit, h, d, ssm.proj_bias, "column")
    defs += _linear(f"{pm}/in_z", unit, h, d, ssm.proj_bias, "column")
    defs.append(ParamDef(f"{pm}/conv/weight", (d, ssm.conv_kernel), unit, tp_dim=0))
    if ssm.conv_bias:
        defs.append(ParamDef(f"{pm}/conv/bias", (d,), unit, tp_dim=0, init="bias"))
    defs.append(ParamDef(f"{pm}/x_proj/weight", (d, r + 2 * n), unit, tp_dim=0))
    if ssm.bc_dt_norm:
        defs += [ParamDef(f"{pm}/{name}_norm/weight", (w,), unit, init="norm_weight")
                 for name, w in (("dt", r), ("b", n), ("c", n))]
    defs += _linear(f"{pm}/dt_proj", unit, r, d, True, "column")
    defs.append(ParamDef(f"{pm}/A_log", (d, n), unit, tp_dim=0))
    defs.append(ParamDef(f"{pm}/D", (d,), unit, tp_dim=0, init="norm_weight"))
    return defs + _linear(f"{pm}/out", unit, d, h, ssm.proj_bias, "row")


def _mamba2(p: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    """The Mamba-2 mixer (layers/mamba2.py): in_proj's parts column-parallel and every per-head
    or per-group piece split over tp (Megatron-core MambaMixer), out_proj row-parallel."""
    m, h, pm = spec.mamba2, spec.hidden, f"{p}/mamba2"
    gn = m.groups * m.state_size
    defs: list[ParamDef] = []
    for name, width in (("z", m.inner), ("x", m.inner), ("B", gn), ("C", gn), ("dt", m.heads)):
        defs += _linear(f"{pm}/in_{name}", unit, h, width, m.proj_bias, "column")
    for name, width in (("x", m.inner), ("B", gn), ("C", gn)):
        defs.append(ParamDef(f"{pm}/conv_{name}/weight", (width, m.conv_kernel), unit, tp_dim=0))
        if m.conv_bias:
            defs.append(ParamDef(f"{pm}/conv_{name}/bias", (width,), unit, tp_dim=0, init="bias"))
    defs.append(ParamDef(f"{pm}/dt_bias", (m.heads,), unit, tp_dim=0, init="bias"))
    defs.append(ParamDef(f"{pm}/A_log", (m.heads,), unit, tp_dim=0))
    defs.append(ParamDef(f"{pm}/D", (m.heads,), unit, tp_dim=0, init="norm_weight"))
    if m.gated_norm:
        defs.append(ParamDef(f"{pm}/gate_norm/weight", (m.inner,), unit, tp_dim=0, init="norm_weight"))
    return defs + _linear(f"{pm}/out", unit, m.inner, h, m.has_out_bias, "row")


def _deltanet(p: str, unit: str, spec: TransformerSpec) -> list[ParamDef]:
    """The gated DeltaNet (layers/deltanet.py): q, k, v, z, b, a column-parallel by heads (key heads
    and their value heads on one rank), conv and per-head pieces split with them, out_proj
    row-parallel; the norm weight shared by the heads is replicated (its gradient a partial sum)."""
    g, h, pm = spec.deltanet, spec.hidden, f"{p}/gated_deltanet"
    defs: list[ParamDef] = []
    widths = {"q": g.key_dim, "k": g.key_dim, "v": g.value_dim, "z": g.value_dim, "b": g.value_heads,
              "a": g.value_heads}
    for name, width in widths.items():
        defs += _linear(f"{pm}/in_{name}", unit, h, width, False, "column")
    for name in "qkv":
        defs.append(ParamDef(f"{pm}/conv_{name}/weight", (widths[name], g.conv_kernel), unit, tp_dim=0))
    defs.append(ParamDef(f"{pm}/dt_bias", (g.value_heads,), unit, tp_dim=0, init="bias"))
    defs.append(ParamDef(f"{pm}/A_log", (g.value_heads,), unit, tp_dim=0))
    defs.append(ParamDef(f"{pm}/gate_norm/weight", (g.value_head_dim,), unit, tensor_partial_grad=True,
                         init="norm_weight"))
    return defs + _linear(f"{pm}/out", unit, g.value_dim, h, False, "row")


def _mlp_block(p: str, unit: str, spec: TransformerSpec, moe_layer: bool) -> list[ParamDef]:
    """Dense MLP, or router, shared experts (+ gate) and routed experts (their own unit)."""
    if not moe_layer:
        return _mlp(f"{p}/mlp", unit, spec, spec.ffn_hidden)
    moe, h = spec.moe, spec.hidden
    defs = [_replicated(f"{p}/mlp/router/weight", (h, moe.num_experts), unit)]
    if moe.router_bias:
        defs.append(_replicated(f"{p}/mlp/router/bias", (moe.num_experts,), unit, "bias"))
    if moe.shared_experts:
        shared_ffn = moe.shared_experts * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden)
        defs += _mlp(f"{p}/mlp/shared", unit, spec, shared_ffn)
        if moe.shared_expert_gate:
            defs.append(_replicated(f"{p}/mlp/shared_gate/weight", (h, 1), unit))
    return defs + _experts(f"{p}/mlp/experts", f"{unit}/experts", spec)


def _block_defs(spec: TransformerSpec, block: Block, p: str, unit: str) -> list[ParamDef]:
    """Parameters of one block of kind `block` under prefix p, in forward order."""
    defs: list[ParamDef] = []
    for name, slot in norm_slots(spec, block).items():
        if slot.pre or slot.after:
            defs += _norm(f"{p}/{name}/norm", unit, spec)
        if name == "attention":
            defs += _attention(p, unit, spec)
        elif name == "mamba":
            defs += _mamba(p, unit, spec)
        elif name == "mamba2":
            defs += _mamba2(p, unit, spec)
        elif name == "gated_deltanet":
            defs += _deltanet(p, unit, spec)
        elif name == "mlp":
            defs += _mlp_block(p, unit, spec, block.moe)
        if slot.post:
            defs += _norm(f"{p}/{name}/post_norm", unit, spec)
    return defs


def block_param_defs(spec: TransformerSpec, i: int) -> list[ParamDef]:
    """Parameters of block i (norms, attention, dense MLP or MoE)."""
    return _block_defs(spec, block_of(spec, i), f"layers/{i}", f"layers/{i}")


def mtp_param_defs(spec: TransformerSpec, k: int) -> list[ParamDef]:
    """Multi-token prediction module k (DeepSeek-V3 sec. 2.2; HF names enorm, hnorm, eh_proj,
    the block, shared_head.norm): norms of the embedding and of the previous depth's hidden
    state, the replicated projection (2h -> h) of their concatenation, one block and its head norm."""
    p = f"mtp/{k}"
    defs = _norm(f"{p}/embed_norm", p, spec) + _norm(f"{p}/hidden_norm", p, spec)
    defs.append(ParamDef(f"{p}/proj/weight", (2 * spec.hidden, spec.hidden), p, sequence_parallel_grad=True))
    defs += _block_defs(spec, mtp_block(spec), f"{p}/block", p)
    return defs + _norm(f"{p}/head_norm", p, spec)


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
    defs += head_param_defs(spec)
    for k in range(spec.mtp_layers):
        defs += mtp_param_defs(spec, k)
    return defs


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

    def positions(self, start: int, stop: int) -> "Batch":
        """Positions [start, stop) of every sequence (a context-parallel rank's slice)."""
        types = None if self.types is None else self.types[:, start:stop]
        return Batch(self.tokens[:, start:stop], self.labels[:, start:stop], types)


def make_batch(spec: TransformerSpec, training: TrainingSpec, rng: np.random.Generator) -> Batch:
    """Random token ids; labels are the sequence shifted by one (plus one fresh last token)."""
    B, s = training.global_batch, training.seq_len
    stream = rng.integers(0, spec.vocab, size=(B, s + 1))
    types = rng.integers(0, spec.type_vocab, size=(B, s)) if spec.type_vocab else None
    return Batch(stream[:, :-1], stream[:, 1:], types)


def mtp_inputs(tokens: np.ndarray, labels: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input ids, labels, loss mask) of MTP module `depth` (1-based): position i reads token
    i + depth and predicts token i + depth + 1; the last `depth` positions wrap around and are
    masked out of the loss (Megatron-core's roll of ids, labels and loss mask)."""
    mask = np.ones(tokens.shape, dtype=bool)
    mask[:, tokens.shape[1] - depth:] = False
    return np.roll(tokens, -depth, axis=1), np.roll(labels, -depth, axis=1), mask
