"""HF config mappers of further text encoder-decoders (transformers 5.24): BigBird-Pegasus
(modeling_bigbird_pegasus.py). Shares the BART family's stack reading (hf_n18encdec.py)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18encdec import _alone, _decoder_alone, _stacks, _untied_tables
from modelplan.specs.hf_prophetnet import PROPHETNET_MAPPERS


def _bigbird_pegasus(c: HFConfig) -> dict:
    """BigBirdPegasusForConditionalGeneration: Pegasus' pre-LN stacks with learned position tables
    (no offset) and a final `layernorm_embedding` per stack (applied after the last block),
    q / k / v / out biases only with use_bias (fc1 / fc2 and the norms always biased), tied head.
    attention_type block_sparse (Zaheer et al. 2020, sec. 2: per query block 3 sliding, 2 global
    and num_random_blocks random key blocks) prices each encoder query at (5 + r) x block_size keys,
    as big_bird (hf_n18small.py); the decoder attends in full."""
    bias = c.flag("use_bias", False)
    kind = c.text("attention_type", "block_sparse")
    if kind not in ("block_sparse", "original_full"):
        raise SpecError(f"{c.source}: attention_type: unsupported '{kind}' (block_sparse, original_full)")
    window = (5 + c.integer("num_random_blocks", 3)) * c.integer("block_size", 64) if kind == "block_sparse" else None
    fields = dict(
        **_stacks(c, untied=True), max_positions=c.size("max_position_embeddings"), norm_placement="pre",
        embedding_norm=False, final_norm=True, seq2seq=dict(encoder_window=window, own_token_tables=_untied_tables(c)),
    )
    fields.update(qkv_bias=bias, attn_out_bias=bias, activation=c.activation("gelu_new", "activation_function"))
    if _decoder_alone(c):  # BigBirdPegasusForCausalLM: the decoder alone (its encoder_attn kept), a head it never ties
        return {**_alone({**fields, "seq2seq": {}}), "tied_embeddings": False}
    return fields


ENCDEC_MORE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"bigbird_pegasus": _bigbird_pegasus, **PROPHETNET_MAPPERS}
