"""The planner's per-block terms when a model mixes block kinds (Gemma's 5 local : 1 global, gpt-oss's
alternating sliding / full blocks, Jamba's Mamba and attention blocks), and its MTP modules.

Stage times and memory are composed from one dense and one MoE block's terms (`stage_time.py`).
With several kinds in a class, that class's terms are the mean of each kind's, weighted by the
kind's share of the model's blocks of the class: every figure is then exact for the model as a
whole, and a stage is priced at the model's mix (a stage holding more sliding blocks than the
model's share is priced slightly high; the difference is the stage's deviation from the mix).
DeepSeek-V3's MTP modules run on the last stage after the head (Megatron-core): each adds one
block of the MTP kind, one lookup of the embedding and one more head and loss there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, is_dataclass

from modelplan.count.blocks import Block, block_of
from modelplan.plan.stage_time import BlockTerms
from modelplan.specs.transformer import TransformerSpec


def block_kinds(spec: TransformerSpec, moe: bool) -> list[tuple[Block, int]]:
    """The model's blocks of one class (MoE or not) by kind, with how many of each, in order of
    first appearance."""
    counts = Counter(block_of(spec, i) for i in range(spec.num_blocks) if spec.is_moe_layer(i) == moe)
    return list(counts.items())


def _mean(values: list, weights: list[float]):
    """Weighted mean of numbers, or field by field of NamedTuples / dataclasses of numbers."""
    first = values[0]
    total = sum(weights)
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(_mean([v[i] for v in values], weights) for i in range(len(first))))
    if is_dataclass(first):
        return type(first)(**{f.name: _mean([getattr(v, f.name) for v in values], weights) for f in fields(first)})
    if isinstance(first, bool):
        return first
    if all(v == first for v in values):
        return first
    return sum(w * v for v, w in zip(values, weights)) / total


def mean_terms(terms: list[BlockTerms], weights: list[int]) -> BlockTerms:
    """The weighted mean of per-kind block terms (module docstring)."""
    return terms[0] if len(terms) == 1 else _mean(terms, [float(w) for w in weights])


def with_mtp(terms: BlockTerms, mtp: BlockTerms, modules: int) -> BlockTerms:
    """`terms` with `modules` MTP modules added to the last stage's head: each runs an MTP block
    (forward, backward and its exposed communication; not recomputed, as the executor runs it),
    one more embedding lookup and one more head and loss; it keeps the block's and the head's
    activations."""
    if not modules:
        return terms
    k, m = terms.kernels, mtp.kernels
    block_fwd = m.fwd_gemm_s + m.fwd_elementwise_s
    block_bwd = m.bwd_gemm_s + m.bwd_elementwise_s
    kernels = k._replace(
        head_fwd_s=k.head_fwd_s + modules * (block_fwd + k.head_fwd_s + k.embedding_fwd_s),
        head_bwd_s=k.head_bwd_s + modules * (block_bwd + k.head_bwd_s + k.embedding_bwd_s),
    )
    comm = mtp.tp.fwd_s + mtp.tp.bwd_s + mtp.ep.fwd_s + mtp.ep.bwd_s + mtp.cp.fwd_s + mtp.cp.bwd_s
    tp = terms.tp._replace(head_s=terms.tp.head_s + modules * (comm + terms.tp.head_s + terms.tp.embedding_s))
    head_bytes = terms.head_activation_bytes + modules * (mtp.activation_bytes + terms.head_activation_bytes)
    return BlockTerms(kernels, terms.recompute_s, tp, terms.ep, terms.cp, terms.activation_bytes, terms.working_bytes,
                      terms.embedding_activation_bytes, head_bytes, terms.boundary_bytes)
