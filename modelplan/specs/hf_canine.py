"""HF config mapper of CANINE (`canine`, Clark et al. 2022; transformers 5.24 modeling_canine.py),
counted exactly, its downsampled deep stack priced at the character length.

CanineModel: CanineEmbeddings (num_hash_functions hash tables of num_hash_buckets x h /
num_hash_functions, together a token table of num_hash_buckets rows; char_position_embeddings of
num_hash_buckets rows; token types; a LayerNorm), then BERT's post-LN blocks: the one-block
initial character encoder (local attention), num_hidden_layers deep blocks and the one-block final
character encoder; between them CharactersToMolecules (Conv1d(h, h, downsampling_rate, stride
downsampling_rate) and a LayerNorm) and ConvProjection (Conv1d(2h, h, upsampling_kernel_size) and
a LayerNorm), `side` groups; CaninePooler under every head class. Approximation: the deep blocks
run on 1 / downsampling_rate of the characters and the first block attends locally, which the
FLOPs, priced at the full length in every block, do not follow: they overcount the deep stack.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_side import layer_norm, linear
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_encoder_fields import pooled_always, with_side
from modelplan.specs.hf_gpt import GPT_MAPPERS


def _canine(c: HFConfig) -> dict:
    """CanineModel (module docstring); the conv to molecules runs once per downsampling_rate characters."""
    h, hashes, buckets = c.size("hidden_size"), c.size("num_hash_functions"), c.size("num_hash_buckets")
    if h % hashes:
        raise SpecError(f"{c.source}: num_hash_functions: {hashes} does not divide hidden_size ({h}) "
                        "(hash tables narrower than h / num_hash_functions are not modelled)")
    rate, kernel = c.size("downsampling_rate"), c.size("upsampling_kernel_size")
    # the hash tables as a token table and char_position_embeddings, both of num_hash_buckets rows
    tables = {"type_vocab_size": 16, **c.data, "vocab_size": buckets, "max_position_embeddings": buckets}
    bert = GPT_MAPPERS["bert"](HFConfig(tables, c.source, c.path, c.defaults))
    fields = {**bert, "layers": c.size("num_hidden_layers") + 2}
    down = {**linear("chars_to_molecules/conv", h * rate, h), "macs": h * h}  # stride rate: h x h a character
    return with_side(fields, embedding=[down, layer_norm("chars_to_molecules/norm", h),
                                        linear("projection/conv", 2 * h * kernel, h), layer_norm("projection/norm", h)])


CANINE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"canine": _canine}
CANINE_HEADS: dict[str, Callable[..., dict]] = {"canine": pooled_always}
