"""FLOPs of a transformer: forward per token, per training step, model vs hardware FLOPs.

Convention (stated in every FlopCount.convention):
- Matmul FLOPs only, 2 per multiply-add (what `torch.utils.flop_counter.FlopCounterMode`
  counts); norms, softmax, activations, bias adds, residual adds and embedding lookups are not
  counted (they are O(tokens*h), below 1% for real models).
- Attention scores QK^T and the weighted sum AV count the full s x s square, also for causal
  models (Megatron-LM / PaLM convention; a causal-aware kernel does about half of that work).
- Backward = 2 x forward for every matmul (grad of input + grad of weight), so model FLOPs =
  3 x forward (PaLM App. B; Narayanan et al. 2021 "72 B s l h^2 (1 + s/6h + V/12lh)").
- Hardware FLOPs add the recompute forward: `full` re-runs every transformer layer's forward
  (not the output layer: Narayanan et al.'s "96 B s l h^2 (1 + s/6h + V/16lh)"), `selective`
  re-runs only QK^T, softmax and AV (Korthikanti et al. 2022, section 5).
- MoE: the router matmul plus top_k routed experts per token (dropless: no capacity padding).

In the limit s/h -> 0 and vocab*h << N, model FLOPs per token -> 6N (Kaplan et al. 2020's
C = 6ND): every weight is used in one multiply-add forward and two backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.params import TOP_LEVEL, with_parents
from modelplan.count.result import FlopCount
from modelplan.errors import SpecError

if TYPE_CHECKING:
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec

CONVENTION = (
    "matmul FLOPs only, 2 per multiply-add (norms, softmax, activations, biases, lookups not "
    "counted); attention QK^T and AV count the full s x s square also for causal masks "
    "(Megatron-LM/PaLM); backward = 2 x forward; model = 3 x forward; hardware adds the "
    "recompute forward (full: every transformer layer, not the output layer; selective: QK^T/AV); "
    "MoE: router + top_k experts per token, dropless"
)


def _mlp_weights(spec: "TransformerSpec", ffn_hidden: int) -> tuple[int, int]:
    """(in, out) weight elements of one MLP (biases excluded: no matmul)."""
    n_in = 2 if spec.gated_mlp else 1  # gated MLPs have gate and up projections
    return n_in * spec.hidden * ffn_hidden, ffn_hidden * spec.hidden


def layer_forward_flops(
    spec: "TransformerSpec", layer_index: int, tokens: int, seq_len: int
) -> dict[str, int]:
    """Forward FLOPs of block `layer_index` for `tokens` tokens in sequences of `seq_len`.

    Keys are relative to the block: `attention/score` is the s^2 part (QK^T and AV, grows with
    tokens * seq_len); every other key is a weight matmul (grows with tokens only).
    """
    h = spec.hidden
    qkv_width = spec.q_width + 2 * spec.kv_width
    out = {
        "attention/qkv": 2 * tokens * h * qkv_width,  # x @ W_qkv: (t, h) @ (h, q + 2kv)
        # QK^T (t, d) @ (d, s) per head and AV (t, s) @ (s, d) per head: 2 * 2 * t * s * a * d
        "attention/score": 4 * tokens * seq_len * spec.q_width,
        "attention/out": 2 * tokens * spec.q_width * h,  # (t, a*d) @ (a*d, h)
    }
    moe = spec.moe
    if moe is not None and spec.is_moe_layer(layer_index):
        expert_in, expert_out = _mlp_weights(spec, moe.expert_ffn_hidden)
        shared_hidden = moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden
        out["mlp/router"] = 2 * tokens * h * moe.num_experts  # (t, h) @ (h, E)
        out["mlp/experts"] = 2 * tokens * moe.top_k * (expert_in + expert_out)
        out["mlp/shared_experts"] = (
            2 * tokens * moe.shared_experts * sum(_mlp_weights(spec, shared_hidden))
        )
        out["mlp/shared_gate"] = 2 * tokens * h if moe.shared_expert_gate else 0
    else:
        w_in, w_out = _mlp_weights(spec, spec.ffn_hidden)
        out["mlp/in"] = 2 * tokens * w_in  # (t, h) @ (h, f) [x2 if gated]
        out["mlp/out"] = 2 * tokens * w_out  # (t, f) @ (f, h)
    return out


def embedding_forward_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Forward FLOPs of the input side: lookups are free; OPT's project_in is a matmul."""
    e = spec.embed_dim
    return {"proj": 2 * tokens * e * spec.hidden if e != spec.hidden else 0}


def head_forward_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of the output side for `tokens` tokens (logits are computed even when tied)."""
    h, e = spec.hidden, spec.embed_dim
    sequences = tokens // seq_len
    return {
        "proj": 2 * tokens * h * e if e != h else 0,  # OPT project_out
        "transform": 2 * tokens * h * h if spec.mlm_transform else 0,  # BERT MLM dense
        "output": 2 * tokens * e * spec.vocab if spec.lm_head else 0,  # logits (t, e) @ (e, V)
        "pooler": 2 * sequences * h * h if spec.pooler else 0,  # first token of each sequence
    }


def recompute_forward_flops(layer_flops: dict[str, int], recompute: str) -> int:
    """Extra forward FLOPs of one block under activation recompute (none / selective / full)."""
    if recompute == "full":
        return sum(layer_flops.values())  # the whole block forward again
    if recompute == "selective":
        return layer_flops["attention/score"]  # QK^T, softmax, AV (Korthikanti et al. 2022)
    return 0


def check_seq_len(spec: "TransformerSpec", seq_len: int) -> None:
    """A learned position table caps the sequence length."""
    if spec.position == "learned" and seq_len > spec.max_positions:
        raise SpecError(
            f"seq_len ({seq_len}) exceeds max_positions ({spec.max_positions}) "
            f"of {spec.name}'s learned position table"
        )


def count_flops(spec, training: "TrainingSpec") -> FlopCount:
    """FLOPs of one training step over the global batch (or a network spec, dispatched lazily).

    `forward_per_token` is forward / tokens, rounded down when a per-sequence term (the BERT
    pooler) does not divide evenly.
    """
    if spec.kind == "network":
        from modelplan.count.network import count_network_flops

        return count_network_flops(spec, training)
    seq_len = training.seq_len
    check_seq_len(spec, seq_len)
    tokens = training.global_batch * seq_len
    leaves: dict[str, int] = {}
    for key, value in embedding_forward_flops(spec, tokens).items():
        leaves[f"embedding/{key}"] = value
    recompute = 0
    for index in range(spec.layers):
        block = layer_forward_flops(spec, index, tokens, seq_len)
        recompute += recompute_forward_flops(block, training.recompute)
        for key, value in block.items():
            leaves[f"layers/{key}"] = leaves.get(f"layers/{key}", 0) + value
    for key, value in head_forward_flops(spec, tokens, seq_len).items():
        leaves[f"head/{key}"] = value
    breakdown = with_parents(leaves, TOP_LEVEL)
    forward = sum(breakdown[key] for key in TOP_LEVEL)
    model = 3 * forward  # forward + backward (2x: input and weight gradients), PaLM App. B
    return FlopCount(
        forward_per_token=forward // tokens,
        forward=forward,
        model=model,
        hardware=model + recompute,
        breakdown=breakdown,
        convention=CONVENTION,
    )
