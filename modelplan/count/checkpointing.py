"""What each engine's selective activation checkpointing keeps and recomputes (`AcMode`).

- attention_core (Megatron `--recompute-granularity selective`, Korthikanti et al. 2022 sec. 5):
  the attention core (QK^T, softmax, dropout, AV) is recomputed, everything else kept; the
  counting lives in `count.memory.activation_bytes_per_layer`.
- op_sac (torchtitan `selective_ac_option = "op"`, parallelize_llama.py `_save_list` and
  `_custom_policy`): inside each block the outputs of matmuls are saved except every second one
  (a counter over the block's mm calls saves the 1st, 3rd, 5th, ...), plus the outputs of
  scaled-dot-product attention and of the reduce-scatters; everything else is recomputed from
  the block input in backward. The block's matmuls run in the module's order
  (torchtitan Attention / FeedForward): wq, wk, wv, wo, then w1, w3, w2 (gated) or w1, w2.
- layer_sac / every_nth_block (torchtitan integer option N, fms-fsdp selective_checkpointing):
  every N-th block is checkpointed whole (full recompute), the others keep everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def block_matmuls(spec: "TransformerSpec") -> list[tuple[str, int, int]]:
    """The block's matmuls in call order as (name, input width, output width), torchtitan's
    module order: wq, wk, wv, wo, w1, (w3,) w2."""
    h, q, kv, f = spec.hidden, spec.q_width, spec.kv_width, spec.ffn_hidden
    mms = [("wq", h, q), ("wk", h, kv), ("wv", h, kv), ("wo", q, h), ("w1", h, f)]
    if spec.gated_mlp:
        mms.append(("w3", h, f))
    mms.append(("w2", f, h))
    return mms


def op_sac_saved(spec: "TransformerSpec") -> set[str]:
    """Matmuls whose outputs per-op SAC saves: the 1st, 3rd, 5th, ... call (torchtitan
    `_custom_policy`: every second mm is recomputed)."""
    return {name for i, (name, _, _) in enumerate(block_matmuls(spec)) if i % 2 == 0}


def op_sac_recomputed_fraction(spec: "TransformerSpec") -> float:
    """Share of the block's linear-layer forward FLOPs that per-op SAC recomputes (the matmuls
    whose outputs it does not save), by FLOPs (in x out per token)."""
    saved = op_sac_saved(spec)
    total = sum(k * n for _, k, n in block_matmuls(spec))
    redone = sum(k * n for name, k, n in block_matmuls(spec) if name not in saved)
    return redone / total


def op_sac_kept_per_token(spec: "TransformerSpec", dtype_bytes: int, tp: int,
                          saves_attention: bool = True) -> tuple[int, int]:
    """(replicated, tp-sharded) bytes per token one block keeps under per-op SAC: the block input
    (the checkpoint's input, replicated over tp), the saved matmul outputs (column-parallel ones
    sharded over tp; the row-parallel w2 / wo outputs replicated), attention's output and its
    fp32 log-sum-exp (sharded; not when the run's SDPA kernel is missing from the save list,
    `saves_attention` False), and with tp > 1 the reduce-scatter output of the attention
    projection (saved as a collective output)."""
    d = dtype_bytes
    saved = op_sac_saved(spec)
    replicated = d * spec.hidden  # block input
    # attention output + log-sum-exp (FlashAttention-2), when its op is in the save list
    sharded = d * spec.q_width + 4 * spec.heads if saves_attention else 0
    for name, _, n in block_matmuls(spec):
        if name not in saved:
            continue
        if name in ("wo", "w2"):
            replicated += d * n
        else:
            sharded += d * n
    if tp > 1 and "wo" not in saved:
        replicated += d * spec.hidden  # reduce_scatter output after wo (in torchtitan's save list)
    return replicated, sharded


def checkpointed_share(every: int) -> float:
    """Share of blocks a layer-level policy checkpoints whole: one block in `every`."""
    return 1.0 / every


def op_sac_recomputed_shares(spec: "TransformerSpec") -> dict[str, float]:
    """Per sub-layer input ("qkv": wq, wk, wv; "fc1": w1, w3), the share of the block's linear
    forward FLOPs that per-op SAC recomputes from it: the GEMMs a recomputed input AllGather of
    sequence parallelism feeds in the recompute (wk for Llama: wq and wv are saved)."""
    saved = op_sac_saved(spec)
    mms = block_matmuls(spec)
    total = sum(k * n for _, k, n in mms)
    groups = {"qkv": ("wq", "wk", "wv"), "fc1": ("w1", "w3")}
    return {g: sum(k * n for name, k, n in mms if name in names and name not in saved) / total
            for g, names in groups.items()}
