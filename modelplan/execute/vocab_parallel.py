"""Vocabulary-parallel embedding and output head with vocabulary-parallel cross-entropy
(Megatron-LM `VocabParallelEmbedding`, `vocab_parallel_cross_entropy`; Shoeybi et al. 2019, sec. 3).

Tensor rank t holds vocabulary rows [t*V/tp, (t+1)*V/tp) of the word embedding and the matching
columns of the output projection. The embedding looks up its own rows (zeros elsewhere) and the
partial results leave through g (AllReduce, or ReduceScatter to sequence shards). The loss never
gathers the logits: per token, the maximum, the target logit and the sum of exponentials are
combined over tp. The communicator reduces by sum only, so the maximum is taken over an
AllGather of the per-rank maxima where Megatron uses an AllReduce(MAX).
Position and token-type embeddings are replicated and added after the reduce, to the rows of
this rank's sequence shard.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelplan.comm.regions import Region
from modelplan.execute import mappings
from modelplan.execute.layers.embedding import embedding_backward, embedding_forward
from modelplan.execute.layers.loss import logits_backward, logits_forward
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.params import Batch
from modelplan.execute.shapes import norm_b, norm_f, sub
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]


def _seq_range(tp: TensorParallel, seq: int) -> tuple[int, int]:
    """This rank's sequence rows: a shard under sequence parallelism, all rows otherwise."""
    if not tp.sequence_parallel:
        return 0, seq
    n = seq // tp.size
    return tp.rank * n, (tp.rank + 1) * n


def word_embedding_tp(tp: TensorParallel, spec: TransformerSpec, p: Params, ids: np.ndarray, label: str
                      ) -> np.ndarray:
    """Vocab-parallel token embeddings of ids (b, s) -> (b, s or s/tp, h), times the embedding scale."""
    table = p["embedding/word/weight"]  # (V/tp, h)
    partial = embedding_forward(table, ids, tp.rank * table.shape[0])  # (b, s, h), zeros for other shards' ids
    x = mappings.exit_region(tp, partial, label)
    return x if spec.embedding_scale is None else x * spec.embedding_scale


def word_embedding_backward_tp(tp: TensorParallel, spec: TransformerSpec, p: Params, ids: np.ndarray,
                               dx: np.ndarray, label: str) -> np.ndarray:
    """The gradient of this rank's vocabulary rows of the word embedding."""
    dx = dx if spec.embedding_scale is None else dx * spec.embedding_scale
    dpartial = mappings.exit_region_backward(tp, dx, label)  # (b, s, h)
    rows = p["embedding/word/weight"].shape[0]
    return embedding_backward(rows, ids, dpartial, tp.rank * rows)


def embedding_forward_tp(tp: TensorParallel, spec: TransformerSpec, p: Params, mb: Batch) -> tuple[np.ndarray, dict[str, Any]]:
    """Embeddings of micro-batch mb: (b, s) ids -> (b, s or s/tp, h)."""
    x = word_embedding_tp(tp, spec, p, mb.tokens, Region.TP_EMBEDDING)
    lo, hi = _seq_range(tp, mb.tokens.shape[1])
    if "embedding/position/weight" in p:
        at = tp.seq_offset(mb.tokens.shape[1])  # context parallel: this rank's slice of the positions
        x = x + p["embedding/position/weight"][at + lo:at + hi]
    if mb.types is not None:
        x = x + embedding_forward(p["embedding/type/weight"], mb.types[:, lo:hi])
    c: dict[str, Any] = {"range": (lo, hi)}
    if spec.embedding_norm:
        x, c["norm"] = norm_f(spec, sub(p, "embedding/norm"), x)
    return x, c


def embedding_backward_tp(tp: TensorParallel, spec: TransformerSpec, p: Params, c: dict[str, Any], mb: Batch,
                          dx: np.ndarray) -> Params:
    """Grads of the embedding shards (position/type/norm grads are partial under sequence parallelism)."""
    grads: Params = {}
    if "norm" in c:
        dx = norm_b(sub(p, "embedding/norm"), c["norm"], dx, grads, "embedding/norm")
    lo, hi = c["range"]
    if "embedding/position/weight" in p:
        dpos = np.zeros_like(p["embedding/position/weight"])
        at = tp.seq_offset(mb.tokens.shape[1])
        dpos[at + lo:at + hi] = dx.sum(axis=0)
        grads["embedding/position/weight"] = dpos
    if mb.types is not None:
        grads["embedding/type/weight"] = embedding_backward(spec.type_vocab, mb.types[:, lo:hi], dx)
    grads["embedding/word/weight"] = word_embedding_backward_tp(tp, spec, p, mb.tokens, dx, Region.TP_EMBEDDING)
    return grads


def vocab_parallel_cross_entropy(tp: TensorParallel, logits: np.ndarray, labels: np.ndarray,
                                 mask: np.ndarray | None = None) -> tuple[float, np.ndarray, np.ndarray]:
    """Mean loss over tokens (where `mask` is true) from vocabulary-sharded logits (b, s, V/tp);
    returns (loss, probs, inside)."""
    vocab_local = logits.shape[-1]
    first = tp.rank * vocab_local
    local_max = logits.max(axis=-1)  # (b, s)
    maxima = tp.all_gather(local_max[None], 0, Region.TP_CROSS_ENTROPY_MAX)  # (tp, b, s)
    shifted = logits - maxima.max(axis=0)[..., None]
    exp = np.exp(shifted)
    local = labels - first
    inside = (local >= 0) & (local < vocab_local)
    target = np.take_along_axis(shifted, np.where(inside, local, 0)[..., None], axis=-1)[..., 0] * inside
    target = tp.all_reduce(target, Region.TP_CROSS_ENTROPY_TARGET)  # the owner's logit, 0 elsewhere
    sum_exp = tp.all_reduce(exp.sum(axis=-1), Region.TP_CROSS_ENTROPY_SUM)
    per_token = np.log(sum_exp) - target
    loss = float(np.mean(per_token)) if mask is None else float((per_token * mask).sum() / mask.sum())
    return loss, exp / sum_exp[..., None], inside


def head_forward_tp(tp: TensorParallel, spec: TransformerSpec, p: Params, x: np.ndarray, labels: np.ndarray,
                    norm: str | None = None, mask: np.ndarray | None = None) -> tuple[float, dict[str, Any]]:
    """Final norm (`norm`, "" for none), output projection (column-parallel over the
    vocabulary), logit scale and soft-cap (element-wise on each shard) and the loss; `norm`
    None: head/norm when the model has a final norm; `mask`: the tokens the loss averages."""
    if norm is None:
        norm = "head/norm" if spec.final_norm else ""
    c: dict[str, Any] = {"norm_name": norm, "mask": mask}
    if c["norm_name"]:
        x, c["norm"] = norm_f(spec, sub(p, norm), x)
    x_in = mappings.enter_region(tp, x, Region.TP_LM_HEAD_IN)  # (b, s, h)
    w = p["embedding/word/weight"].T if spec.tied_embeddings else p["head/lm/weight"]  # (h, V/tp)
    logits = x_in @ w + p.get("head/lm/bias", 0.0)  # (b, s, h) @ (h, V/tp)
    logits, c["capped"] = logits_forward(logits, spec.logit_scale, spec.final_logit_softcap)
    loss, c["probs"], c["inside"] = vocab_parallel_cross_entropy(tp, logits, labels, mask)
    c["x_in"] = x_in
    return loss, c


def head_backward_tp(tp: TensorParallel, spec: TransformerSpec, p: Params, c: dict[str, Any], labels: np.ndarray,
                     dloss: float) -> tuple[np.ndarray, Params]:
    """(dx of the head input, grads); the cross-entropy backward is local to each vocab shard."""
    grads: Params = {}
    dlogits = c["probs"].copy()
    vocab_local = dlogits.shape[-1]
    local = np.where(c["inside"], labels - tp.rank * vocab_local, 0)
    np.put_along_axis(dlogits, local[..., None],
                      np.take_along_axis(dlogits, local[..., None], -1) - c["inside"][..., None], -1)
    mask = c["mask"]
    dlogits *= dloss / labels.size if mask is None else mask[..., None] * (dloss / mask.sum())
    dlogits = logits_backward(dlogits, spec.logit_scale, c["capped"])
    x_in = c["x_in"]
    dw = x_in.reshape(-1, x_in.shape[-1]).T @ dlogits.reshape(-1, vocab_local)  # (b*s, h).T @ (b*s, V/tp)
    if spec.tied_embeddings:
        grads["embedding/word/weight"] = dw.T
        w = p["embedding/word/weight"].T
    else:
        grads["head/lm/weight"] = dw
        w = p["head/lm/weight"]
    if "head/lm/bias" in p:
        grads["head/lm/bias"] = dlogits.reshape(-1, vocab_local).sum(axis=0)
    dx = mappings.enter_region_backward(tp, dlogits @ w.T, Region.TP_LM_HEAD_IN)  # (b, s, V/tp) @ (V/tp, h)
    if "norm" in c:
        dx = norm_b(sub(p, c["norm_name"]), c["norm"], dx, grads, c["norm_name"])
    return dx, grads
