"""The linear layers of a transformer, named as its HuggingFace implementation names them.

LoRA targets (`q_proj`, `c_attn`, ...) and weight quantization (bitsandbytes, fp8, int4) act on
these modules, so both count from one table: for every linear module of a block, its HF
attribute name, `in_features`, `out_features` and how many the model has. The naming follows a
`layout`, one per family of HF implementations that share module names and shapes:

    llama   LlamaAttention / LlamaMLP (also Mistral, Qwen2, Gemma): q_proj, k_proj, v_proj,
            o_proj, gate_proj, up_proj, down_proj
    gpt2    GPT2Attention / GPT2MLP (Conv1D): c_attn (fused q, k, v), c_proj, c_fc, c_proj
    opt     OPTAttention / OPTDecoderLayer: q_proj, k_proj, v_proj, out_proj, fc1, fc2
            (+ project_in / project_out when embedding_dim differs from hidden)
    phi     PhiAttention / PhiMLP: q_proj, k_proj, v_proj, dense, fc1, fc2
    neox    GPTNeoX / Falcon / BLOOM: query_key_value (fused), dense, dense_h_to_4h, dense_4h_to_h

A path is the module's name under its block (`attention/c_proj` and `mlp/c_proj` are both
`c_proj` to PEFT, which matches a target against the last part of the dotted module name).
`lm_head` (the output projection, tied or not) is listed for every layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from modelplan.errors import SpecError
from modelplan.specs.family import family_of

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec

Layout = Literal["llama", "gpt2", "opt", "phi", "neox"]
LAYOUTS: tuple[Layout, ...] = ("llama", "gpt2", "opt", "phi", "neox")


@dataclass(frozen=True)
class Linear:
    """One linear module of the model, `count` times (once per block, or once for the model)."""

    path: str
    """Slash path: `attention/q_proj`, `mlp/down_proj`, `head/lm_head`, `embedding/project_in`."""
    in_features: int
    out_features: int
    count: int
    """How many modules of this path the model has (blocks that hold it)."""
    in_block: bool = True
    """Inside a transformer block (quantized by bitsandbytes/GPTQ); False for lm_head / OPT projections."""

    @property
    def name(self) -> str:
        """The HF attribute name PEFT matches targets against (the path's last part)."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def weight_numel(self) -> int:
        """Elements of one module's weight matrix."""
        return self.in_features * self.out_features


def _attention(spec: "TransformerSpec", layout: Layout) -> list[tuple[str, int, int]]:
    """(name, in, out) of one block's attention projections."""
    h, q, kv = spec.hidden, spec.q_width, spec.kv_width
    out_name = {"llama": "o_proj", "gpt2": "c_proj", "opt": "out_proj", "phi": "dense", "neox": "dense"}[layout]
    if layout in ("gpt2", "neox"):  # one fused projection to q, k and v (GPT-2 c_attn, NeoX query_key_value)
        qkv = [("c_attn" if layout == "gpt2" else "query_key_value", h, q + 2 * kv)]
    else:
        qkv = [("q_proj", h, q), ("k_proj", h, kv), ("v_proj", h, kv)]
    return qkv + [(out_name, q, h)]


def _mlp(spec: "TransformerSpec", layout: Layout, ffn_hidden: int) -> list[tuple[str, int, int]]:
    """(name, in, out) of one dense MLP of inner width `ffn_hidden`."""
    h = spec.hidden
    if layout == "llama":
        return [("gate_proj", h, ffn_hidden), ("up_proj", h, ffn_hidden), ("down_proj", ffn_hidden, h)]
    up, down = {"gpt2": ("c_fc", "c_proj"), "opt": ("fc1", "fc2"), "phi": ("fc1", "fc2"),
                "neox": ("dense_h_to_4h", "dense_4h_to_h")}[layout]
    return [(up, h, ffn_hidden), (down, ffn_hidden, h)]


def check_layout(spec: "TransformerSpec", layout: Layout) -> None:
    """A layout fits the spec: llama names a gated MLP, the others a plain one."""
    if not family_of(spec).blocks:
        raise SpecError(f"linear-module layouts are for transformer specs, not '{spec.kind}'")
    if layout not in LAYOUTS:
        raise SpecError(f"layout: unknown '{layout}' (choose from {', '.join(LAYOUTS)})")
    if (layout == "llama") != spec.gated_mlp:
        kind = "a gated (SwiGLU) MLP" if layout == "llama" else "a plain (non-gated) MLP"
        raise SpecError(f"layout '{layout}' names {kind}, but {spec.name} has gated_mlp = {spec.gated_mlp}")


def linear_modules(spec: "TransformerSpec", layout: Layout) -> list[Linear]:
    """Every linear module of the model under `layout`, blocks first, in module order.

    MoE blocks list their experts as `mlp/experts/<name>` (count = blocks x experts), the router
    as `mlp/router` and shared experts as `mlp/shared_experts/<name>`.
    """
    check_layout(spec, layout)
    rows: dict[str, list[int]] = {}

    def add(path: str, fan_in: int, fan_out: int, times: int = 1) -> None:
        row = rows.setdefault(path, [fan_in, fan_out, 0])
        row[2] += times

    for index in range(spec.layers):
        for name, fan_in, fan_out in _attention(spec, layout):
            add(f"attention/{name}", fan_in, fan_out)
        moe = spec.moe
        if moe is not None and spec.is_moe_layer(index):
            add("mlp/router", spec.hidden, moe.num_experts + moe.zero_experts)  # Mixtral `gate`: nn.Linear(h, experts)
            for name, fan_in, fan_out in _mlp(spec, layout, moe.expert_ffn_hidden):
                add(f"mlp/experts/{name}", fan_in, fan_out, moe.num_experts)
            shared = moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden
            for name, fan_in, fan_out in (_mlp(spec, layout, shared) if moe.shared_experts else []):
                add(f"mlp/shared_experts/{name}", fan_in, fan_out, moe.shared_experts)
            if moe.shared_expert_gate:
                add("mlp/shared_expert_gate", spec.hidden, 1)  # Qwen2-MoE: nn.Linear(h, 1)
        else:
            for name, fan_in, fan_out in _mlp(spec, layout, spec.ffn_hidden):
                add(f"mlp/{name}", fan_in, fan_out)
    out = [Linear(path, fan_in, fan_out, times) for path, (fan_in, fan_out, times) in rows.items()]
    e = spec.embed_dim
    if e != spec.hidden:  # OPT-350m project_in / project_out: Linear(e, h) and Linear(h, e), no bias
        out.insert(0, Linear("embedding/project_in", e, spec.hidden, 1, in_block=False))
        out.append(Linear("head/project_out", spec.hidden, e, 1, in_block=False))
    if spec.lm_head:  # lm_head: Linear(embed_dim, vocab) even when its weight is the tied embedding
        out.append(Linear("head/lm_head", e, spec.vocab, 1, in_block=False))
    return out
