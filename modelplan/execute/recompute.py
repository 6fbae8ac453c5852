"""What the executor recomputes, from the run's recompute settings, as Megatron-core runs them
(transformer_block.py `_checkpointed_forward`, transformer_config.py `recompute_modules`,
core_v0.16):

- full, no method: every block is its own checkpoint (its input kept, its forward re-run with its
  communication just before its backward);
- full, uniform N: a pipeline chunk's blocks in groups of N (the last group may be short), each
  group one checkpoint: only the group's input is kept, the whole group re-runs before its
  backward;
- full, block N: the chunk's first N blocks each their own checkpoint, the others keep everything;
- selective with the attention core (`--recompute-modules core_attn`, and Megatron's plain
  `--recompute-granularity selective`): the score core's probabilities are dropped after forward
  and recomputed from the kept Q, K, V before its backward (no communication: under context
  parallelism's AllGather the K, V are gathered again in backward anyway). Under the p2p ring
  the core is not recomputed (its blocks come round the ring: re-running them is communication
  the list does not hold).

What the executor does not run (the other `recompute_modules`, torchtitan's and fms-fsdp's
selective modes) it keeps, and `unexecuted` names it for the report.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.plan.engine import engine_settings
from modelplan.specs.load import load_engine
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec


@dataclass(frozen=True)
class Recompute:
    """The recompute the executor performs."""

    full: bool = False
    """Blocks are checkpointed (`groups` says which)."""
    method: str | None = None
    """Megatron-core `recompute_method` under full: uniform, block, or None (each block alone)."""
    num_layers: int | None = None
    """Megatron-core `recompute_num_layers`: the group size (uniform), the checkpointed blocks (block)."""
    core_attn: bool = False
    """The attention core's probabilities are dropped in forward and recomputed in backward."""

    def groups(self, layers: range) -> list[tuple[range, bool]]:
        """A chunk's blocks as (consecutive blocks, whether they are one checkpoint), in order."""
        if not self.full:
            return [(range(i, i + 1), False) for i in layers]
        n = self.num_layers or 1
        if self.method == "block":  # the first n blocks each a checkpoint, the rest plain
            return [(range(i, i + 1), k < n) for k, i in enumerate(layers)]
        if self.method != "uniform":
            n = 1
        return [(range(i, min(i + n, layers.stop)), True) for i in range(layers.start, layers.stop, n)]


def _mode(training: TrainingSpec, plan: Plan) -> str:
    return plan.recompute if plan.recompute is not None else training.recompute


def _cp_ring(training: TrainingSpec, plan: Plan) -> bool:
    if plan.cp == 1:
        return False
    software = engine_settings(training, load_engine(training.framework))
    return software.cp_comm_type == "p2p"


def _selective_modules(training: TrainingSpec) -> tuple[str, ...] | None:
    """The modules selective recompute names (`recompute_modules`, else ("core_attn",) for the
    attention-core mode), or None for a mode that is not a module list (op_sac, layer_sac, ...)."""
    if training.recompute_modules:
        return tuple(training.recompute_modules)
    ac_mode = engine_settings(training, load_engine(training.framework)).ac_mode
    return ("core_attn",) if ac_mode == "attention_core" else None


def recompute_of(training: TrainingSpec, plan: Plan) -> Recompute:
    """What the executor recomputes for the run (module docstring)."""
    mode = _mode(training, plan)
    if mode == "full":
        return Recompute(full=True, method=training.recompute_method, num_layers=training.recompute_num_layers)
    if mode == "selective":
        modules = _selective_modules(training) or ()
        return Recompute(core_attn="core_attn" in modules and not _cp_ring(training, plan))
    return Recompute()


def unexecuted(training: TrainingSpec, plan: Plan) -> str | None:
    """What of the run's selective recompute the executor keeps instead of recomputing, in words
    (None when it runs all of it)."""
    if _mode(training, plan) != "selective":
        return None
    modules = _selective_modules(training)
    if modules is None:
        ac_mode = engine_settings(training, load_engine(training.framework)).ac_mode
        return f"selective recompute ({ac_mode})"
    left = [m for m in modules if m != "core_attn" or _cp_ring(training, plan)]
    if not left:
        return None
    what = f"recompute_modules {', '.join(left)}" if training.recompute_modules else "selective recompute (core_attn)"
    return what + (" (core_attn under the cp p2p ring: its K, V blocks would go round the ring again)"
                   if "core_attn" in left else "")


def chunk_blocks_for(rc: Recompute, layers_per_stage: int) -> int:
    """Blocks per chunk of the scaled-down model that let a method show its split: uniform, a
    multiple of N (where the planner's 1/N of a block's input per block is exact,
    `plan/recompute_layers.py`); block, more than N (recomputed and plain blocks both present)."""
    n = rc.num_layers or 1
    if rc.full and rc.method == "uniform":
        return -(-layers_per_stage // n) * n
    if rc.full and rc.method == "block":
        return max(layers_per_stage, n + 1)
    return layers_per_stage


def recompute_notes(training: TrainingSpec, plan: Plan, chunk_layers: int) -> list[str]:
    """The report's lines on recompute: what the executor runs, what it keeps instead (module
    docstring), and a method whose N the (scaled-down) chunks of `chunk_layers` blocks cannot show."""
    rc, notes = recompute_of(training, plan), []
    if rc.full and rc.method is not None:
        what = (f"uniform groups of {rc.num_layers} blocks, each keeping only its input" if rc.method == "uniform"
                else f"block method: the first {rc.num_layers} blocks of each chunk checkpointed, the rest keep all")
        notes.append(f"full recompute executed as Megatron-core's {what}, re-run before its backward")
        n = rc.num_layers or 1
        if rc.method == "block" and n >= chunk_layers:
            notes.append(f"recompute_num_layers ({n}) covers the whole chunk of {chunk_layers} block(s) verify "
                         f"runs (every block recomputed): --layers-per-stage {n + 1} executes the method's split")
        elif rc.method == "uniform" and n > 1 and chunk_layers == 1:
            notes.append(f"chunks of 1 block: each group is one block; --layers-per-stage {n} executes groups of {n}")
    if rc.core_attn:
        notes.append("attention core recomputed (core_attn): its probabilities dropped after forward "
                     "and recomputed from the kept Q, K, V before its backward")
    kept = unexecuted(training, plan)
    if kept is not None:
        notes.append(f"{kept} not executed: kept instead of recomputed (same math, same communication); the "
                     "activation check compares with the planner's figure without it")
    return notes
