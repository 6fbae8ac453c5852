"""Multi-token prediction on the last pipeline stage (DeepSeek-V3 sec. 2.2, eq. 21-25; Megatron-core
places the MTP modules on the last stage, which holds a copy of the word embedding like a tied head).

Module k (1-based depth) on position i: h^k_i = Block_k(M_k [RMSNorm(Emb(t_{i+k})); RMSNorm(h^{k-1}_i)])
with the embedding first as the released checkpoints' enorm / hnorm / eh_proj are applied; h^0 is
the main model's last block output. Its logits come from the shared output head after the module's
own norm, and its loss L_k averages the positions whose target t_{i+k+1} exists (ids, labels and
loss mask rolled left by k). The step's loss is L_main + lambda / D * sum_k L_k.

Tensor parallelism: the lookup is vocab-parallel (leaves through g, `tp/mtp/embedding`), the block
is a block like any other, the head is the model's vocab-parallel head; the projection M_k is
replicated over tp (each rank projects its residual stream, full or its sequence shard).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from modelplan.comm.regions import Region

from modelplan.count.blocks import mtp_block
from modelplan.execute.expert_parallel import ExpertParallel
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.params import Batch, mtp_inputs
from modelplan.execute.shapes import norm_b, norm_f, sub
from modelplan.execute.tensor_parallel import kind_backward, kind_forward
from modelplan.execute.vocab_parallel import (
    head_backward_tp,
    head_forward_tp,
    word_embedding_backward_tp,
    word_embedding_tp,
)
from modelplan.specs.transformer import TransformerSpec

Params = dict[str, np.ndarray]
EMBEDDING_LABEL = Region.TP_MTP_EMBEDDING


def mtp_forward_tp(tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, params: Params, h0: np.ndarray,
                   mb: Batch) -> tuple[float, list[dict[str, Any]]]:
    """(lambda / D * sum of the modules' losses, caches) on the last stage's output h0."""
    caches, total, h = [], 0.0, h0
    weight = spec.mtp_loss_weight / spec.mtp_layers
    for k in range(spec.mtp_layers):
        p = sub(params, f"mtp/{k}")
        ids, labels, mask = mtp_inputs(mb.tokens, mb.labels, k + 1)
        e, ce = norm_f(spec, sub(p, "embed_norm"), word_embedding_tp(tp, spec, params, ids, EMBEDDING_LABEL))
        hn, ch = norm_f(spec, sub(p, "hidden_norm"), h)
        cat = np.concatenate([e, hn], axis=-1)  # (b, s or s/tp, 2h)
        z = cat @ p["proj/weight"]  # (b, s, 2h) @ (2h, h)
        h, cb = kind_forward(tp, ep, spec, mtp_block(spec), sub(p, "block"), z)
        loss, chead = head_forward_tp(tp, spec, params, h, labels, f"mtp/{k}/head_norm", mask)
        total += weight * loss
        caches.append({"ids": ids, "ce": ce, "ch": ch, "cat": cat, "block": cb, "head": chead})
    return total, caches


def mtp_backward_tp(tp: TensorParallel, ep: ExpertParallel, spec: TransformerSpec, params: Params,
                    caches: list[dict[str, Any]], mb: Batch, dloss: float) -> tuple[np.ndarray, Params]:
    """(dL/dh0, grads of the modules and their share of the word embedding and head) for
    dL/d(step loss) `dloss`."""
    weight = dloss * spec.mtp_loss_weight / spec.mtp_layers
    grads: Params = {}

    def add(g: Params) -> None:
        for key, v in g.items():
            grads[key] = grads[key] + v if key in grads else v

    h_dim, dh = spec.hidden, None
    for k in reversed(range(spec.mtp_layers)):
        c, p, prefix = caches[k], sub(params, f"mtp/{k}"), f"mtp/{k}"
        _, labels, _ = mtp_inputs(mb.tokens, mb.labels, k + 1)
        dout, g = head_backward_tp(tp, spec, params, c["head"], labels, weight)
        add(g)
        if dh is not None:
            dout = dout + dh
        dz, g = kind_backward(tp, ep, spec, mtp_block(spec), sub(p, "block"), c["block"], dout)
        add({f"{prefix}/block/{n}": v for n, v in g.items()})
        grads[f"{prefix}/proj/weight"] = c["cat"].reshape(-1, 2 * h_dim).T @ dz.reshape(-1, h_dim)  # (2h, T) @ (T, h)
        dcat = dz @ p["proj/weight"].T  # (b, s, h) @ (h, 2h)
        g = {}
        de = norm_b(sub(p, "embed_norm"), c["ce"], dcat[..., :h_dim], g, f"{prefix}/embed_norm")
        dh = norm_b(sub(p, "hidden_norm"), c["ch"], dcat[..., h_dim:], g, f"{prefix}/hidden_norm")
        g["embedding/word/weight"] = word_embedding_backward_tp(tp, spec, params, c["ids"], de, EMBEDDING_LABEL)
        add(g)
    return dh, grads
