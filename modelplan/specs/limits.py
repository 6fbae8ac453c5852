"""The largest sizes modelplan accepts, each far above any model or cluster built to date.

Counting, planning and verifying loop over layers, divisors of batch sizes and GPU counts, and
per-layer lists; a typo such as `layers = 1000000000000` would otherwise be a loop that never
ends. `Spec` checks every field named here on construction (one line: the field, the value, the
limit), so no loop downstream depends on a size beyond these.
"""

from __future__ import annotations

MAX_LAYERS = 10_000
"""Blocks or layers of one model (the deepest trained transformers have a few hundred blocks,
ResNet-1001 about a thousand layers)."""
MAX_WIDTH = 2**24
"""A hidden size, feature, channel, vocabulary or position count (16,777,216; the widest
published models are about 10**5 wide, the largest vocabularies about 10**6)."""
MAX_HEADS = 2**16
"""Attention heads (65,536)."""
MAX_EXPERTS = 2**16
"""Experts per MoE layer (65,536; the largest published MoE models use a few hundred)."""
MAX_SEQ = 2**24
"""Tokens per sequence (16,777,216; the longest context windows are about 10**7)."""
MAX_BATCH = 2**24
"""Sequences per optimizer step or micro-batch (16,777,216)."""
MAX_RANKS = 2**20
"""GPUs, or the degree of one parallel axis (1,048,576; the largest clusters have about 10**5)."""
MAX_TRAINING_FLOPS = 1e32
"""A training compute budget (FLOP): about a million times the largest published runs (~5e26);
a model shaped for more would be wider than MAX_WIDTH."""
MAX_REPEAT = MAX_LAYERS
"""Copies of a repeated network block."""

LIMITS: dict[str, int] = {
    # transformer (HF names in brackets): layers [num_hidden_layers], hidden, heads, ...
    "layers": MAX_LAYERS, "mtp_layers": MAX_LAYERS, "mtp_not_built": MAX_LAYERS, "first_dense_layers": MAX_LAYERS,
    "layer_freq": MAX_LAYERS, "hidden": MAX_WIDTH, "ffn_hidden": MAX_WIDTH, "vocab": MAX_WIDTH,
    "head_dim": MAX_WIDTH, "max_positions": MAX_SEQ, "heads": MAX_HEADS, "kv_heads": MAX_HEADS,
    "embedding_dim": MAX_WIDTH,
    # encoder-decoder (specs/seq2seq.py)
    "decoder_layers": MAX_LAYERS, "encoder_positions": MAX_SEQ, "position_offset": MAX_SEQ,
    "cross_input": MAX_WIDTH, "mel_bins": MAX_WIDTH, "kernel": MAX_WIDTH, "cross_memory": MAX_SEQ, "keys": MAX_SEQ,
    "encoder_window": MAX_SEQ,
    # MoE
    "num_experts": MAX_EXPERTS, "top_k": MAX_EXPERTS, "shared_experts": MAX_EXPERTS,
    "expert_ffn_hidden": MAX_WIDTH, "shared_expert_ffn_hidden": MAX_WIDTH,
    # training
    "global_batch": MAX_BATCH, "seq_len": MAX_SEQ,
    # plan
    "dp": MAX_RANKS, "tp": MAX_RANKS, "pp": MAX_RANKS, "cp": MAX_RANKS, "ep": MAX_RANKS,
    "vpp": MAX_LAYERS, "micro_batch": MAX_BATCH,
    # cluster
    "gpus_per_node": MAX_RANKS, "nodes": MAX_RANKS, "nvlink_domain_gpus": MAX_RANKS,
    # network layers
    "out_features": MAX_WIDTH, "in_features": MAX_WIDTH, "out_channels": MAX_WIDTH,
    "in_channels": MAX_WIDTH, "num_features": MAX_WIDTH, "num_embeddings": MAX_WIDTH,
    "hidden_size": MAX_WIDTH, "input_size": MAX_WIDTH, "proj_size": MAX_WIDTH,
    "num_layers": MAX_LAYERS, "times": MAX_REPEAT, "groups": MAX_WIDTH,
    "kernel_size": MAX_WIDTH, "stride": MAX_WIDTH, "padding": MAX_WIDTH, "dilation": MAX_WIDTH,
    "output_size": MAX_WIDTH, "input_shape": MAX_WIDTH,
}
"""Field name -> the largest value (every element, for a list of sizes)."""


def limit_errors(spec: object) -> list[str]:
    """`field (value) must be <= limit` for every integer field of `spec` over its limit."""
    out = []
    for name in type(spec).model_fields:  # type: ignore[attr-defined]
        limit = LIMITS.get(name)
        if limit is None:
            continue
        value = getattr(spec, name)
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool) and v > limit:
                out.append(f"{name} ({v}) must be <= {limit:,}: larger than anything modelplan "
                           "sizes (a typo?)")
                break
    return out
