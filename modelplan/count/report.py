"""The `modelplan count` document: params, FLOPs and memory of one model under one training setting.

The JSON form (`modelplan count MODEL --json`) is this dict, schema version 1:

    schema_version  1 (bumped on any incompatible change; fields are only ever added otherwise)
    model           {name, kind, source}
    training        {global_batch, seq_len, decoder_seq_len, micro_batch, precision, optimizer,
                     recompute, attention, grad_dtype, master_weights}
    params          {total, trainable, active, breakdown{slash/path: int}, per_layer[int]}
    flops           {forward_per_token, forward, model, hardware, breakdown{slash/path: int},
                     convention}   (FLOPs of one optimizer step over global_batch sequences)
    memory          {weights, gradients, optimizer, master_weights, model_states, activations,
                     activations_per_layer[int], kv_cache, kv_cache_per_token}   (bytes, one
                     unsharded replica; activations and kv_cache for one micro-batch of
                     micro_batch sequences, kv_cache_per_token for one sequence)
    vision          only for a model with a vision tower: {images_per_seq, image_size, patches_per_image,
                     tokens_per_image, forward_flops_per_image, training_flops_per_image,
                     activation_bytes_per_image, flops_breakdown{slash/path: int}, convention}
                     (one image; `flops` above includes images_per_seq images per sequence)
    not_built       only when the config declares modules its HF class does not build: {mtp:
                     {modules, params, note}} (DeepSeek-V3's num_nextn_predict_layers; not in
                     `params`, FLOPs or memory)
    inputs          only for an image / audio encoder (count.encoder_input_report): what one sequence is
                     {unit: image, image_size, patches, prefix_tokens, tokens,
                     forward_flops_per_image} or {unit: audio, sample_rate, frames_per_second,
                     samples_per_sequence, forward_flops_per_sequence, forward_flops_per_second}

All numbers are exact Python ints; parents in a breakdown are the sums of their children.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.errors import SpecError

if TYPE_CHECKING:
    from modelplan.specs.training import TrainingSpec

SCHEMA_VERSION = 1
MTP_NOTE = ("multi-token prediction modules (num_nextn_predict_layers) the HF class does not build: outside "
            "the total; an engine that trains them (Megatron-core --mtp-num-layers) adds them (spec mtp_layers)")


def count_document(spec, training: "TrainingSpec", micro_batch: int) -> dict:
    """Params, FLOPs and memory of `spec` as one JSON-ready dict (see the module docstring)."""
    from modelplan.count.flops import count_flops
    from modelplan.count.memory import count_memory
    from modelplan.count.params import count_params, not_built_params

    if micro_batch > training.global_batch:
        raise SpecError(
            f"micro_batch ({micro_batch}) must not exceed global_batch ({training.global_batch})"
        )
    if training.global_batch % micro_batch:  # Megatron-core num_microbatches_calculator.py: whole micro-batches
        raise SpecError(f"global_batch ({training.global_batch}) must be divisible by micro_batch ({micro_batch}): "
                        "a step runs whole micro-batches")
    memory = count_memory(spec, training, micro_batch)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "model": {"name": spec.name, "kind": spec.kind, "source": spec.source},
        "training": {
            "global_batch": training.global_batch,
            "seq_len": training.seq_len,
            "decoder_seq_len": training.decoder_seq_len,
            "micro_batch": micro_batch,
            "precision": training.precision,
            "optimizer": training.optimizer,
            "recompute": training.recompute,
            "attention": training.attention,
            "grad_dtype": training.grad_dtype,
            "master_weights": training.uses_master_weights,
        },
        "params": count_params(spec).model_dump(),
        "flops": count_flops(spec, training).model_dump(),
        "memory": {**memory.model_dump(), "model_states": memory.model_states},
    }
    not_built = not_built_params(spec)
    if not_built:
        doc["not_built"] = {"mtp": {"modules": spec.mtp_not_built, "params": not_built["mtp"], "note": MTP_NOTE}}
    if getattr(spec, "vision", None) is not None:
        from modelplan.count.vision_report import vision_document
        from modelplan.count.vision_step import images_per_sequence

        doc["vision"] = vision_document(spec, training.dtype_bytes, images_per_sequence(spec, training))
    if getattr(spec, "inputs", None) is not None:
        from modelplan.count.encoder_input_report import per_input_document

        doc["inputs"] = per_input_document(spec, doc["flops"]["forward"], training.seq_len, training.global_batch)
    return doc
