"""HF config mapper of DeepSeek-V3.2 (deepseek_v32; transformers 5.24 modeling_deepseek_v32.py):
DeepSeek-V3's blocks (MLA, dense first blocks, sigmoid-routed experts with groups and a
correction buffer) whose attention reads only the keys DeepSeek Sparse Attention's lightning
indexer picks (`DeepseekV32Indexer`, its parameters counted in each block's attention)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_moe import MOE_MAPPERS, moe_placement


def _deepseek_v32(c: HFConfig) -> dict:
    """DeepseekV32ForCausalLM: block i is MoE where mlp_layer_types[i] is 'sparse' (default: from
    first_k_dense_replace on); every block's MLA has an indexer (index_n_heads x index_head_dim,
    index_topk keys)."""
    if c.integer("q_lora_rank", 1536, nullable=True) is None:
        raise SpecError(f"{c.source}: q_lora_rank: null is not supported by deepseek_v32 (its indexer reads the query latent)")
    fields = MOE_MAPPERS["deepseek_v3"](c)
    fields["mla"] = {**fields["mla"], "indexer": dict(heads=c.integer("index_n_heads", 64),
                                                      head_dim=c.integer("index_head_dim", 128),
                                                      topk=c.integer("index_topk", 2048))}
    kinds = c.texts("mlp_layer_types", None)
    if kinds is not None:
        layers = c.size("num_hidden_layers")
        if len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
            raise SpecError(f"{c.source}: mlp_layer_types: expected {layers} entries of dense / sparse")
        sparse = [i for i, kind in enumerate(kinds) if kind == "sparse"]
        moe = {k: v for k, v in fields["moe"].items() if k not in ("first_dense_layers", "layer_freq", "layers")}
        fields["moe"] = {**moe, **moe_placement(layers, sparse)} if sparse else None
    return fields


DEEPSEEK32_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"deepseek_v32": _deepseek_v32}
