"""HF config mappers of Zamba (zamba) and Zamba2 (zamba2), transformers 5.24 modeling_zamba.py /
modeling_zamba2.py: a stack of Mamba (Zamba: ZambaMambaMixer, multi-head) or Mamba-2 (Zamba2)
blocks, each one RMSNorm and its mixer, no MLP; at the 'hybrid' layers a shared attention + MLP
block (`specs/shared_block.py`) runs first, its output through a per-use Linear(h, h) added to the
Mamba block's input. Embeddings tied to the head by default; transformers 5.24 ties the shared
blocks' copies only then (with tie_word_embeddings false every use builds its own copy, counted
as built)."""

from __future__ import annotations

import math
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig

_NAMES = {"mamba": "mamba", "linear_attention": "mamba", "hybrid": "hybrid"}
"""layers_block_type names (transformers remaps legacy 'mamba' to 'linear_attention')."""


def _block_types(c: HFConfig, default: list[str] | None) -> list[str]:
    """layers_block_type (or its alias layer_types) as 'mamba' / 'hybrid', else the class default."""
    layers = c.size("num_hidden_layers")
    key = "layers_block_type" if c.has("layers_block_type") else "layer_types"
    names = c.texts(key, None)
    if names is None:
        if default is None or len(default) != layers:
            raise SpecError(f"{c.source}: layers_block_type: missing (the config class's default pattern has "
                            f"{len(default or [])} entries, num_hidden_layers is {layers})")
        names = default
    c.check_names(key, names, _NAMES, layers)
    return [_NAMES[name] for name in names]


def _common(c: HFConfig, kinds: list[str], mixer: str, shared: dict, heads: int, kv_heads: int,
            head_dim: int, rotary: bool) -> dict:
    """Fields both share: one norm and one mixer a block, the shared block at the hybrid layers."""
    hybrid = [i for i, kind in enumerate(kinds) if kind == "hybrid"]
    tied = c.flag("tie_word_embeddings", True)  # transformers ties the shared blocks only then
    if hybrid:
        shared = {**shared, "layers": hybrid, "copies": min(shared.get("copies", 1), len(hybrid)), "tied": tied}
    return dict(
        layers=len(kinds), hidden=c.size("hidden_size"), heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        vocab=c.size("vocab_size"), max_positions=c.integer("max_position_embeddings", 4096),
        position="rotary" if rotary else "none", layer_types=[mixer], mlp=False, norm="rmsnorm",
        norm_eps=c.number("rms_norm_eps", 1e-5), shared_block=shared if hybrid else None,
        tied_embeddings=tied, dropout=c.dropout(0.0, "attention_dropout"),
    )


def _attention_sizes(c: HFConfig, heads_default: int, kv_default: int | None) -> tuple[int, int, int, int]:
    """(input width, heads, kv heads, head dim) of the shared attention: it reads 2h."""
    hidden = c.size("hidden_size")
    heads = c.integer("num_attention_heads", heads_default)
    kv = c.integer("num_key_value_heads", kv_default, nullable=True) or heads
    return 2 * hidden, heads, kv, 2 * hidden // heads


def _zamba(c: HFConfig) -> dict:
    """ZambaForCausalLM (ZambaConfig defaults: Zyphra/Zamba-7B-v1)."""
    hidden, layers = c.size("hidden_size"), c.size("num_hidden_layers")
    period, offset = c.integer("attn_layer_period", 6), c.integer("attn_layer_offset", 4)
    if period < 1:
        raise SpecError(f"{c.source}: attn_layer_period: must be >= 1, got {period}")
    default = ["mamba", "mamba", "hybrid"] + ["hybrid" if i % period == offset else "mamba" for i in range(layers - 3)]
    width, heads, kv, head_dim = _attention_sizes(c, 16, 16)
    width = c.integer("attention_hidden_size", None, nullable=True) or width
    head_dim = c.integer("attention_head_dim", None, "head_dim", nullable=True) or head_dim
    rank = c.data.get("mamba_dt_rank", "auto")
    rank = math.ceil(hidden / 16) if rank == "auto" else c.integer("mamba_dt_rank")
    inner = c.integer("mamba_expand", 2) * hidden
    mamba_heads = c.integer("n_mamba_heads", 2)
    if mamba_heads < 1 or inner % mamba_heads:
        raise SpecError(f"{c.source}: n_mamba_heads: {mamba_heads} must divide mamba_expand * hidden_size ({inner})")
    ssm = dict(state_size=c.integer("mamba_d_state", 16), inner=inner, conv_kernel=c.integer("mamba_d_conv", 4),
               dt_rank=rank, proj_bias=c.flag("mamba_proj_bias", False), conv_bias=c.flag("mamba_conv_bias", True),
               heads=mamba_heads)
    shared = dict(input_width=width, heads=heads, kv_heads=kv, head_dim=head_dim,
                  ffn_hidden=c.integer("intermediate_size", 14848))
    return {**_common(c, _block_types(c, default), "mamba", shared, heads, kv, head_dim, rotary=False), "ssm": ssm}


_ZAMBA2_DEFAULT = (["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3
                   + ["hybrid"] + ["mamba"] * 2)
"""Zamba2Config's default layers_block_type (54 blocks, Zyphra/Zamba2-2.7B)."""


def _zamba2(c: HFConfig) -> dict:
    """Zamba2ForCausalLM (Zamba2Config defaults: Zyphra/Zamba2-2.7B); head_dim is always 2h / heads
    and the MLP's gate/up adapters always exist (adapter_rank), q/k/v's with
    use_shared_attention_adapter."""
    hidden = c.size("hidden_size")
    width, heads, kv, head_dim = _attention_sizes(c, 32, None)
    bias = c.flag("add_bias_linear", False)
    inner = int(c.number("mamba_expand", 2) * hidden)
    mamba_heads = c.integer("n_mamba_heads", 8)
    if mamba_heads < 1 or inner % mamba_heads:
        raise SpecError(f"{c.source}: n_mamba_heads: {mamba_heads} must divide mamba_expand * hidden_size ({inner})")
    mamba2 = dict(heads=mamba_heads, inner=inner, state_size=c.integer("mamba_d_state", 64),
                  groups=c.integer("mamba_ngroups", 1), conv_kernel=c.integer("mamba_d_conv", 4),
                  chunk_size=c.integer("chunk_size", 256), proj_bias=bias, conv_bias=True)  # Conv1d(bias=True)
    shared = dict(input_width=width, heads=heads, kv_heads=kv, head_dim=head_dim,
                  ffn_hidden=c.integer("intermediate_size", None, nullable=True) or 4 * hidden, mlp_bias=bias,
                  copies=c.integer("num_mem_blocks", 1), adapter_rank=c.integer("adapter_rank", 128),
                  attention_adapters=c.flag("use_shared_attention_adapter", False))
    fields = _common(c, _block_types(c, _ZAMBA2_DEFAULT), "mamba2", shared, heads, kv, head_dim,
                     rotary=c.flag("use_mem_rope", False))
    return {**fields, "mamba2": mamba2}


ZAMBA_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"zamba": _zamba, "zamba2": _zamba2}
