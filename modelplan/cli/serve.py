"""`modelplan serve MODEL --gpus N --context 32768 --batch B`: serving memory, capacity and speed."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.options import JsonOpt, ModelArg
from modelplan.specs.family import family_of
from modelplan.specs.limits import MAX_BATCH, MAX_SEQ

Weights = Literal["bf16", "fp16", "fp8", "int4"]
KVCache = Literal["bf16", "fp16", "fp8"]


@app.command("serve")
@user_errors
def serve_cmd(
    model: ModelArg,
    context: Annotated[int, typer.Option("--context", min=1, max=MAX_SEQ, help="Tokens per sequence the KV cache holds (prompt + output).")],
    gpus: Annotated[int, typer.Option("--gpus", min=1, help="GPUs serving the model (replicas of --tp GPUs).")] = 8,
    cluster: Annotated[Optional[str], typer.Option("--cluster", help="Cluster preset or file [default: dgx-h100].", show_default=False)] = None,
    batch: Annotated[Optional[int], typer.Option("--batch", min=1, max=MAX_BATCH, help="Sequences per replica in one decode step [default: the most that fit].", show_default=False)] = None,
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", min=1, max=MAX_BATCH, help="Or: concurrent sequences over all replicas.", show_default=False)] = None,
    tp: Annotated[Optional[int], typer.Option("--tp", min=1, help="Tensor-parallel GPUs per replica [default: the largest tp <= min(gpus, GPUs per node) that divides the GPUs and the attention heads and fits the KV heads].", show_default=False)] = None,
    weights: Annotated[Weights, typer.Option("--weights", help="Weight precision: bf16, fp16, fp8 (W8A8) or int4 (GPTQ/AWQ g128, W4A16).")] = "bf16",
    kv_cache: Annotated[KVCache, typer.Option("--kv-cache", help="KV-cache dtype.")] = "bf16",
    block_size: Annotated[int, typer.Option("--block-size", min=1, max=MAX_SEQ, help="Paged-attention block in tokens (vLLM: 16).")] = 16,
    gpu_memory_utilization: Annotated[float, typer.Option("--gpu-memory-utilization", min=0.01, max=1.0, help="Fraction of GPU memory the engine uses (vLLM: 0.9).")] = 0.9,
    max_batched_tokens: Annotated[int, typer.Option("--max-batched-tokens", min=1, max=MAX_SEQ, help="Tokens of one scheduler step (activation workspace).")] = 8192,
    json_out: JsonOpt = False,
) -> None:
    """KV cache per token and sequence, how many sequences fit, decode and prefill speed (roofline)."""
    from modelplan.cli.plan import DEFAULT_CLUSTER
    from modelplan.comm.clusters import load_cluster
    from modelplan.cost.serve import serve_estimate
    from modelplan.count.serve import default_serving_tp
    from modelplan.errors import SpecError, validate_model
    from modelplan.specs.load import load_model
    from modelplan.specs.serve import ServeSpec

    spec = load_model(model)
    if not family_of(spec).blocks:
        raise SpecError(f"serve: {spec.name} is a '{spec.kind}' spec; serving is modelled for transformers")
    cl = load_cluster(cluster or DEFAULT_CLUSTER)
    serve = validate_model(ServeSpec, {
        "context": context, "weights": weights, "kv_cache": kv_cache, "tp": tp or default_serving_tp(spec, gpus, cl.domain_gpus),
        "block_size": block_size, "gpu_memory_utilization": gpu_memory_utilization,
        "max_batched_tokens": max_batched_tokens}, "serve")
    est = serve_estimate(spec, serve, cl, gpus, batch=batch, concurrency=concurrency)
    if json_out:
        import json

        typer.echo(json.dumps({"schema_version": 1, "kind": "modelplan.serve", "model": spec.name, "cluster": cl.name,
                               "serve": serve_inputs(serve), **est.model_dump()}, indent=2))
        return
    print_serve(spec, serve, cl, est)


def serve_inputs(serve) -> dict:
    """The serving settings with their units in the keys."""
    return {"context_tokens": serve.context, "weights": serve.weights, "kv_cache": serve.kv_cache, "tp": serve.tp,
            "block_size_tokens": serve.block_size, "gpu_memory_utilization_fraction": serve.gpu_memory_utilization,
            "max_batched_tokens": serve.max_batched_tokens, "max_num_seqs": serve.max_num_seqs}


def print_serve(spec, serve, cluster, est) -> None:
    """The estimate as aligned text."""
    from modelplan.cli.render import human_bytes, text_table

    mem = est.memory
    typer.echo(typer.style(spec.name, bold=True) + f" served on {est.gpus} x {cluster.accelerator.name}: {est.replicas} "
               f"replica(s) of tp {est.tp}, weights {serve.weights}, KV cache {serve.kv_cache}, context {serve.context:,}")
    kv, mla = spec.num_kv_heads, spec.mla
    if mla is not None and mem.kv_per_token_bytes == spec.layers * (mla.kv_lora_rank + mla.qk_rope_head_dim) * serve.kv_bytes:
        # MLA caches the compressed latent c^KV and the shared rotary key (DeepSeek-V2, arXiv 2405.04434, sec. 2.1)
        typer.echo(f"KV cache per token: {mem.kv_per_token_bytes:,} B = {spec.layers} layers x (latent {mla.kv_lora_rank} "
                   f"+ rotary key {mla.qk_rope_head_dim}) x {serve.kv_bytes} B (MLA); per GPU "
                   f"{mem.kv_per_token_per_gpu_bytes:,} B")
    elif mla is None and spec.layer_types is None and mem.kv_per_token_bytes == 2 * spec.layers * kv * spec.dim_head * serve.kv_bytes:
        typer.echo(f"KV cache per token: {mem.kv_per_token_bytes:,} B = 2 x {spec.layers} layers x {kv} KV heads x "
                   f"{spec.dim_head} x {serve.kv_bytes} B; per GPU {mem.kv_per_token_per_gpu_bytes:,} B")
    elif mla is not None:
        typer.echo(f"KV cache per token: {mem.kv_per_token_bytes:,} B of MLA latents over its attention blocks; per GPU "
                   f"{mem.kv_per_token_per_gpu_bytes:,} B")
    else:  # per-block mixers: windows, chunks and Mamba-style states keep the per-token figure below 2 L kv d
        typer.echo(f"KV cache per token: {mem.kv_per_token_bytes:,} B over its attention blocks ({kv} KV heads x "
                   f"{spec.dim_head}); per GPU {mem.kv_per_token_per_gpu_bytes:,} B; fixed-size states per sequence "
                   f"in whole blocks")
    rows = [
        ("GPU memory x utilization", human_bytes(est.memory_budget_per_gpu_bytes), f"x {serve.gpu_memory_utilization:g}"),
        ("weights", human_bytes(mem.weights_per_gpu_bytes), f"{human_bytes(mem.weights_bytes)} / tp {est.tp}"),
        ("activation workspace (estimate)", human_bytes(est.activation_workspace_per_gpu_bytes),
         f"{serve.max_batched_tokens:,} batched tokens"),
        ("runtime reserve", human_bytes(est.runtime_reserved_per_gpu_bytes), "CUDA context, workspaces"),
        ("KV cache", human_bytes(max(0.0, est.kv_budget_per_gpu_bytes)),
         f"{est.kv_blocks_per_gpu:,} blocks of {serve.block_size} tokens x {human_bytes(mem.kv_per_block_per_gpu_bytes)}"),
    ]
    typer.echo(typer.style("\nMemory per GPU", bold=True))
    for line in text_table(rows, "lrl"):
        typer.echo(line)
    typer.echo(f"one sequence: {mem.blocks_per_sequence:,} blocks = {human_bytes(mem.kv_per_sequence_per_gpu_bytes)} per GPU "
               f"({human_bytes(mem.paging_overhead_per_sequence_per_gpu_bytes)} unused in its last block)")
    typer.echo(typer.style(f"fits {est.max_sequences_per_replica:,} sequences of {serve.context:,} tokens per replica, "
                           f"{est.max_sequences:,} on {est.gpus} GPUs", bold=True))
    if est.max_sequences_per_replica == 0:
        typer.echo(typer.style(
            f"not one sequence fits: weights, workspace and reserve leave {human_bytes(max(0.0, est.kv_budget_per_gpu_bytes))} "
            f"per GPU of {human_bytes(est.memory_budget_per_gpu_bytes)} for the KV cache, one sequence needs "
            f"{human_bytes(mem.kv_per_sequence_per_gpu_bytes)} (try --weights fp8 or int4, a larger --tp, or a shorter "
            "--context); the speeds below assume it did", fg="red"))
    elif not est.fits:
        typer.echo(typer.style(f"the requested {est.batch_per_replica:,} sequences per replica do not fit", fg="red"))
    d, p = est.decode, est.prefill
    typer.echo(typer.style("\nSpeed (roofline estimate)", bold=True))
    rows = [
        (f"decode step, batch {d.tokens:,}", f"{1000 * d.step_s:.2f} ms",
         f"{d.bound}-bound: HBM {1000 * d.memory_s:.2f} ms, compute {1000 * d.compute_s:.2f} ms, TP comm {1000 * d.comm_s:.2f} ms"),
        ("decode throughput", f"{est.decode_tokens_per_s:,.0f} tok/s", f"all replicas; {1000 * est.inter_token_latency_s:.2f} ms between tokens"),
        (f"prefill of {p.tokens:,} tokens", f"{p.step_s:.3f} s",
         f"{p.bound}-bound: compute {p.compute_s:.3f} s, HBM {p.memory_s:.3f} s, TP comm {p.comm_s:.3f} s"),
        ("prefill throughput", f"{est.prefill_tokens_per_s:,.0f} tok/s", f"per replica; {1e3 * p.step_s / p.tokens:.3f} ms per token"),
    ]
    for line in text_table(rows, "lrl"):
        typer.echo(line)

