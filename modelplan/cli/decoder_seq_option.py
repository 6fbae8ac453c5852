"""`--decoder-seq` of `modelplan count` and `modelplan plan`: an encoder-decoder's target tokens
per sequence (`TrainingSpec.decoder_seq_len`; the encoder's are --seq), priced by the planner on
the decoder blocks, their cross-attention and the head (`modelplan.plan.stack_lengths`).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from modelplan.specs.limits import MAX_SEQ

DecoderSeqOpt = Annotated[Optional[int], typer.Option(
    "--decoder-seq", max=MAX_SEQ,
    help="Encoder-decoder models (T5, BART, Whisper): target tokens per sequence (default: --seq).")]


def check_decoder_seq(spec, training) -> None:
    """A one-line error where --decoder-seq does not apply (a model with one stack) or a learned
    position table is shorter than either length (`count.seq2seq.check_lengths`)."""
    from modelplan.count.flops import check_seq_len
    from modelplan.errors import SpecError

    if training.decoder_seq_len is None:
        return
    arch = getattr(spec, "arch", None)
    if arch != "encoder_decoder":
        raise SpecError(f"--decoder-seq: {getattr(spec, 'name', 'the model')} is not an encoder-decoder "
                        f"({arch or getattr(spec, 'kind', 'network')}): it runs one sequence of --seq tokens")
    check_seq_len(spec, training.seq_len, training.decoder_seq_len)
