"""Sequence parallelism (Korthikanti et al. 2022, sec. 4.2.2): with tp > 1 the LayerNorm,
dropout and residual regions hold s/tp of the sequence, so the tensor-parallel region is entered
with an AllGather instead of Megatron's identity f, and left with a ReduceScatter instead of
the AllReduce g (the same bytes: an AllReduce is a ReduceScatter plus an AllGather). What it
shards: the activations of those regions (`count/memory.py`) and the elementwise kernels on
them (`plan/kernels.py`); the gradients of the parameters used in them (norms, the row-parallel
biases) become partial sums over tp and are all-reduced over tp before the data-parallel
reduction (`plan/shard.py` partial_over_tp, priced in `dp_zero.py`).
"""

from __future__ import annotations

from modelplan.comm.ops import Collective

AG, AR, RS = Collective.ALL_GATHER, Collective.ALL_REDUCE, Collective.REDUCE_SCATTER


def region_ops(sequence_parallel: bool) -> tuple[Collective, Collective | None, Collective | None, Collective]:
    """(g forward, g backward, f forward, f backward): the collectives leaving (g) and entering (f)
    a tensor-parallel region; None is the identity (Megatron mappings.py; Korthikanti et al. 2022,
    fig. 5 for the sequence-parallel pair)."""
    return (RS, AG, AG, RS) if sequence_parallel else (AR, None, None, AR)
