"""HF config mapper of xLSTM (xlstm; transformers 5.24 modeling_xlstm.py without the external
`xlstm` package, the xLSTM 7B architecture, arXiv 2503.13427): every block RMSNorm -> mLSTM
(`specs/mlstm.py`) -> residual, RMSNorm -> SwiGLU FFN of round_up(h ffn_proj_factor, 64) ->
residual; an out_norm (weight only) and a head never tied to the embeddings (whatever
tie_word_embeddings says), its logits soft-capped."""

from __future__ import annotations

import math
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig


def _xlstm(c: HFConfig) -> dict:
    """xLSTMForCausalLM (xLSTMConfig defaults: NX-AI/xLSTM-7b)."""
    hidden = c.integer("hidden_size", None) or c.size("embedding_dim")
    embedding = c.integer("embedding_dim", None) or hidden
    if embedding != hidden:
        raise SpecError(f"{c.source}: embedding_dim: {embedding} differs from hidden_size {hidden} (xLSTMModel "
                        f"feeds the embeddings to the blocks unprojected)")
    layers = c.integer("num_hidden_layers", None) or c.size("num_blocks")
    heads = c.integer("num_heads", 8)
    qk, v = int(hidden * c.number("qk_dim_factor", 0.5)), int(hidden * c.number("v_dim_factor", 1.0))
    if heads < 1 or qk < 1 or v < 1 or qk % heads or v % heads:
        raise SpecError(f"{c.source}: num_heads: {heads} must divide the q/k width {qk} and the v width {v}")
    multiple = c.integer("ffn_round_up_to_multiple_of", 64)
    if multiple < 1:
        raise SpecError(f"{c.source}: ffn_round_up_to_multiple_of: must be >= 1, got {multiple}")
    ffn = math.ceil(hidden * c.number("ffn_proj_factor", 2.667) / multiple) * multiple  # round_up_to_next_multiple_of
    bias = c.flag("use_bias", False)
    return dict(
        layers=layers, hidden=hidden, heads=heads, vocab=c.size("vocab_size"), position="none",
        layer_types=["mlstm"], mlstm=dict(heads=heads, qk_dim=qk, v_dim=v, chunk_size=c.integer("chunk_size", 64),
                                          bias=bias),
        ffn_hidden=ffn, gated_mlp=True, activation="silu", mlp_bias=bias, norm="rmsnorm",
        norm_eps=c.number("norm_eps", 1e-6), final_logit_softcap=c.number("output_logit_soft_cap", 30.0, nullable=True),
        tied_embeddings=False,  # xLSTMForCausalLM declares no _tied_weights_keys: never tied
        max_positions=c.integer("max_inference_chunksize", 16384),
    )


XLSTM_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"xlstm": _xlstm}
