"""FLOPs of a transformer: forward per token, per training step, model vs hardware FLOPs.

Convention (stated in every FlopCount.convention):
- Matmul FLOPs only, 2 per multiply-add (what `torch.utils.flop_counter.FlopCounterMode`
  counts); norms, softmax, activations, bias adds, residual adds, soft-capping, sinks and
  embedding lookups are not counted (they are O(tokens*h), below 1% for real models). Two
  non-matmul contractions are counted like matmuls: Mamba's depthwise causal conv (2 t d k) and
  its scan output y = C h (2 t d N).
- Attention scores QK^T and AV count, for every query, all keys it may see: the full sequence
  (the s x s square, also for causal masks: Megatron-LM / PaLM convention, what eager attention
  computes), min(s, window) for sliding_attention and min(s, chunk) for chunked_attention (a
  windowed kernel's band; eager HF attention computes the full square and masks it).
- MLA counts the expanded form transformers executes (latents up-projected to per-head keys and
  values; no weight absorption).
- Backward = 2 x forward for every matmul (grad of input + grad of weight), so model FLOPs =
  3 x forward (PaLM App. B; Narayanan et al. 2021 "72 B s l h^2 (1 + s/6h + V/12lh)").
- Hardware FLOPs add the recompute forward: `full` re-runs every transformer layer's forward
  (not the output layer: Narayanan et al.'s "96 B s l h^2 (1 + s/6h + V/16lh)"), `selective`
  re-runs only QK^T, softmax and AV (Korthikanti et al. 2022, section 5).
- MoE: the router matmul plus top_k routed experts per token (dropless: no capacity padding).
- Encoder-decoder: encoder blocks on seq_len tokens, decoder blocks and the head on
  decoder_seq_len tokens, cross-attention K/V projections on the encoder tokens; per-token
  figures divide by encoder + decoder tokens.
- MTP module k (DeepSeek-V3) runs on s - k positions of each sequence and has its own logits.
- A vision tower runs on the step's global_batch x images_per_seq images (`count.vision_step`):
  forward per image from `count.vision`, backward 2 x forward, recompute as for the blocks;
  a frozen tower (adapter fine-tunes) forward only.

In the limit s/h -> 0 and vocab*h << N, model FLOPs per token -> 6N (Kaplan et al. 2020's
C = 6ND): every weight is used in one multiply-add forward and two backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import Block, block_of, mtp_block
from modelplan.count.encoder_side import side_flops
from modelplan.count.extras import embedding_extra_flops
from modelplan.count.params import TOP_LEVEL, with_parents
from modelplan.count.result import FlopCount
from modelplan.count.encoder_inputs import check_input_length, input_flops, input_head_flops
from modelplan.count.seq2seq import audio_flops, check_lengths
from modelplan.count.vision_step import vision_step_flops
from modelplan.count.side_paths import embedding_side_flops, head_side_flops
from modelplan.errors import SpecError
from modelplan.specs.extras import decoder_width, per_token_dense, transform_width
from modelplan.specs.family import family_of

if TYPE_CHECKING:
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec

CONVENTION = (
    "matmul FLOPs only, 2 per multiply-add (norms, softmax, activations, biases, lookups, "
    "softcaps not counted; Mamba's conv and scan contraction counted, Mamba-2 / gated DeltaNet "
    "scans as their chunked algorithms' matmuls); attention QK^T and AV "
    "count every key a query may see: the full s x s square also for causal masks "
    "(Megatron-LM/PaLM), min(s, window) for sliding and min(s, chunk) for chunked layers; MLA "
    "expanded as transformers runs it; backward = 2 x forward; model = 3 x forward; hardware adds "
    "the recompute forward (full: every transformer layer, not the output layer; selective: "
    "QK^T/AV); MoE: router + top_k experts per token, dropless; encoder-decoder: decoder and "
    "head on decoder_seq_len tokens; a vision tower on images_per_seq images per sequence "
    "(frozen under adapter fine-tunes: forward only)"
)


def layer_forward_flops(
    spec: "TransformerSpec", layer_index: int, tokens: int, seq_len: int
) -> dict[str, int]:
    """Forward FLOPs of block `layer_index` for `tokens` tokens in sequences of `seq_len`
    (a decoder block of an encoder-decoder cross-attends to as many encoder tokens).

    Keys are relative to the block: `attention/score` is the keys-per-query part (QK^T and AV,
    grows with tokens * seq_len); every other key is a weight matmul (grows with tokens only).
    """
    return block_forward_flops(spec, block_of(spec, layer_index), tokens, seq_len, tokens, seq_len)


def embedding_forward_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Forward FLOPs of the input side: lookups are free; OPT's project_in is a matmul, Whisper's
    front-end two convolutions (count.seq2seq)."""
    e = spec.embed_dim
    return {"proj": 2 * tokens * e * spec.hidden if e != spec.hidden else 0,
            "audio_conv": audio_flops(spec, tokens),
            **embedding_extra_flops(spec, tokens)}  # ELECTRA embeddings_project, RoCBert map_inputs_layer


def head_forward_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of the output side for `tokens` tokens (logits are computed even when tied)."""
    h, e, t, dec = spec.hidden, spec.embed_dim, transform_width(spec), decoder_width(spec)
    sequences = tokens // seq_len
    cls = spec.classifier
    rows = 0 if cls is None else tokens if cls.per_token else sequences
    return {
        "proj": 2 * tokens * h * e if e != h else 0,  # OPT project_out
        # BERT MLM dense (t, h) @ (h, t); before a pooled classifier only (ModernBERT) on its rows
        "transform": 2 * (rows if not spec.lm_head and cls is not None else tokens) * h * t if spec.mlm_transform else 0,
        "output": 2 * tokens * dec * spec.vocab if spec.lm_head else 0,  # logits (t, dec) @ (dec, V)
        # first token of each sequence (ELECTRA's discriminator dense: every token)
        "pooler": 2 * (tokens if per_token_dense(spec) else sequences) * h * h if spec.pooler else 0,
        "classifier": 2 * rows * h * cls.num_labels if cls is not None else 0,  # (rows, h) @ (h, n)
        **side_flops(spec, "head", tokens, seq_len),  # BigBird's classification dense (count/encoder_side.py)
    }


def recompute_forward_flops(layer_flops: dict[str, int], recompute: str) -> int:
    """Extra forward FLOPs of one block under activation recompute (none / selective / full)."""
    if recompute == "full":
        return sum(layer_flops.values())  # the whole block forward again
    if recompute == "selective":  # QK^T, softmax, AV (Korthikanti et al. 2022)
        return sum(layer_flops.get(key, 0) for key in ("attention/score", "cross_attention/score",
                                                          "shared_block/attention/score"))
    return 0


def check_seq_len(spec: "TransformerSpec", seq_len: int, decoder_seq_len: int = 0) -> None:
    """A learned position table caps the sequence length (an encoder-decoder's tables: the source
    and target lengths, count.seq2seq)."""
    if spec.inputs is not None:
        check_input_length(spec, seq_len)  # an image is its tokens (count.encoder_inputs)
    elif spec.arch == "encoder_decoder":
        check_lengths(spec, seq_len, decoder_seq_len)
    elif spec.position == "learned" and seq_len > spec.max_positions:
        raise SpecError(
            f"seq_len ({seq_len}) exceeds max_positions ({spec.max_positions}) "
            f"of {spec.name}'s learned position table"
        )


def decoder_seq_len(spec: "TransformerSpec", training: "TrainingSpec") -> int:
    """Target tokens per sequence of an encoder-decoder (0 for other models)."""
    if spec.arch != "encoder_decoder":
        return 0
    return training.decoder_seq_len or training.seq_len


def _mtp_flops(spec: "TransformerSpec", batch: int, seq_len: int, recompute_mode: str) -> tuple[dict[str, int], int]:
    """Forward FLOPs of the MTP modules (module k on s - k positions) and their blocks' recompute."""
    h = spec.hidden
    leaves: dict[str, int] = {}
    recompute = 0
    for k in range(1, spec.mtp_layers + 1):
        positions = max(seq_len - k, 0)
        tokens = batch * positions
        block = block_forward_flops(spec, mtp_block(spec), tokens, positions)
        recompute += recompute_forward_flops(block, recompute_mode)
        parts = {"proj": 2 * tokens * 2 * h * h, "output": 2 * tokens * h * spec.vocab,  # eh_proj, shared head
                 **{f"block/{key}": value for key, value in block.items()}}
        for key, value in parts.items():
            leaves[key] = leaves.get(key, 0) + value
    return leaves, recompute


def count_flops(spec, training: "TrainingSpec") -> FlopCount:
    """FLOPs of one training step over the global batch, by the model's family (`specs/family.py`)."""
    return family_of(spec).call("flops", spec, training)


def count_transformer_flops(spec, training: "TrainingSpec") -> FlopCount:
    """`count_flops` of a transformer.

    `forward_per_token` is forward / tokens, rounded down when a per-sequence term (the BERT
    pooler) does not divide evenly.
    """
    seq_len, batch = training.seq_len, training.global_batch
    dec_len = decoder_seq_len(spec, training)
    check_seq_len(spec, seq_len, dec_len)
    tokens = batch * seq_len
    inputs = {**embedding_forward_flops(spec, tokens), **embedding_side_flops(spec, tokens),
              **input_flops(spec, tokens, seq_len)}
    leaves: dict[str, int] = {f"embedding/{k}": v for k, v in inputs.items()}
    recompute = 0
    cache: dict[Block, dict[str, int]] = {}
    for index in range(spec.num_blocks):
        block = block_of(spec, index)
        if block not in cache:
            if block.cross:  # decoder stream, cross-attending to the encoder tokens
                cache[block] = block_forward_flops(spec, block, batch * dec_len, dec_len, tokens, seq_len)
            else:
                cache[block] = block_forward_flops(spec, block, tokens, seq_len)
        recompute += recompute_forward_flops(cache[block], training.recompute)
        for key, value in cache[block].items():
            leaves[f"layers/{key}"] = leaves.get(f"layers/{key}", 0) + value
    head_tokens, head_len = (batch * dec_len, dec_len) if dec_len else (tokens, seq_len)
    outputs = {**head_forward_flops(spec, head_tokens, head_len), **head_side_flops(spec, head_tokens),
               **input_head_flops(spec, head_tokens, head_len)}
    for key, value in outputs.items():
        leaves[f"head/{key}"] = value
    if spec.mtp_layers:
        mtp, mtp_recompute = _mtp_flops(spec, batch, seq_len, training.recompute)
        leaves.update({f"mtp/{k}": v for k, v in mtp.items()})
        recompute += mtp_recompute
    vision, frozen, vision_recompute = vision_step_flops(spec, training)  # the tower's images (count.vision_step)
    leaves.update({f"vision/{k}": v for k, v in vision.items()})
    recompute += vision_recompute
    breakdown = with_parents(leaves, TOP_LEVEL)
    forward = sum(value for key, value in breakdown.items() if "/" not in key)
    model = 3 * forward + frozen  # forward + backward (2x: input and weight gradients), PaLM App. B
    return FlopCount(
        forward_per_token=forward // (tokens + batch * dec_len),
        forward=forward,
        model=model,
        hardware=model + recompute,
        breakdown=breakdown,
        convention=CONVENTION,
    )
