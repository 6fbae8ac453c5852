"""A vision tower's time and activations on the first pipeline stage, per micro-batch.

The tower and its projector are the `vision` unit of the first stage (`plan/stages.py`: before the
embedding, as Megatron-core's LLaVAModel runs its vision model on the first pipeline stage). Each
micro-batch of b sequences sends b x images_per_seq images through it (`count.vision_step`):

- compute: the tower's blocks are priced as bidirectional encoder blocks of the tower's width
  (`tower_block_spec`) by the text blocks' kernel model (`compute.kernel_times`: the roofline per
  GEMM with its dgrad + wgrad backward, the fused attention at its own rates, the engine's
  element-wise kernels), over micro_batch x images_per_seq images of `tokens` each; windowed blocks
  (Qwen2.5-VL) scale the attention core by their (query, key) pairs; the patch conv, pooling head
  and projector are one GEMM per `count.vision` leaf at the matmul rate. A frozen tower runs
  forward only (`count.vision_step`). The blocks' q/k norms and layer scales are not priced.
- tensor parallelism (`plan/vision_tower_tp.py`): HF / FSDP / DeepSpeed / torchtitan replicate the
  tower over tp (each TP rank of the first stage runs it on the micro-batch's images, its
  parameters held whole, `plan/shard.py`); Megatron-LM splits its blocks over the language model's
  tp (examples/multimodal/model.py: the vision config is a deepcopy of the language model's, with
  sequence_parallel and tp_comm_overlap off): the blocks' kernels at tp, their exposed f / g
  AllReduces, their parameter and activation shares.
- recompute: full re-runs the tower blocks' forward, selective their attention core, as the plan
  does for the text blocks (`count.vision_step.tower_recompute_flops`; transformers'
  `gradient_checkpointing_enable` sets every submodule's `gradient_checkpointing`, the vision
  encoder's too), except on Megatron: Megatron-LM's examples/multimodal/model.py clears the vision
  config's recompute_granularity / method unless `--recompute-vision` ("Toggle --recompute* for
  the vision and language model separately"), so there the tower keeps everything, recomputes
  nothing;
- memory: the tower's activations per in-flight micro-batch join the first stage's
  (`count.vision_step.tower_activation_bytes`).

The tower's parameters are in the data-parallel gradient reduction as the `vision` unit
(`plan/shard.py` `unit_shards`), so its DP traffic is already priced; a frozen tower under an
adapter fine-tune reduces nothing (`plan/finetune.py`: adapters only).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from modelplan.count.vision import vision_forward_flops
from modelplan.count.vision_step import images_per_sequence, tower_activation_bytes, tower_frozen, tower_recompute
from modelplan.plan.compute import kernel_times
from modelplan.plan.vision_tower_tp import tower_activation_saving, tower_tp, tower_tp_seconds

if TYPE_CHECKING:
    from modelplan.plan.commcost import CommPricer
    from modelplan.plan.compute import Roofline
    from modelplan.plan.engine import EngineSettings
    from modelplan.plan.stage_time import BlockTerms
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec

BLOCK_KEYS = "tower/layers/"
"""`count.vision` leaves of the tower's blocks (priced as encoder blocks); the rest (patch conv,
pooling head, projector) are GEMMs of their own."""


def tower_block_spec(spec: "TransformerSpec") -> "TransformerSpec":
    """The tower's blocks as a bidirectional encoder stack (`specs.transformer`) of the tower's
    width, heads, MLP, norms and biases, no table, no head: what `compute.kernel_times` prices."""
    from modelplan.specs.transformer import TransformerSpec

    v = spec.vision
    return TransformerSpec(
        name=f"{spec.name} vision tower", arch="encoder", layers=v.layers, hidden=v.hidden, heads=v.heads,
        ffn_hidden=v.ffn_hidden, vocab=1, max_positions=v.tokens, position="none", norm=v.norm,
        norm_bias=v.norm_bias, norm_placement="pre", qkv_bias=v.qkv_bias, attn_out_bias=v.attn_out_bias,
        mlp_bias=v.mlp_bias, gated_mlp=v.gated_mlp, activation="gelu", final_norm=False, lm_head=False,
        tied_embeddings=False)


def _window_share(spec: "TransformerSpec") -> float:
    """The blocks' attention (query, key) pairs over those of full attention in every block
    (Qwen2.5-VL's windowed blocks see their window only: `count.vision._window_pairs`)."""
    v = spec.vision
    full = v.layers * v.tokens ** 2
    score = vision_forward_flops(v, spec.hidden).get(BLOCK_KEYS + "attention/score", 0)
    return score / (4 * v.hidden * full) if full else 1.0  # score = 2 x 2 h per pair (count.vision)


def tower_seconds(spec: "TransformerSpec", training: "TrainingSpec", roofline: "Roofline", micro_batch: int,
                  recompute: str, software: "EngineSettings", tp: int = 1) -> tuple[float, float]:
    """(forward, backward incl. recompute) seconds of the tower on one micro-batch's images on one
    rank of the first stage (module docstring), its blocks' heads and MLP split over `tp`
    (`vision_tower_tp.tower_tp`; 1: replicated); (0, 0) without images."""
    vision = spec.vision
    images = micro_batch * images_per_sequence(spec, training)
    if vision is None or images == 0:
        return 0.0, 0.0
    leaves = vision_forward_flops(vision, spec.hidden)
    frozen = tower_frozen(training)
    if vision.tower is not None or vision.layers == 0:  # a layer list (DaViT, Swin, SAM) or no blocks (Fuyu)
        # no uniform ViT block to run through the kernel model: every leaf one GEMM at the matmul rate
        fwd_s, bwd_s = _leaf_gemm_seconds(leaves.values(), images, roofline)
        return (fwd_s, 0.0) if frozen else (fwd_s, bwd_s + (fwd_s if recompute == "full" else 0.0))
    # the blocks: one encoder block's kernels over images x tokens (`compute.kernel_times`)
    k = kernel_times(tower_block_spec(spec), tp, False, images, vision.tokens, training.dtype_bytes, 1, roofline,
                     attention=training.attention, software=software)
    window = _window_share(spec)  # windowed blocks: their attention core on their windows' pairs
    core_f, core_b = k.core_fwd_s * window, k.core_bwd_s * window
    block_f = k.fwd_gemm_s + k.fwd_elementwise_s - k.core_fwd_s + core_f
    block_b = k.bwd_gemm_s + k.bwd_elementwise_s - k.core_bwd_s + core_b
    # the patch conv, pooling head and projector: each leaf one GEMM at the matmul rate
    rest_f, rest_b = _leaf_gemm_seconds((n for key, n in leaves.items() if not key.startswith(BLOCK_KEYS)),
                                        images, roofline)
    fwd_s = vision.layers * block_f + rest_f
    if frozen:
        return fwd_s, 0.0
    rerun = block_f if recompute == "full" else core_f if recompute == "selective" else 0.0
    return fwd_s, vision.layers * (block_b + rerun) + rest_b


def _leaf_gemm_seconds(flops_per_image, images: int, roofline: "Roofline") -> tuple[float, float]:
    """(forward, backward) seconds of `count.vision` leaves priced as one GEMM each at the matmul
    rate over `images` images; the backward is the dgrad + wgrad pair, twice the forward."""
    gemms = [images * n for n in flops_per_image if n]
    fwd_s = sum(roofline.overhead_s + n / roofline.matmul_flops_per_s for n in gemms)
    return fwd_s, sum(2 * roofline.overhead_s + 2 * n / roofline.matmul_flops_per_s for n in gemms)

def with_vision_tower(terms: "BlockTerms", spec: "TransformerSpec", training: "TrainingSpec",
                      roofline: "Roofline", micro_batch: int, recompute: str, software: "EngineSettings",
                      tp: int = 1, pricer: "CommPricer | None" = None, tp_shape=None) -> "BlockTerms":
    """`terms` with the tower's seconds in the first stage's embedding kernels (forward, and the
    backward with its recompute) and its activations in the first stage's bytes per micro-batch;
    under an engine that splits its blocks over `tp` (`vision_tower_tp.py`: Megatron) their shares,
    and their exposed AllReduces (priced by `pricer` on the TP group's `tp_shape`) in the embedding's TP seconds."""
    if getattr(spec, "vision", None) is None:
        return terms
    recompute = tower_recompute(recompute, software.framework)
    split = tower_tp(spec, software.framework, tp) if pricer is not None else 1
    fwd_s, bwd_s = tower_seconds(spec, training, roofline, micro_batch, recompute, software, split)
    images = micro_batch * images_per_sequence(spec, training)
    k = terms.kernels
    kernels = k._replace(embedding_fwd_s=k.embedding_fwd_s + fwd_s, embedding_bwd_s=k.embedding_bwd_s + bwd_s)
    kept = tower_activation_bytes(spec, training, images, recompute)
    if kept and recompute != "full":  # the split blocks keep their shares (a full recompute keeps block inputs)
        kept -= tower_activation_saving(spec, training.dtype_bytes, images, split)
    comm = tower_tp_seconds(spec, training, pricer, tp_shape, split, images) if split > 1 else 0.0
    return replace(terms, kernels=kernels, tp=terms.tp._replace(embedding_s=terms.tp.embedding_s + comm),
                   embedding_activation_bytes=terms.embedding_activation_bytes + kept)
