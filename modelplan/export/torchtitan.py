"""A torchtitan job for a plan: the settings as data (`torchtitan_job`), written as the Python
config module that torchtitan 0.3 reads (`torchtitan_module.py` renders it).

torchtitan 0.3.0 (the release in `modelplan.export.versions`) replaced TOML job files with
Python config registries: `torchrun -m torchtitan.train --module M --config F` imports module M
and calls F() for a `Trainer.Config`, which `torchtitan.config.ConfigManager` validates. Field
names are those of torchtitan 0.3.0 `torchtitan/config/configs.py` (ParallelismConfig,
TrainingConfig), the model is built from `torchtitan/models/common/config_utils.py`
(make_gqa_config, make_ffn_config, make_moe_config) with the planned sizes, so the job trains the
planned model, not a registry flavor. The pipeline split is written as
`module_fqns_per_model_part` from `modelplan.plan.stages.split_layers`, so uneven stages are
exactly modelplan's (torchtitan assigns virtual stage v to rank v % pp, `loop` style).
Schedule names are torch's `torch.distributed.pipelining.schedules.get_schedule_class` keys.
tests/test_export_engines.py loads every golden export with torchtitan 0.3.0's ConfigManager,
ParallelDims and pipeline split functions in CI.
"""

from __future__ import annotations

from typing import Any, Literal

from modelplan.export.mechanisms import torchtitan_mechanisms
from modelplan.export.result import Engine, EngineExport, LaunchCommand
from modelplan.export.torchtitan_module import CONFIG_FUNCTION, FP8_CONVERTER, render_module
from modelplan.export.versions import release
from modelplan.plan.stages import split_layers
from modelplan.specs.base import Spec
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

# modelplan schedule -> torch.distributed.pipelining schedule name.
SCHEDULE_NAMES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}
TORCHTITAN_DEFAULT_ROPE_THETA = 10000.0
"""torchtitan 0.3.0 `RoPE.Config.theta` default (torchtitan/models/common/rope.py)."""
MODULE_NAME = "modelplan_torchtitan"
"""The config module's file stem; `--module` names it."""


class TorchtitanModel(Spec):
    """The planned network in torchtitan's decoder terms."""

    family: Literal["llama3", "qwen3"]
    """llama3 blocks for dense models; qwen3 blocks (q/k norm, MoE) otherwise."""
    layers: int
    dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    norm_eps: float
    tied_embeddings: bool
    qk_norm: bool
    rope_max_seq_len: int
    rope_theta: float
    """RoPE base (the spec's; torchtitan's RoPE.Config default 10000.0 when the spec has none)."""
    moe_layers: tuple[int, ...] = ()
    """Indices of MoE blocks (the others have a dense SwiGLU MLP)."""
    num_experts: int = 0
    top_k: int = 0
    expert_ffn_hidden: int = 0
    shared_ffn_hidden: int = 0
    """Hidden size of the shared experts together (0: none)."""


class TorchtitanJob(Spec):
    """Everything the config module sets, as data."""

    model: TorchtitanModel
    parallelism: dict[str, Any]
    """ParallelismConfig fields."""
    training: dict[str, Any]
    """TrainingConfig fields."""
    activation_checkpoint: Literal["none", "selective", "full"]
    optimizer: Literal["AdamW", "Adam"]
    fp8: bool
    notes: tuple[str, ...]


def _data_parallel(plan: Plan, notes: list[str]) -> dict[str, Any]:
    """ZeRO stage -> FSDP2 shard/replicate degrees and reshard-after-forward policy (the one
    place to add HSDP: data_parallel_replicate_degree > 1 with a shard degree > 1)."""
    if plan.dp == 1:
        return {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": 1}
    if plan.zero == 0 and plan.world_size == plan.dp and plan.ep == 1:
        return {"data_parallel_replicate_degree": plan.dp, "data_parallel_shard_degree": 1}
    if plan.zero == 0:
        notes.append(
            "ZeRO-0 (replicated) data parallel with other parallelism or experts: torchtitan's "
            "DDP runs on 1-D meshes and its experts borrow ranks from the FSDP axis, so this "
            "uses FSDP with reshard_after_forward = never"
        )
    elif plan.zero in (1, 2):
        notes.append(
            f"ZeRO-{plan.zero}: torchtitan shards with FSDP2; reshard_after_forward = never keeps "
            "gathered weights from forward to backward, but weights are still sharded at rest"
        )
    return {
        "data_parallel_replicate_degree": 1,
        "data_parallel_shard_degree": plan.dp,
        "fsdp_reshard_after_forward": "always" if plan.zero == 3 else "never",
    }


def stage_modules(layers: int, pp: int, vpp: int, split=None) -> list[list[str]]:
    """torchtitan module names of each virtual stage under modelplan's split (the plan's first /
    last stage blocks when it fixes them)."""
    out, start = [], 0
    counts = split_layers(layers, pp * vpp, split)
    for v, count in enumerate(counts):
        names = [f"layers.{i}" for i in range(start, start + count)]
        start += count
        out.append((["tok_embeddings"] if v == 0 else []) + names
                   + (["norm", "lm_head"] if v == len(counts) - 1 else []))
    return out


def _parallelism(model: TransformerSpec, training: TrainingSpec, plan: Plan,
                 notes: list[str]) -> dict[str, Any]:
    par = _data_parallel(plan, notes)
    par["tensor_parallel_degree"] = plan.tp
    par["enable_sequence_parallel"] = plan.sequence_parallel
    par["pipeline_parallel_degree"] = plan.pp
    if plan.pp > 1:
        par["pipeline_parallel_schedule"] = SCHEDULE_NAMES[plan.schedule]
        par["pipeline_parallel_microbatch_size"] = plan.micro_batch
        par["module_fqns_per_model_part"] = stage_modules(model.layers, plan.pp, plan.vpp, plan.stage_split)
    par["context_parallel_degree"] = plan.cp
    par["expert_parallel_degree"] = plan.ep
    torchtitan_mechanisms(par, plan, notes)
    if model.moe is not None and plan.tp > 1:
        notes.append(f"expert-tensor parallel: torchtitan 0.3.0 splits experts over ep ranks "
                     f"taken from dp_shard * cp * tp, not over tp ({plan.tp}) as this plan does")
    if plan.cp > 1 and training.cp_comm_type not in (None, "all_gather"):
        # torchtitan 0.3.0 has no rotate-method field (9dec370 had experimental.context_parallel_rotate_method);
        # its SDPA CP runs torch's dispatcher, whose default rotate method is ALL_GATHER (_ContextParallelOptions)
        notes.append(f"cp_comm_type '{training.cp_comm_type}': torchtitan 0.3.0 has no CP rotate-method field and "
                     "runs PyTorch's default, allgather" + (
                         "; call torch.distributed.tensor.experimental._attention.set_rotate_method('alltoall') "
                         "before training for the ring" if training.cp_comm_type == "p2p" else
                         " (PyTorch's CP has no Ulysses all-to-all)"))
    if plan.cp > 1 and training.seq_len % (plan.tp * 2 * plan.cp):
        notes.append(f"seq_len ({training.seq_len}) must be divisible by tp * 2 * cp "
                     f"({plan.tp * 2 * plan.cp}) for torchtitan's load-balanced context parallel")
    return par


def _model(model: TransformerSpec, training: TrainingSpec, notes: list[str]) -> TorchtitanModel:
    moe = model.moe
    family: Literal["llama3", "qwen3"] = "qwen3" if moe is not None or model.qk_norm else "llama3"
    if model.arch == "encoder":
        notes.append("encoder (BERT) models are not among torchtitan's model families")
    if model.arch == "encoder_decoder":
        notes.append("encoder-decoder models (T5, BART, Whisper) are not among torchtitan's model families")
    differs = {
        "learned positions (torchtitan uses RoPE)": model.position == "learned",
        "no position encoding (torchtitan uses RoPE)": model.position == "none",
        "LayerNorm (torchtitan uses RMSNorm)": model.norm == "layernorm",
        f"a '{model.activation}' MLP (torchtitan uses SwiGLU)":
            not (model.gated_mlp and model.activation == "silu"),
        "linear biases (torchtitan's attention and MLP have none)":
            model.qkv_bias or model.attn_out_bias or model.mlp_bias,
        "parallel attention+MLP blocks": model.parallel_block,
    }
    for what, present in differs.items():
        if present:
            notes.append(f"{what}: written as {family} blocks of the same sizes")
    if model.position == "rotary" and model.rope_theta is None:
        notes.append(f"RoPE base: the spec states none, so torchtitan's RoPE.Config default "
                     f"theta ({TORCHTITAN_DEFAULT_ROPE_THETA:g}) applies")
    if model.position == "rotary" and model.rotary_fraction != 1.0:
        notes.append(f"partial rotary ({model.rotary_fraction:g} of each head): torchtitan rotates "
                     "whole heads")
    if model.mtp_layers:
        notes.append(f"multi-token prediction ({model.mtp_layers} module(s)): not written by this export, so the "
                     "job trains without it while the plan prices it")
    fields: dict[str, Any] = {}
    if moe is not None:
        if moe.router_bias or moe.shared_expert_gate:
            notes.append("router bias / shared-expert gate: not set in torchtitan's MoE config")
        fields = {
            "moe_layers": tuple(i for i in range(model.layers) if model.is_moe_layer(i)),
            "num_experts": moe.num_experts,
            "top_k": moe.top_k,
            "expert_ffn_hidden": moe.expert_ffn_hidden,
            "shared_ffn_hidden": moe.shared_experts
            * (moe.shared_expert_ffn_hidden or moe.expert_ffn_hidden),
        }
    return TorchtitanModel(
        family=family, layers=model.layers, dim=model.hidden, n_heads=model.heads,
        n_kv_heads=model.num_kv_heads, head_dim=model.dim_head, ffn_hidden=model.ffn_hidden,
        vocab=model.vocab, norm_eps=model.norm_eps, tied_embeddings=model.tied_embeddings,
        qk_norm=model.qk_norm, rope_max_seq_len=max(model.max_positions, training.seq_len),
        rope_theta=model.rope_theta or TORCHTITAN_DEFAULT_ROPE_THETA,
        **fields,
    )


def torchtitan_job(model: TransformerSpec, training: TrainingSpec, plan: Plan) -> TorchtitanJob:
    """The torchtitan settings that reproduce `plan` for `model` under `training`."""
    notes: list[str] = []
    m = plan.num_microbatches(training.global_batch)
    parallelism = _parallelism(model, training, plan, notes)
    # local_batch_size is per data-parallel rank per accumulation step; with PP it is split into
    # micro-batches of pipeline_parallel_microbatch_size, without PP the rest is gradient
    # accumulation: global / (local * dp) steps (configs.py TrainingConfig; trainer.py).
    local = plan.micro_batch * m if plan.pp > 1 else plan.micro_batch
    training_table: dict[str, Any] = {
        "local_batch_size": local,
        "global_batch_size": training.global_batch,
        "seq_len": training.seq_len,
        "mixed_precision_param": "float32" if training.precision == "fp32" else "bfloat16",
    }
    if plan.pp > 1 or plan.ep > 1:
        # trainer.py Trainer.Config._validate_cuda_graphs: CUDA graphs refuse pipeline parallel
        # and the all-to-all ("standard") expert dispatcher.
        training_table["disable_cuda_graphs"] = True
    if training.precision == "fp16":
        notes.append("fp16: torchtitan's mixed_precision_param is bfloat16 or float32; "
                     "exported as bfloat16")
    if training.grad_dtype == "same" and training.precision != "fp32":
        notes.append("gradients in the compute dtype: torchtitan reduces in float32 "
                     "(mixed_precision_reduce)")
    recompute = plan.recompute if plan.recompute is not None else training.recompute
    if recompute == "selective":
        notes.append("selective recompute: torchtitan's SelectiveAC saves matmul outputs and "
                     "recomputes the rest, close to but not exactly Megatron's core attention")
    if training.optimizer in ("adam", "adamw"):
        optimizer: Literal["AdamW", "Adam"] = "Adam" if training.optimizer == "adam" else "AdamW"
    else:
        optimizer = "AdamW"
        notes.append(f"optimizer '{training.optimizer}': torchtitan 0.3.0 builds Adam, AdamW or "
                     "DistMuon only; exported as AdamW")
    if plan.pp > 1 and plan.schedule == "gpipe":
        notes.append("GPipe: torchtitan's GPipe schedule keeps all micro-batches' activations")
    return TorchtitanJob(
        model=_model(model, training, notes), parallelism=parallelism, training=training_table,
        activation_checkpoint=recompute, optimizer=optimizer, fp8=training.precision == "fp8",
        notes=tuple(notes),
    )


def to_torchtitan(
    model: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    version: str | None = None,
) -> EngineExport:
    """The Python config module for torchtitan 0.3 (`modelplan_torchtitan.py`)."""
    target = release(Engine.torchtitan, version)
    job = torchtitan_job(model, training, plan)
    program = ("-m", "torchtitan.train", "--module", MODULE_NAME, "--config", CONFIG_FUNCTION)
    header = [
        f"torchtitan {target.version} job for {model.name}: dp={plan.dp} tp={plan.tp} "
        f"pp={plan.pp} vpp={plan.vpp} cp={plan.cp} ep={plan.ep} zero={plan.zero}",
        f"Generated by modelplan for {target.source}.",
        f"Launch on {plan.world_size} GPUs with this file on PYTHONPATH, e.g.",
        f"  PYTHONPATH=. torchrun --nproc_per_node {min(plan.world_size, 8)} "
        + " ".join(program),
    ]
    return EngineExport(
        engine=Engine.torchtitan,
        engine_version=target.version,
        text=render_module(job, header),
        unsupported=job.notes,
        filename=f"{MODULE_NAME}.py",
        launch=LaunchCommand(program=program, env=(("PYTHONPATH", "."),),
                             files=(f"{MODULE_NAME}.py",)),
    )
