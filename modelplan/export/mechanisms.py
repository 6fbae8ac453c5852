"""A plan's overlap, offload, sharding and placement choices in each engine's terms.

Each function adds what the engine's launch arguments or config can carry and names the rest
in `notes` (the export's list of what it could not express), so no choice is dropped silently:
- Megatron-LM: `--tp-comm-overlap` (TE userbuffers; its yaml `--tp-comm-overlap-cfg` picks
  ring_exchange per GEMM for 'ring'), `--overlap-grad-reduce` and `--overlap-param-gather`
  (distributed optimizer), `--use-tp-pp-dp-mapping` for the order tp-cp-pp-dp;
- DeepSpeed: `zero_optimization.offload_optimizer` (cpu / nvme), `overlap_comm`, ZeRO++
  (`zero_hpz_partition_size`, `zero_quantized_weights`, `zero_quantized_gradients`) and MiCS
  shard groups (`mics_shard_size`) for HSDP on ZeRO-3;
- torchtitan: `enable_async_tensor_parallel` (needs torch.compile) and HSDP as
  `data_parallel_replicate_degree` x `data_parallel_shard_degree`.
"""

from __future__ import annotations

from typing import Any

from modelplan.specs.plan import Plan

DEFAULT_ORDER = "tp-cp-dp-pp"


def megatron_mechanism_args(plan: Plan, notes: list[str]) -> list[tuple[str, str | None]]:
    """Megatron-LM arguments for the plan's choices."""
    args: list[tuple[str, str | None]] = []
    if plan.tp_overlap in ("ring", "userbuffers"):
        args.append(("--tp-comm-overlap", None))
        if plan.tp_overlap == "ring":
            notes.append("tp_overlap 'ring': give --tp-comm-overlap-cfg a userbuffers yaml with method "
                         "ring_exchange for proj_fprop and fc2_fprop too (TE's default pipelines them)")
    if plan.dp_overlap:
        args.append(("--overlap-grad-reduce", None))
        if plan.zero == 1:
            args.append(("--overlap-param-gather", None))
    if plan.rank_order == "tp-cp-pp-dp":
        args.append(("--use-tp-pp-dp-mapping", None))
    elif plan.rank_order != DEFAULT_ORDER:
        notes.append(f"rank_order '{plan.rank_order}': Megatron-LM orders ranks tp-cp-ep-dp-pp or tp-cp-ep-pp-dp only")
    _common_notes(plan, notes, engine="Megatron-LM", offload=True, sharding=True)
    return args


def deepspeed_mechanisms(zero: dict[str, Any], plan: Plan, notes: list[str], gpus_per_node: int = 8) -> None:
    """Fill DeepSpeed's `zero_optimization` table with the plan's choices."""
    if plan.offload_optimizer != "none":
        zero["offload_optimizer"] = {"device": plan.offload_optimizer, "pin_memory": True}
        if plan.offload_optimizer == "nvme":
            notes.append("offload_optimizer nvme: set zero_optimization.offload_optimizer.nvme_path")
    if plan.dp_overlap is not None:
        zero["overlap_comm"] = plan.dp_overlap
    if plan.zeropp:
        zero.update(zero_hpz_partition_size=max(1, gpus_per_node // (plan.tp * plan.cp)),
                    zero_quantized_weights=True, zero_quantized_gradients=True)
    if plan.fsdp_shard_size:
        if plan.zero == 3:
            zero["mics_shard_size"] = plan.fsdp_shard_size
        else:
            notes.append(f"fsdp_shard_size {plan.fsdp_shard_size} with ZeRO-{plan.zero}: DeepSpeed shards groups "
                         "(MiCS) under ZeRO-3 only")
    if plan.tp_overlap not in (None, "none"):
        notes.append(f"tp_overlap '{plan.tp_overlap}': DeepSpeed AutoTP does not overlap its collectives")
    if plan.offload_activations:
        notes.append("offload_activations: DeepSpeed offloads only checkpointed activations "
                     "(activation_checkpointing.cpu_checkpointing with recompute)")
    if plan.rank_order != DEFAULT_ORDER:
        notes.append(f"rank_order '{plan.rank_order}': DeepSpeed's rank layout is fixed")


def torchtitan_mechanisms(par: dict[str, Any], plan: Plan, notes: list[str]) -> None:
    """Fill torchtitan's `parallelism` table with the plan's choices."""
    if plan.tp_overlap == "ring":
        par["enable_async_tensor_parallel"] = True
        notes.append("async TP needs torch.compile: set compile.enable = true")
    elif plan.tp_overlap == "userbuffers":
        notes.append("tp_overlap 'userbuffers' is Transformer Engine's; torchtitan overlaps TP as async TP ('ring')")
    if plan.fsdp_shard_size:
        par["data_parallel_shard_degree"] = plan.fsdp_shard_size
        par["data_parallel_replicate_degree"] = plan.dp // plan.fsdp_shard_size
    if plan.dp_overlap is False:
        notes.append("dp_overlap off: FSDP2 always prefetches and reduces in the background")
    if plan.rank_order != DEFAULT_ORDER:
        notes.append(f"rank_order '{plan.rank_order}': torchtitan's device mesh orders ranks pp, dp, cp, tp")
    _common_notes(plan, notes, engine="torchtitan", offload=True, sharding=False)


def _common_notes(plan: Plan, notes: list[str], engine: str, offload: bool, sharding: bool) -> None:
    if offload and plan.offload_optimizer != "none":
        notes.append(f"offload_optimizer '{plan.offload_optimizer}': not expressed for {engine} (DeepSpeed "
                     "ZeRO-Offload carries it)")
    if offload and plan.offload_activations:
        notes.append(f"offload_activations: set {engine}'s CPU activation offloading by hand")
    if sharding and plan.fsdp_shard_size:
        notes.append(f"fsdp_shard_size {plan.fsdp_shard_size}: HSDP is not expressed for {engine}")
    if plan.zeropp:
        notes.append(f"zeropp: ZeRO++ is DeepSpeed's; not expressed for {engine}")
