"""`modelplan budget`: the best model for a FLOP budget, or for N GPUs for D days, and its plan.

A FLOP budget C gives the compute-optimal size and tokens (`modelplan.cost.scaling`), a shape for
that size (`modelplan.cost.shape`) and, given GPUs, the planner's fastest plan for it and the run
that trains it on its tokens (`modelplan.cost.run`). A GPU-days budget has no FLOP figure until a
plan says how fast the GPUs train: C = GPUs x seconds x achieved FLOP/s per GPU, where the rate
(6 N D over the run's wall clock, failures and checkpoints included) depends on the shape chosen
for C. Starting from 40 % of the dense peak, the loop re-sizes with the rate the last plan
achieved until the chosen shape repeats (a fixed point; a few rounds).
"""

from __future__ import annotations

from typing import Literal

from modelplan.cost.run import RunCost, run_cost
from modelplan.cost.scaling import (
    CHINCHILLA_TOKENS_PER_PARAM,
    LAWS,
    rule_optimum,
    training_flops,
)
from modelplan.cost.shape import LLAMA3_VOCAB, shape_for_params
from modelplan.count.memory import count_memory
from modelplan.count.params import count_params
from modelplan.count.result import Result
from modelplan.errors import SpecError
from modelplan.plan.results import PlanEstimate
from modelplan.specs.hardware import Cluster
from modelplan.specs.run import RunSpec
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

SizeBy = Literal["tokens-per-param", "hoffmann", "besiroglu"]
START_MFU = 0.4
"""First guess of the achieved fraction of peak for a GPU-days budget (refined by the plans)."""
MAX_ROUNDS = 8
CONVERGED = 0.01
"""A GPU-days budget stops re-sizing once the run's wall clock is within 1 % of the days given."""


class Allocation(Result):
    """One way to split a FLOP budget: parameters, tokens and the loss each fitted law predicts."""


    rule: str
    params: float
    tokens: float
    tokens_per_param: float
    loss_hoffmann_nats: float
    loss_besiroglu_nats: float


class Budget(Result):
    """The answer of `modelplan budget`."""


    compute_flops: float
    """The FLOP budget (given, or GPUs x days x the achieved rate)."""
    size_by: str
    allocations: list[Allocation]
    """Every rule's split of the budget (the chosen one is `size_by`)."""
    chosen: Allocation
    spec: TransformerSpec
    """The shape for the chosen size."""
    params: int
    """Its exact parameter count."""
    tokens: int
    """Tokens it trains on: the budget's tokens for the shape's own size (C / 6 N)."""
    plan: PlanEstimate | None = None
    """The planner's best PlanEstimate for the shape (when GPUs are given)."""
    run: RunCost | None = None
    rounds: int = 1
    """Sizing rounds of a GPU-days budget (1 for a FLOP budget)."""
    days_target: float | None = None
    """The days of a GPU-days budget (the run's own wall clock is `run.wall_clock_days`)."""


def allocations(flops: float, tokens_per_param: float) -> list[Allocation]:
    """The budget split by the tokens-per-param rule and by each fitted law's optimum."""
    out = []
    splits = {"tokens-per-param": rule_optimum(flops, tokens_per_param),
              **{name: law.optimum(flops) for name, law in LAWS.items()}}
    for rule, (n, d) in splits.items():
        out.append(Allocation(rule=rule, params=n, tokens=d, tokens_per_param=d / n,
                              loss_hoffmann_nats=LAWS["hoffmann"].loss(n, d),
                              loss_besiroglu_nats=LAWS["besiroglu"].loss(n, d)))
    return out


def size_model(flops: float, size_by: SizeBy = "tokens-per-param",
               tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM, vocab: int = LLAMA3_VOCAB,
               seq_len: int = 4096) -> tuple[list[Allocation], Allocation, TransformerSpec, int, int]:
    """(every split, the chosen split, its shape, the shape's exact params, its tokens C / 6N)."""
    if flops <= 0:
        raise SpecError(f"flops ({flops:g}) must be > 0")
    splits = allocations(flops, tokens_per_param)
    chosen = next(a for a in splits if a.rule == size_by)
    spec = shape_for_params(chosen.params, vocab, seq_len)
    params = count_params(spec).total
    tokens = int(flops / (6.0 * params))
    if tokens < 1:
        raise SpecError(f"flops ({flops:g}) do not train the smallest shape ({params:,} params) on one token")
    return splits, chosen, spec, params, tokens


def _plan_and_run(spec, training, cluster, gpus, tokens, search, run_template: RunSpec):
    """The fastest plan for `spec` and its run on `tokens` tokens."""
    est = search(spec, training, cluster, gpus)
    mem = count_memory(spec, training, est.plan.micro_batch)
    run = run_template.model_copy(update={"tokens": tokens, "steps": None})
    cost = run_cost(run, cluster, gpus, training.global_batch, training.seq_len, est.step.step_time_s,
                    mem.weights + mem.master_weights + mem.optimizer, est.plan.dp * est.plan.micro_batch)
    return est, cost


def budget(
    cluster: Cluster,
    training: TrainingSpec,
    search,
    flops: float | None = None,
    gpus: int | None = None,
    days: float | None = None,
    size_by: SizeBy = "tokens-per-param",
    tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM,
    vocab: int = LLAMA3_VOCAB,
    run_template: RunSpec | None = None,
) -> Budget:
    """Size, shape, plan and run for a FLOP budget (with optional GPUs) or for GPUs x days.

    `search(spec, training, cluster, gpus)` returns the best PlanEstimate (the CLI passes the
    planner's search); it is called once per sizing round.
    """
    run_template = run_template or RunSpec(steps=1)
    kwargs = dict(size_by=size_by, tokens_per_param=tokens_per_param, vocab=vocab, seq_len=training.seq_len)
    if flops is not None:
        if days is not None:
            raise SpecError("give --flops or --days (with --gpus), not both")
        splits, chosen, spec, params, tokens = size_model(flops, **kwargs)
        if gpus is None:
            return Budget(compute_flops=flops, size_by=size_by, allocations=splits, chosen=chosen, spec=spec,
                          params=params, tokens=tokens)
        est, cost = _plan_and_run(spec, training, cluster, gpus, tokens, search, run_template)
        return Budget(compute_flops=flops, size_by=size_by, allocations=splits, chosen=chosen, spec=spec,
                      params=params, tokens=tokens, plan=est, run=cost)
    if gpus is None or days is None:
        raise SpecError("give --flops, or --gpus and --days")
    seconds = days * 86_400
    rate = START_MFU * cluster.accelerator.peak_flops(training.precision)  # FLOP/s per GPU, first guess
    seen: set[tuple[int, int]] = set()
    for rounds in range(1, MAX_ROUNDS + 1):
        compute = gpus * seconds * rate
        splits, chosen, spec, params, tokens = size_model(compute, **kwargs)
        est, cost = _plan_and_run(spec, training, cluster, gpus, tokens, search, run_template)
        if abs(cost.wall_clock_s - seconds) <= CONVERGED * seconds or (spec.hidden, spec.layers) in seen:
            break
        seen.add((spec.hidden, spec.layers))
        rate = training_flops(params, cost.tokens) / cost.wall_clock_s / gpus  # achieved, overheads included
    return Budget(compute_flops=compute, size_by=size_by, allocations=splits, chosen=chosen, spec=spec,
                  params=params, tokens=tokens, plan=est, run=cost, rounds=rounds, days_target=days)
