"""Parameter groups beside an encoder's block stack (`ExtrasSpec.side`): the tables, linears and
norms an HF encoder adds to the modules the spec's other fields state, each with the multiply-adds
it runs per token (transformers 5.24 modeling files):

- at the input (`embedding`): LayoutLM / LayoutLMv3 / LiLT's 2-D position tables (LayoutLMv3's
  image side, LiLT's box projection), MarkupLM's XPath tables and MLP, LUKE's entity tables,
  MobileBERT's trigram projection;
- in every block (`block`): GTE's down_proj bias, ESM C's norm biases, Nystromformer / YOSO's
  depthwise value conv, ConvBERT's span-based dynamic convolution, SqueezeBERT's grouped q / k / v
  convs, MobileBERT's bottleneck-width attention and feed-forwards, LiLT's layout stream, LUKE's
  entity-aware queries;
- in the head (`head`): BigBird's classification dense and question-answering MLP, Ultrabert's
  prediction head, LUKE's entity predictions and entity classifiers.

Their GEMMs are counted as 2 FLOPs a multiply-add (count/encoder_side.py); the planner keeps their
parameters replicated and does not price their kernels (`extras.side`, plan/extras.py UNPRICED)."""

from __future__ import annotations

from pydantic import Field

from modelplan.specs.base import Spec


class SideOp(Spec):
    """One parameter group and the forward work it does per token."""

    name: str = Field(min_length=1)
    """Breakdown key under `embedding/side/` or a block's `side/`."""
    params: int = Field(0, ge=0)
    """Parameter elements (all trainable)."""
    macs: int = Field(0, ge=0)
    """Forward multiply-adds per token that do not depend on the sequence length (a linear's in x out)."""
    macs_per_key: int = Field(0, ge=0)
    """Forward multiply-adds per token per key of its sequence (an attention's scores and context)."""
    kept: int = Field(0, ge=0)
    """Activation elements per token kept for backward (a linear's input)."""
    per_sequence: bool = False
    """Runs on one row a sequence (a classification head's dense on the first token), not every token."""


class EncoderSideSpec(Spec):
    """The side groups of the input side and of every block."""

    embedding: list[SideOp] = Field(default_factory=list)
    """Run once per token before the first block."""
    block: list[SideOp] = Field(default_factory=list)
    """Held and run by every block."""
    encoder_block: list[SideOp] = Field(default_factory=list)
    """Held and run by every encoder block of an encoder-decoder only (PegasusX's
    global_self_attn_layer_norm)."""
    decoder_block: list[SideOp] = Field(default_factory=list)
    """Held and run by every decoder block: an encoder-decoder's cross-attending blocks, or each block
    of a decoder built alone (ProphetNet's relative_pos_embeddings)."""
    head: list[SideOp] = Field(default_factory=list)
    """Run by the task head before its classifier (BigBird's classification dense beside the pooler)."""


def linear(name: str, n_in: int, n_out: int, bias: bool = True, per_sequence: bool = False) -> dict:
    """nn.Linear(n_in, n_out, bias): n_in x n_out weights (+ n_out), n_in x n_out multiply-adds a row."""
    return dict(name=name, params=n_in * n_out + (n_out if bias else 0), macs=n_in * n_out, kept=n_in,
                per_sequence=per_sequence)


def table(name: str, rows: int, width: int, copies: int = 1) -> dict:
    """`copies` nn.Embedding(rows, width) lookups: parameters only."""
    return dict(name=name, params=copies * rows * width)


def layer_norm(name: str, width: int, bias: bool = True) -> dict:
    """nn.LayerNorm(width): weight (+ bias); no GEMM."""
    return dict(name=name, params=width * (2 if bias else 1))
