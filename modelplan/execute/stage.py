"""One pipeline stage (model chunk) on one rank: embedding on the first stage, its blocks, and the
head with the loss on the last one. Full activation recomputation keeps only each checkpoint's
input in forward (a block, or a group of blocks under Megatron-core's uniform method; the blocks
after the first N under its block method keep everything) and re-runs the checkpoint (with its
communication) just before its backward, as Megatron-LM's `--recompute-granularity full` does
for transformer layers (`recompute.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from modelplan.execute.expert_parallel import ExpertParallel
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.mtp import mtp_backward_tp, mtp_forward_tp
from modelplan.execute.params import Batch
from modelplan.execute.recompute import Recompute
from modelplan.execute.tensor_parallel import block_backward, block_forward
from modelplan.execute.vocab_parallel import (
    embedding_backward_tp,
    embedding_forward_tp,
    head_backward_tp,
    head_forward_tp,
)
from modelplan.plan.pipeline.actions import VirtualStage
from modelplan.plan.stages import stage_layers
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class StageLayout(VirtualStage):
    """Virtual stage `index` of `num_stages`: blocks [first_layer, first_layer + num_layers)."""

    first_layer: int
    num_layers: int

    @property
    def layers(self) -> range:
        return range(self.first_layer, self.first_layer + self.num_layers)


def stage_layout(spec: TransformerSpec, index: int, num_stages: int, split=None) -> StageLayout:
    """Virtual stage `index`'s blocks (plan/stages.py `split_layers`, the plan's first / last stage
    blocks when it fixes them)."""
    layers = stage_layers(spec.layers, num_stages, index, split)
    return StageLayout(index, num_stages, layers.start, len(layers))


def split_cache(cache: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(what the blocks keep, what the embedding and the head keep) of a stage's forward cache."""
    return cache.get("blocks"), {k: v for k, v in cache.items() if k != "blocks"}


def _add(into: Params, grads: Params) -> None:
    for k, v in grads.items():
        into[k] = into[k] + v if k in into else v


@dataclass(frozen=True)
class StageModel:
    """What a stage computes with: the parallel groups, the spec and what to recompute."""

    tp: TensorParallel
    ep: ExpertParallel
    spec: TransformerSpec
    recompute: Recompute

    def _blocks_forward(self, layers: range, p: Params, x: np.ndarray) -> tuple[np.ndarray, list]:
        caches = []
        for i in layers:
            x, cache = block_forward(self.tp, self.ep, self.spec, i, p, x, self.recompute.core_attn)
            caches.append(cache)
        return x, caches

    def forward(self, st: StageLayout, p: Params, x: np.ndarray | None, mb: Batch) -> tuple[Any, dict[str, Any]]:
        """Output activation (b, s or s/tp, h), or the micro-batch's mean loss on the last stage."""
        c: dict[str, Any] = {"blocks": []}
        if st.is_first_stage:
            x, c["embedding"] = embedding_forward_tp(self.tp, self.spec, p, mb)
        for layers, checkpoint in self.recompute.groups(st.layers):
            x_in = x
            x, caches = self._blocks_forward(layers, p, x_in)
            c["blocks"].append((layers, checkpoint, x_in if checkpoint else caches))  # a checkpoint keeps its input
        if st.is_last_stage:
            loss, c["head"] = head_forward_tp(self.tp, self.spec, p, x, mb.labels)
            if self.spec.mtp_layers:
                extra, c["mtp"] = mtp_forward_tp(self.tp, self.ep, self.spec, p, x, mb)
                loss += extra
            return loss, c
        return x, c

    def backward(self, st: StageLayout, p: Params, c: dict[str, Any], dout: Any, mb: Batch
                 ) -> tuple[np.ndarray | None, Params]:
        """(gradient of the stage input or None on the first stage, grads of this stage's shards).

        On the last stage `dout` is dL/dloss of this micro-batch (1/num_microbatches)."""
        grads: Params = {}
        dx = dout
        if st.is_last_stage:
            dx, g = head_backward_tp(self.tp, self.spec, p, c["head"], mb.labels, dout)
            _add(grads, g)
            if "mtp" in c:
                dh0, g = mtp_backward_tp(self.tp, self.ep, self.spec, p, c["mtp"], mb, dout)
                dx = dx + dh0
                _add(grads, g)
        for layers, checkpoint, kept in reversed(c["blocks"]):
            caches = self._blocks_forward(layers, p, kept)[1] if checkpoint else kept  # run the group again
            for i, cache in zip(reversed(layers), reversed(caches)):
                dx, g = block_backward(self.tp, self.ep, self.spec, i, p, cache, dx)
                _add(grads, g)
            del caches
        if st.is_first_stage:
            _add(grads, embedding_backward_tp(self.tp, self.spec, p, c["embedding"], mb, dx))
            return None, grads
        return dx, grads
