"""HF config mapper of PEGASUS-X (Phang et al. 2022, arXiv 2208.04347; transformers 5.24
modeling_pegasus_x.py PegasusXForConditionalGeneration): Pegasus' pre-LN stacks with final
layer_norms and no embedding norms, bias-free q / k / v / out (PegasusXAttention: bias=False),
biased fc1 / fc2 and LayerNorms, sinusoidal positions as a buffer (no parameters), one `shared`
table tied to both stacks and the head; the encoder adds embed_global (num_global_tokens x
d_model) and a global_self_attn_layer_norm in every block (`extras.side`).

Its staggered block-local attention is priced per local query at block_size local keys plus the
num_global_tokens global ones (`seq2seq.encoder_window`); the global tokens' own rows (their
projections, MLP and full attention over the sequence: num_global_tokens rows a sequence) are
not priced."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_side import layer_norm, table
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18encdec import _stacks, _untied_tables


def _pegasus_x(c: HFConfig) -> dict:
    """PegasusXForConditionalGeneration / PegasusXModel (module docstring)."""
    names = c.texts("architectures", None)
    if names and names[0] not in ("PegasusXForConditionalGeneration", "PegasusXModel"):
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: "
                        f"PegasusXForConditionalGeneration, PegasusXModel)")
    fields = _stacks(c, untied=True)
    h, g = fields["hidden"], c.divisor("num_global_tokens")
    fields.update(max_positions=c.size("max_position_embeddings"), position="none", norm_placement="pre",
                  embedding_norm=False, final_norm=True, qkv_bias=False, attn_out_bias=False,
                  seq2seq=dict(encoder_window=c.divisor("block_size") + g, own_token_tables=_untied_tables(c)),
                  extras=dict(side=dict(embedding=[table("embed_global", g, h)],
                                        encoder_block=[layer_norm("global_self_attn_layer_norm", h)])))
    return fields


PEGASUS_X_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"pegasus_x": _pegasus_x}
