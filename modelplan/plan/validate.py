"""Is a plan valid for this model, training batch and cluster? All checks in one place.

torchtitan's `parallel_dims` style: every rule lives here, every number is in its message,
and the search uses the same functions to count why it rejected plans. Conventions stated:
- the vocabulary is padded to a multiple of `vocab_divisible_by * tp` (Megatron-LM's
  make-vocab-size-divisible-by), so tp never has to divide vocab;
- when kv_heads < tp and tp is a multiple of kv_heads, each KV head is replicated on
  tp / kv_heads ranks (vLLM / Megatron-core GQA convention); otherwise tp must divide kv_heads;
  MLA has no KV heads to divide (`specs/tp_kv_heads.py` owns the rule);
- every virtual stage holds at least one block: layers >= pp * vpp (uneven splits leave the
  first and last stage lighter, `plan/stages.py`).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.plan.block_kernels import PRICED
from modelplan.plan.block_mix import block_kinds
from modelplan.plan.parallel.cp import cp_problem
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.flush import flush_problem
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.stack_lengths import cp_length_problem, stack_lengths
from modelplan.plan.stages import split_layers
from modelplan.specs.family import FAMILIES
from modelplan.specs.features import architecture_features
from modelplan.specs.hardware import Cluster
from modelplan.specs.load import load_engine
from modelplan.specs.plan import Plan
from modelplan.specs.tp_kv_heads import attention_kv_heads, kv_heads_replicas, tp_kv_heads_problem
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


def padded_vocab(vocab: int, tp: int, divisible_by: int = 128) -> int:
    """Vocabulary rounded up to a multiple of divisible_by * tp (Megatron _vocab_size_with_padding)."""
    multiple = divisible_by * tp
    return -(-vocab // multiple) * multiple


def tp_problems(spec: TransformerSpec, tp: int) -> list[Problem]:
    """Tensor-parallel divisibility: heads, kv_heads (or replication), ffn_hidden."""
    out = []
    if spec.heads % tp:
        out.append(Problem(Reason.TP_HEADS, f"tp ({tp}) must divide heads ({spec.heads})"))
    kv_problem = tp_kv_heads_problem(spec, tp)  # the one rule (MLA: none; MQA: any tp)
    if kv_problem and spec.num_kv_heads != spec.heads:  # MHA: the heads message already says it
        out.append(Problem(Reason.TP_KV_HEADS, kv_problem))
    ffn = spec.moe.expert_ffn_hidden if spec.moe is not None else spec.ffn_hidden
    name = "moe.expert_ffn_hidden" if spec.moe is not None else "ffn_hidden"
    if ffn % tp:
        out.append(Problem(Reason.TP_FFN, f"tp ({tp}) must divide {name} ({ffn})"))
    return out


def tp_node_problem(tp: int, domain_gpus: int) -> Problem | None:
    """TP groups (consecutive ranks) stay inside one NVLink domain (a node, or the cluster's
    `nvlink_domain_gpus`: GB200 NVL72) only when tp divides its GPU count."""
    if domain_gpus % tp == 0:
        return None
    return Problem(
        Reason.TP_NODE,
        f"tp ({tp}) must divide the {domain_gpus} GPUs of an NVLink domain (gpus_per_node, or "
        "nvlink_domain_gpus where the cluster sets it) so TP groups stay on NVLink "
        "(allow with --allow-tp-across-nodes)",
    )


def pp_problem(layers: int, pp: int, vpp: int, num_stages: int | None = None) -> Problem | None:
    """At least one block per model chunk (uneven splits: `plan.stages.split_layers`); a schedule's
    layout may cut the model into more stages than pp * vpp (`num_stages`: ZB-V's two per rank)."""
    n = pp * vpp if num_stages is None else num_stages
    if layers >= n:
        return None
    what = (f"pp * vpp ({pp} * {vpp} = {n})" if n == pp * vpp
            else f"the schedule's pipeline stages ({n // pp} per rank x pp {pp} = {n})")
    return Problem(
        Reason.PP_LAYERS,
        f"{what} must not exceed layers ({layers}): every pipeline stage needs at least one layer",
    )


def encoder_decoder_problem(spec: TransformerSpec, pp: int) -> Problem | None:
    """An encoder-decoder is priced as one stage of blocks (encoder then decoder): its pipeline
    stages are not, since a decoder stage also receives the encoder output and every stage would be
    priced at the model's block mix (Megatron-LM's T5 split: --pipeline-model-parallel-split-rank)."""
    if spec.arch != "encoder_decoder" or pp == 1:
        return None
    return Problem(Reason.NOT_FOR_FAMILY, f"pp ({pp}) > 1: pipeline stages of an encoder-decoder are not "
                                          "priced (decoder stages also receive the encoder output); use pp 1 "
                                          "with dp, tp and ZeRO")


def split_problem(layers: int, pp: int, vpp: int, split) -> Problem | None:
    """A fixed first / last stage (`Plan.stage_split`) needs pipeline stages and must leave every
    other virtual stage at least one block (`plan.stages.split_layers`)."""
    if split is None:
        return None
    if pp * vpp == 1:
        return Problem(Reason.PP_LAYERS, "first_stage_layers / last_stage_layers need pp > 1")
    try:
        split_layers(layers, pp * vpp, split)
    except ValueError as exc:
        return Problem(Reason.PP_LAYERS, str(exc))
    return None


def batch_problem(global_batch: int, micro_batch: int, dp: int) -> Problem | None:
    """Every data-parallel rank runs a whole number of micro-batches."""
    if global_batch % (micro_batch * dp) == 0:
        return None
    return Problem(
        Reason.BATCH,
        f"micro_batch * dp ({micro_batch} * {dp} = {micro_batch * dp}) must divide "
        f"global_batch ({global_batch})",
    )


def plan_problems(
    spec: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    world_size: int | None = None,
    allow_tp_across_nodes: bool = False,
) -> list[Problem]:
    """Every rule `plan` breaks for this model, batch, cluster and GPU count (empty: valid)."""
    out = grid_problems(plan, cluster, world_size)
    out += tp_problems(spec, plan.tp)
    if cluster is not None and not allow_tp_across_nodes:
        problem = tp_node_problem(plan.tp, cluster.domain_gpus)
        if problem:
            out.append(problem)
    problem = (encoder_decoder_problem(spec, plan.pp)
               or pp_problem(spec.num_blocks, plan.pp, plan.vpp, schedule_layout(plan.schedule, plan.pp, plan.vpp).num_stages)
               or split_problem(spec.num_blocks, plan.pp, plan.vpp, plan.stage_split))
    if problem:
        out.append(problem)
    out += microbatch_problems(plan, training.global_batch, training.pp_flush_microbatches)
    problem = engine_pipeline_problem(training.framework, plan.pp, plan.zero, plan.schedule)
    if problem:
        out.append(problem)
    if plan.sequence_parallel and plan.tp == 1:
        out.append(Problem(Reason.SEQUENCE_PARALLEL, "sequence_parallel needs tp > 1 (tp = 1)"))
    problem = cp_length_problem(stack_lengths(spec, training), plan.cp)  # both stacks' lengths
    if problem:
        out.append(problem)
    problem = cp_comm_problem(spec, training, plan.tp, plan.cp)
    if problem:
        out.append(problem)
    problem = ep_problem(spec, plan.dp, plan.ep, plan.tp, plan.cp, plan.etp)
    if problem:
        out.append(problem)
    return out


def engine_pipeline_problem(framework: str, pp: int, zero: int, schedule: str = "1f1b") -> Problem | None:
    """What the engine's pipeline runtime cannot run: DeepSpeed's pipeline engine asserts ZeRO
    stage < 2 ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism",
    deepspeed/runtime/pipe/engine.py) and runs its own 1F1B TrainSchedule only (pipe/schedule.py)."""
    if framework != "deepspeed" or pp == 1:
        return None
    if zero >= 2:
        return Problem(Reason.ENGINE, f"DeepSpeed's pipeline engine needs ZeRO stage < 2 (zero {zero}, pp {pp})")
    if schedule != "1f1b":
        return Problem(Reason.ENGINE, f"DeepSpeed's pipeline engine runs its 1F1B TrainSchedule only "
                                      f"(schedule {schedule}, pp {pp})")
    return None


def cp_comm_problem(spec: TransformerSpec, training: TrainingSpec, tp: int, cp: int) -> Problem | None:
    """The engine's context-parallel exchange (`TrainingSpec.cp_comm_type`, else the engine's
    default) must run at this tp and cp (`parallel/cp.py` cp_problem: Ulysses needs heads and kv
    heads per TP rank divisible by cp; PyTorch's CP has no a2a)."""
    if cp == 1:
        return None
    profile = load_engine(training.framework)
    kind = training.cp_comm_type or profile.cp_comm_type
    kv_local = max(1, attention_kv_heads(spec) // tp)  # a KV head replicated over tp / kv_heads ranks
    message = cp_problem(kind, cp, spec.heads // tp, kv_local, profile.cp_fp32_merge)
    return None if message is None else Problem(Reason.CP_COMM, message)


def grid_problems(plan: Plan, cluster: Cluster | None = None, world_size: int | None = None) -> list[Problem]:
    """The rank grid's rules, the same for every model family: the GPU count and the cluster's size."""
    out: list[Problem] = []
    if world_size is not None and plan.world_size != world_size:
        out.append(
            Problem(
                Reason.WORLD_SIZE,
                f"dp * tp * pp * cp ({plan.dp} * {plan.tp} * {plan.pp} * {plan.cp} = "
                f"{plan.world_size}) must equal the GPU count ({world_size})",
            )
        )
    if cluster is not None and cluster.max_gpus is not None and plan.world_size > cluster.max_gpus:
        out.append(
            Problem(
                Reason.CLUSTER_SIZE,
                f"plan needs {plan.world_size} GPUs but cluster {cluster.name} has "
                f"{cluster.max_gpus} ({cluster.nodes} nodes x {cluster.gpus_per_node})",
            )
        )
    return out


def microbatch_problems(plan: Plan, global_batch: int, pp_flush_microbatches: int | None = None) -> list[Problem]:
    """Whole micro-batches per data-parallel rank, and counts the schedule can run, per flush
    (`pipeline/flush.py`; every family)."""
    problem = batch_problem(global_batch, plan.micro_batch, plan.dp)
    if problem is None:
        problem = flush_problem(plan.schedule, plan.pp, plan.num_microbatches(global_batch), plan.vpp,
                                pp_flush_microbatches)
    return [problem] if problem else []


def ep_problem(spec: TransformerSpec, dp: int, ep: int, tp: int = 1, cp: int = 1,
               etp: int | None = None) -> Problem | None:
    """Expert parallelism: an MoE model, ep dividing num_experts and dp (ep lives inside dp), or
    with an expert tensor-parallel size `etp` (Megatron-core's expert grid: etp x ep x expert-dp
    over the tp x dp x cp ranks of a stage) ep x etp dividing tp x dp x cp and etp the experts'
    width."""
    if etp is not None and etp != tp:
        if spec.moe is None:
            return Problem(Reason.EP, f"etp ({etp}) needs an MoE model")
        if spec.moe.expert_ffn_hidden % etp:
            return Problem(Reason.EP, f"etp ({etp}) must divide moe.expert_ffn_hidden ({spec.moe.expert_ffn_hidden})")
        if spec.moe.num_experts % ep:
            return Problem(Reason.EP, f"ep ({ep}) must divide moe.num_experts ({spec.moe.num_experts})")
        if (tp * dp * cp) % (ep * etp):
            return Problem(Reason.EP, f"ep * etp ({ep} * {etp}) must divide tp * dp * cp ({tp} * {dp} * {cp})")
        return None
    if ep == 1:
        return None
    if spec.moe is None:
        return Problem(Reason.EP, f"ep ({ep}) > 1 needs an MoE model")
    if spec.moe.num_experts % ep:
        return Problem(Reason.EP, f"ep ({ep}) must divide moe.num_experts ({spec.moe.num_experts})")
    if dp % ep:
        return Problem(Reason.EP, f"ep ({ep}) must divide dp ({dp}): experts are split over data-parallel ranks")
    return None


def validate_plan(
    spec: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    world_size: int | None = None,
    allow_tp_across_nodes: bool = False,
) -> None:
    """Raise SpecError naming every broken rule (joined by '; ') unless the plan is valid."""
    problems = plan_problems(spec, training, plan, cluster, world_size, allow_tp_across_nodes)
    if problems:
        raise SpecError("; ".join(p.message for p in problems))


def plan_notes(spec: TransformerSpec, plan: Plan, vocab_divisible_by: int = 128,
               capacity_factor: float | None = None) -> list[str]:
    """Conventions the plan relies on, stated (vocab padding, KV-head replication, MoE dispatch)."""
    notes = []
    padded = padded_vocab(spec.vocab, plan.tp, vocab_divisible_by)
    if padded != spec.vocab:
        notes.append(
            f"vocab padded from {spec.vocab} to {padded} (multiple of {vocab_divisible_by} * tp "
            f"{plan.tp}, Megatron-LM)"
        )
    replicas = kv_heads_replicas(spec, plan.tp)
    if replicas > 1:
        notes.append(f"each of the {spec.num_kv_heads} KV heads is replicated on {replicas} TP ranks")
    moe = spec.moe
    if moe is not None:
        cf = capacity_factor if capacity_factor is not None else 1.0
        how = "dropless, priced at balanced routing" if moe.capacity_factor is None else "capacity factor"
        if plan.etp is not None and plan.etp != plan.tp:  # Megatron-core's expert grid over the stage
            layout = (f"experts split over etp {plan.etp} ranks; each tp rank dispatches its sequence shard "
                      f"x etp; expert gradients reduced over tp*dp*cp/(ep*etp) = "
                      f"{plan.tp * plan.dp * plan.cp // (plan.ep * plan.etp)}")
        else:
            layout = (f"every tp rank dispatches all tokens of its micro-batch; expert gradients reduced over "
                      f"dp*cp/ep = {plan.dp * plan.cp // plan.ep}")
        notes.append(
            f"MoE: {moe.num_experts // plan.ep} of {moe.num_experts} experts per GPU (ep {plan.ep}), each token "
            f"runs top_k {moe.top_k}; AllToAll buffers {cf:g} x tokens x top_k x h ({how}); {layout}")
    if plan.cp > 1:
        notes.append(
            f"context parallel cp {plan.cp}: {plan.cp} ranks hold seq/cp tokens of each sequence; K, V "
            f"exchanged as the engine's cp_comm_type says (p2p: cp ring send/recv overlapped with the attention "
            f"core; all_gather: AllGather of K, V, ReduceScatter of dK, dV; a2a: Ulysses AllToAll of Q, K, V and "
            f"of the output); gradients reduced over "
            f"dp*cp = {plan.dp * plan.cp}; `modelplan verify --cp-comm-type` executes each type")
    features = [f for f in architecture_features(spec) if f not in PRICED]
    if features:  # the kernels and shards are the baseline block's: say what that leaves out
        notes.append(f"step time and per-GPU parameters are priced as baseline blocks: {', '.join(features)} "
                     "not modelled by the planner yet (FLOPs and activation memory are counted)")
    mixed = [moe for moe in (False, True) if len(block_kinds(spec, moe)) > 1]
    if mixed and plan.pp > 1:
        notes.append("block kinds (" + ", ".join(sorted({b.mixer for m in mixed for b, _ in block_kinds(spec, m)}))
                     + ") priced at the model's mix on every stage (`plan/block_mix.py`)")
    return notes


def planning_spec(model: object) -> TransformerSpec:
    """The model as a TransformerSpec (dense or MoE) for the transformer family's evaluator, or a
    one-line error: another family is planned by its own evaluator (`specs/family.py`)."""
    family = FAMILIES.get(getattr(model, "kind", None))  # type: ignore[arg-type]
    if family is None or not family.blocks:
        raise SpecError(f"model: the transformer evaluator takes a transformer spec, not "
                        f"'{getattr(model, 'kind', type(model).__name__)}'; plan it with search_plans / "
                        "estimate_plan, which use its family's evaluator")
    return model
