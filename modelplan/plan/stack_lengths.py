"""Tokens per sequence each part of the step runs on: an encoder-decoder's encoder blocks on the
source length (`TrainingSpec.seq_len`), its decoder blocks, their cross-attention queries and the
head + loss on the target length (`TrainingSpec.decoder_seq_len`, default seq_len), the
cross-attention keys and values over the encoder's tokens; every other model runs all parts on
seq_len. The same split `count/flops.py` and `count/memory.py` count (Raffel et al. 2020 sec. 3.1:
the decoder attends to the encoder's output), so the planner prices what count counts.
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.count.blocks import Block
from modelplan.count.flops import decoder_seq_len
from modelplan.plan.problems import Problem, Reason
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


class StackLengths(NamedTuple):
    """Tokens per sequence of the two stacks (equal for a model with one stack)."""

    source: int
    """Encoder blocks, the input embedding, the keys and values a cross-attention reads."""
    target: int
    """Decoder blocks of an encoder-decoder and the head + loss."""

    def of_block(self, block: Block | None) -> int:
        """Tokens per sequence block `block` runs on: the target's for a decoder block (one that
        cross-attends), else the source's (None: the model's default block, an encoder's)."""
        return self.target if block is not None and block.cross else self.source

    @property
    def differ(self) -> bool:
        """The stacks run on different lengths."""
        return self.source != self.target


def stack_lengths(spec: TransformerSpec, training: TrainingSpec) -> StackLengths:
    """(source, target) tokens per sequence: the target is the decoder's for an encoder-decoder
    (`count.flops.decoder_seq_len`), else seq_len."""
    return StackLengths(training.seq_len, decoder_seq_len(spec, training) or training.seq_len)


def cp_length_problem(lengths: StackLengths, cp: int) -> Problem | None:
    """Context parallelism splits every stack's sequence into cp shards: cp must divide both
    lengths (one message naming the length it does not divide)."""
    if lengths.source % cp:
        return Problem(Reason.CP_SEQ, f"cp ({cp}) must divide seq_len ({lengths.source})")
    if lengths.target % cp:
        return Problem(Reason.CP_SEQ, f"cp ({cp}) must divide decoder_seq_len ({lengths.target})")
    return None
