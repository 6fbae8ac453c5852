"""What `verify` runs for a network (MLP, CNN, RNN): its rank program and the plan's data, as a
`FamilyRun` that `execute/verify.py` runs and checks as it does a transformer's:
loss; every gradient and updated parameter reassembled from its shards (1e-9 relative); each
rank's ledger against the communication list (`plan/net_commlist.py`); weights, gradients and
optimizer state held per rank against `plan/net_shard.py`; plus the peak activations each rank
kept for backward against the activation model; step order against the schedule; bubble.

BatchNorm: statistics are those of each forward call's batch, as `nn.BatchNorm2d` computes them
on each data-parallel replica (no SyncBatchNorm). The single-device reference therefore runs
the global batch as the same micro-batches with gradient accumulation, normalising each by its
own statistics; a reference with whole-batch statistics would differ by design, not by error.
Running statistics are local to each rank (DDP would broadcast rank 0's at the next forward)
and are not compared.
"""

from __future__ import annotations

from dataclasses import replace

from modelplan.count.network import network_layers
from modelplan.execute.family_run import FamilyRun
from modelplan.execute.memory_check import planned_network_memory
from modelplan.execute.net.engine import NetJob, NetRankResult, net_param_defs, net_train_step
from modelplan.execute.net.loss import LossKind
from modelplan.execute.net.params import init_params
from modelplan.execute.net.scale import check_network_plan, scale_network
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle import OracleKind, oracle_note
from modelplan.execute.report import VerifyRow
from modelplan.execute.step_checks import DEFAULT_STEPS, default_optimizer, oracle_steps
from modelplan.plan.net_commlist import net_communication_list
from modelplan.plan.net_layout import StagePlan, describe_stages
from modelplan.plan.net_shard import rank_activations, net_rank_elements
from modelplan.plan.net_tp import TpRole
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

ADAM_EPS = 1e-6
"""Adam's eps in verify runs (see the note it adds)."""


def stage_notes(stages: list[StagePlan]) -> list[str]:
    """Stage boundaries and tensor-parallel layout, one line each."""
    notes = [describe_stages(stages)] if len(stages) > 1 else []
    split = {}
    for st in stages:
        for path, r in st.roles.items():
            if r.role is not TpRole.REPLICATED or r.gather_after:
                split[path] = r.role.value + (" + all-gather" if r.gather_after else "")
    if split:
        notes.append("tensor parallel: " + ", ".join(f"{p} {r}" for p, r in split.items())
                     + "; every other layer replicated")
    return notes


def check_activations(results: list[NetRankResult], expected) -> VerifyRow:
    """Peak activation elements and fixed bytes per rank against `plan/net_shard.py`."""
    got = [(r.activation_elements, r.activation_fixed_bytes) for r in results]
    want = [(expected[r.coords.pp_rank].elements, expected[r.coords.pp_rank].fixed_bytes) for r in results]
    wrong = [i for i in range(len(got)) if got[i] != want[i]]
    detail = (f"peak per rank {min(g[0] for g in got)}..{max(g[0] for g in got)} float elements, "
              f"{min(g[1] for g in got)}..{max(g[1] for g in got)} B of masks/indices")
    if wrong:
        i = wrong[0]
        detail = (f"{len(wrong)} rank(s) differ; rank {results[i].rank} kept {got[i][0]} elements + "
                  f"{got[i][1]} B, net_shard.py says {want[i][0]} + {want[i][1]} B")
    return VerifyRow(name="held activations", passed=not wrong, detail=detail,
                     measured=sum(g[0] for g in got), expected=sum(w[0] for w in want))


def network_run(spec: NetworkSpec, training: TrainingSpec, plan: Plan, *, seed: int = 0, scale: bool = True,
                optimizer: OptimizerConfig | None = None, loss: LossKind | None = None,
                oracle: OracleKind = OracleKind.NUMPY, steps: int = DEFAULT_STEPS,
                layers_per_stage: int = 1) -> FamilyRun:
    """A network's `FamilyRun` for `execute.verify.run_and_check`: scaled down, its rank program
    (`engine.net_train_step`), its communication list, held elements, kept activations and memory.
    (`layers_per_stage` is the transformers' option; a network's stages are its units.)"""
    notes = ["float64 throughout; the reference runs the same micro-batches with gradient accumulation",
             oracle_note(oracle)]
    if any(r.type.startswith("batchnorm") for r in network_layers(spec)):
        notes.append("BatchNorm: statistics of each micro-batch on every replica, as nn.BatchNorm2d under "
                     "DDP (no SyncBatchNorm); running statistics stay local and are not compared")
    if scale:
        scaled = scale_network(spec, plan)
        if scaled is not spec:
            notes.append(f"scaled down: {spec.name} widths and inputs shrunk (structure kept)")
        spec = scaled
    check_network_plan(spec, training, plan)
    if (plan.recompute or training.recompute) != "none":
        notes.append("recompute not executed for networks (same math, same communication)")
    if optimizer is None:
        has_bn = any(r.type.startswith("batchnorm") for r in network_layers(spec))
        optimizer = default_optimizer(training, steps)
        if has_bn:
            optimizer = replace(optimizer, eps=ADAM_EPS)
        if has_bn and training.optimizer in ("adam", "adamw"):
            notes.append(f"Adam eps {ADAM_EPS:g} (PyTorch's default 1e-8): BatchNorm makes some gradients exactly "
                         "zero in exact arithmetic; the first update divides their float noise by eps (lr/eps "
                         "amplification), which the update check allows element by element; the larger eps keeps "
                         "that allowance 100x smaller")
    job = NetJob(spec, training, plan, seed, optimizer, steps, loss=loss)
    stages = job.stages()
    states = job.optimizer.num_states
    return FamilyRun(
        spec=spec, training=training, job=job, step=net_train_step, notes=notes + stage_notes(stages),
        param_defs=net_param_defs(stages),
        reference=lambda kind, starts: oracle_steps(kind, spec, init_params(network_layers(spec), seed),
                                                    job.batches(), job.optimizer, micro_batch=plan.micro_batch,
                                                    seed=seed, starts=starts),
        comm_items=lambda: net_communication_list(stages, training, plan, element_bytes=8),
        rank_elements=lambda: net_rank_elements(stages, plan, states),
        planned_memory=lambda schedule: planned_network_memory(stages, plan, states, schedule),
        extra_rows=lambda results, schedule: [check_activations(results, rank_activations(stages, plan, schedule))])
