"""Evaluate one given plan: validate it, price it, and say whether and why it fits; the
transformer family's evaluator (`TransformerEvaluator`, `plan/protocol.py`)."""

from __future__ import annotations

from functools import cached_property

from modelplan.errors import SpecError
from modelplan.plan.engine import engine_assumptions
from modelplan.plan.results import PlanEstimate, StepTime
from modelplan.plan.evaluator import Evaluation, Evaluator, PlanPoint
from modelplan.plan.fp8 import param_gather_note
from modelplan.plan.mechanisms import mechanism_notes
from modelplan.plan.problems import Problem
from modelplan.plan.protocol import estimate_with
from modelplan.plan.space import divisors
from modelplan.plan.tensor_rate import clock_note, tensor_rate_note
from modelplan.specs.family import family_of
from modelplan.plan.validate import encoder_decoder_problem, plan_notes, plan_problems, pp_problem, tp_problems
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


def to_estimate(evaluator: Evaluator, ev: Evaluation, plan: Plan, memory_headroom: float = 0.0) -> PlanEstimate:
    """Turn the hot loop's tuple into the frozen, documented result."""
    budget = evaluator.memory_bytes * (1 - memory_headroom)
    n = plan.world_size
    s = ev.step
    step = s.step_time_s
    peak = evaluator.roofline.peak_flops_per_s
    tokens = evaluator.training.global_batch * evaluator.training.seq_len
    busy = step - s.bubble_s - s.dp_comm_s - s.embedding_sync_s - s.optimizer_s
    memory = [ev.memory_first]
    if ev.memory_mid is not None:
        memory.append(ev.memory_mid)
    if plan.pp > 1:
        memory.append(ev.memory_last)
    return PlanEstimate(
        plan=plan,
        num_microbatches=ev.num_microbatches,
        step=StepTime(**s._asdict()),
        throughput_per_s=tokens / step,
        throughput_unit="tokens",
        model_tflops_per_gpu=ev.model_flops / step / n / 1e12,
        hardware_tflops_per_gpu=ev.hardware_flops / step / n / 1e12,
        mfu=ev.model_flops / (step * n * peak),
        hfu=ev.hardware_flops / (step * n * peak),
        model_flops=ev.model_flops,
        hardware_flops=ev.hardware_flops,
        bubble_fraction=s.bubble_s / busy if busy > 0 else 0.0,
        memory=memory,
        peak_memory_bytes=ev.peak_memory_bytes,
        memory_budget_bytes=budget,
        fits=ev.peak_memory_bytes <= budget,
        notes=[*plan_notes(evaluator.spec, plan, evaluator.cost.vocab_divisible_by, evaluator.capacity_factor),
               engine_assumptions(evaluator.software, evaluator.cluster.accelerator.attention_rates(
                   evaluator.software.attention_kernels), evaluator.cost.fragmentation_fraction,
                   evaluator.cost.runtime_reserved_bytes, evaluator.training.attention,
                   evaluator.cost.nccl_buffer_bytes_per_group),
               *_rate_notes(evaluator),
               *mechanism_notes(evaluator, plan, s, ev.memory_first)],
    )


def _rate_notes(evaluator: Evaluator) -> list[str]:
    """The part's clock and the engine's tensor-rate factor, where either is applied (`plan/tensor_rate.py`),
    and fp8 parameter gathers the engine's recipe cannot do (`fp8.param_gather_note`)."""
    acc, sw = evaluator.cluster.accelerator, evaluator.software
    notes = (clock_note(acc), tensor_rate_note(evaluator.tensor_rate, sw.framework, acc),
             param_gather_note(evaluator.training.fp8_param_gather, sw.fp8_recipe, sw.fp8_backend))
    return [note for note in notes if note is not None]


def evaluate_plan(
    evaluator: Evaluator, plan: Plan, memory_headroom: float = 0.0
) -> PlanEstimate:
    """Price a plan already known to be valid (the search's final step)."""
    return to_estimate(evaluator, evaluator.evaluate(PlanPoint.of(plan, evaluator.training)), plan, memory_headroom)


def estimate_plan(
    spec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster,
    cost: CostModel | None = None,
    *,
    world_size: int | None = None,
    memory_headroom: float = 0.0,
    allow_tp_across_nodes: bool = False,
) -> PlanEstimate:
    """Validate `plan` (SpecError naming every broken rule) and predict its step and memory, with
    the model family's evaluator (`specs/family.py`, `plan/protocol.py`)."""
    ev = family_of(spec).call("evaluator", spec, training, cluster, cost)
    return estimate_with(ev, plan, cluster, world_size=world_size, memory_headroom=memory_headroom,
                         allow_tp_across_nodes=allow_tp_across_nodes)


def block_vpps(layers: int, pp: int) -> list[int]:
    """The interleaved schedule's default vpps for `layers` blocks: every chunk count >= 2 that
    splits the blocks evenly, or for an uneven split 2..8 while each chunk keeps a block (the
    bubble's gain (p-1)/(v m) flattens while the messages grow with v); none at pp 1."""
    if pp == 1:
        return []
    if layers % pp == 0:
        return [v for v in divisors(layers // pp) if v >= 2]
    return list(range(2, min(8, layers // pp) + 1))


class TransformerEvaluator:
    """The transformer family's `PlanEvaluator`: the rules of `validate.py` and the prices of
    `Evaluator` (the bounded search's hot-loop pricer, built when first needed)."""

    max_microbatches = None

    def __init__(self, spec: TransformerSpec, training: TrainingSpec, cluster: Cluster, cost: CostModel | None = None):
        self.spec, self.training, self.cluster, self.cost = spec, training, cluster, cost
        self.units = spec.num_blocks

    @cached_property
    def evaluator(self) -> Evaluator:
        return Evaluator(self.spec, self.training, self.cluster, self.cost)

    @property
    def memory_bytes(self) -> float:
        return self.cluster.accelerator.memory_capacity_bytes

    def problems(self, plan: Plan, cluster: Cluster | None = None, world_size: int | None = None,
                 allow_tp_across_nodes: bool = False) -> list[Problem]:
        return plan_problems(self.spec, self.training, plan, cluster, world_size, allow_tp_across_nodes)

    def tp_problems(self, tp: int) -> list[Problem]:
        return tp_problems(self.spec, tp)

    def stage_problem(self, pp: int, vpp: int, num_stages: int) -> Problem | None:
        return encoder_decoder_problem(self.spec, pp) or pp_problem(self.spec.num_blocks, pp, vpp, num_stages)

    def vpp_default(self, pp: int) -> list[int]:
        return block_vpps(self.spec.num_blocks, pp)

    def estimate(self, plan: Plan, memory_headroom: float = 0.0) -> PlanEstimate:
        return evaluate_plan(self.evaluator, plan, memory_headroom)

    def step_floor_s(self, plan: Plan) -> float:
        return 0.0  # its bounds live in its own search (`search.py`)

    def search_notes(self, best: PlanEstimate, best_of: dict[str, PlanEstimate]) -> list[str]:
        return []


def _validated(spec: TransformerSpec, training: TrainingSpec, plan: Plan, cluster: Cluster, cost: CostModel | None,
               world_size: int | None, allow_tp_across_nodes: bool) -> Evaluator:
    """The plan's evaluator, once `plan_problems` finds nothing (else SpecError naming every rule)."""
    problems = plan_problems(spec, training, plan, cluster, world_size, allow_tp_across_nodes)
    if problems:
        raise SpecError("; ".join(p.message for p in problems))
    return Evaluator(spec, training, cluster, cost)


def estimate_split(
    spec: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster,
    cost: CostModel | None = None,
    *,
    world_size: int | None = None,
    memory_headroom: float = 0.0,
    allow_tp_across_nodes: bool = False,
) -> PlanEstimate:
    """`estimate_plan` with the stage split searched when the plan leaves it open (pp > 1, no
    first / last stage blocks): the split candidates of `Evaluator.split_candidates` in order,
    the first that fits (else the one needing the least memory), as `modelplan plan` chooses it."""
    if plan.pp == 1 or plan.stage_split is not None or not family_of(spec).stage_split:
        return estimate_plan(spec, training, plan, cluster, cost, world_size=world_size,
                             memory_headroom=memory_headroom, allow_tp_across_nodes=allow_tp_across_nodes)
    evaluator = _validated(spec, training, plan, cluster, cost, world_size, allow_tp_across_nodes)
    point = PlanPoint.of(plan, training)
    budget = evaluator.memory_bytes * (1 - memory_headroom)
    best = None
    for split in evaluator.split_candidates(point.tp, point.sequence_parallel, point.micro_batch, point.recompute,
                                            point.pp, point.ep, point.cp, point.schedule, point.vpp, point.etp):
        ev = evaluator.evaluate(point._replace(split=split))
        if best is None or ev.peak_memory_bytes < best[1].peak_memory_bytes:
            best = (split, ev)
        if ev.peak_memory_bytes <= budget:
            best = (split, ev)
            break
    split, ev = best
    if split is not None:
        plan = plan.model_copy(update={"first_stage_layers": split[0], "last_stage_layers": split[1]})
    return to_estimate(evaluator, ev, plan, memory_headroom)


def fit_explanation(est: PlanEstimate, memory_gb: float, memory_headroom: float) -> str:
    """One line: does the plan fit, and what dominates its largest stage (`memory_gb`: the
    device's capacity, `Accelerator.memory_capacity_bytes` / 1e9)."""
    worst = max(est.memory, key=lambda s: s.total)
    parts = {
        "weights": worst.weights, "gradients": worst.gradients, "optimizer": worst.optimizer,
        "activations": worst.activations, "buffers": worst.comm_buffers,
        "fragmentation": worst.fragmentation, "reserved": worst.reserved,
    }
    top = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])[:3])
    verdict = "fits" if est.fits else "does not fit"
    cmp = "<=" if est.fits else ">"
    return (
        f"{verdict}: stage {worst.stage} needs {worst.total / 1e9:.1f} GB {cmp} "
        f"{est.memory_budget_bytes / 1e9:.1f} GB ({memory_gb:.1f} GB x (1 - {memory_headroom:g} headroom)); "
        f"largest: {top} GB"
    )
