"""Settings that contradict each other, or that act on nothing in the plans asked for: one place,
checked before a search runs (`modelplan plan`) or a plan executes (`modelplan verify`).

A contradiction is refused: `check_settings` raises a SpecError naming the field and both values,
where the engines refuse the same pair (Megatron-LM asserts that --tp-comm-overlap needs
sequence parallelism, arguments.py; Megatron-core that --overlap-moe-expert-parallel-comm needs
expert parallelism, transformer_config.py) or where a setting names the one value of another
that was ruled out (`ac_mode` with recompute 'none'). A setting with nothing to act on is
returned as a warning line, printed once, and the run goes on, as the engines go on (Megatron-LM
disables sequence parallelism at tp 1 with a warning, arguments.py `validate_args`).

`Asked` is what the run leaves open: each parallel axis as the set of sizes it may take (None:
any), and the recompute policies, ZeRO stages and wider-search values asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.errors import SpecError
from modelplan.plan.engine import engine_settings
from modelplan.plan.space import LONG_SEQUENCE, IntChoice, SearchSpace, _choose
from modelplan.specs.engine import EngineProfile
from modelplan.specs.plan import Plan, Schedule
from modelplan.specs.training import TrainingSpec

TE_RECIPES = ("delayed", "current", "blockwise")
"""fp8 recipes Transformer Engine runs (DelayedScaling, Float8CurrentScaling, Float8BlockScaling;
Megatron-core enums.Fp8Recipe delayed / tensorwise / blockwise)."""
TORCHAO_RECIPES = ("tensorwise", "rowwise", "blockwise")
"""fp8 recipes torchao runs (torchao/float8/config.py Float8LinearRecipeName TENSORWISE, ROWWISE;
torchao's blockwise fp8 training prototype)."""


@dataclass(frozen=True)
class Asked:
    """What a run leaves open: per axis the sizes it may take (None: any), and the values of the
    other searched settings (None: every value)."""

    tp: frozenset[int] | None = None
    pp: frozenset[int] | None = None
    dp: frozenset[int] | None = None
    cp: frozenset[int] | None = None
    ep: frozenset[int] | None = None
    recompute: frozenset[str] | None = None
    zero: frozenset[int] | None = None
    schedule: tuple[str, ...] | None = None
    """The pipeline schedules named by the user (None: not named)."""
    sequence_parallel: frozenset[bool] | None = None
    tp_overlap: frozenset[str] | None = None
    fsdp_shard_size: frozenset[int] | None = None
    zeropp: frozenset[bool] | None = None
    offload_activations: frozenset[bool] | None = None
    reshard_after_forward: bool | str = "default"
    cp_by_default: bool = False
    """cp was left open and is 1 by the search's rule (below `LONG_SEQUENCE`)."""


def _sizes(choice: IntChoice | None, cap: int) -> frozenset[int] | None:
    """The sizes an axis may take, as the search reads them (`space._choose`); None: any."""
    return None if choice is None else frozenset(_choose(choice, [], cap))


def _set(values) -> frozenset | None:
    return None if values is None else frozenset(values)


def asked_of_space(space: SearchSpace, training: TrainingSpec, gpus: int) -> Asked:
    """A search space's open values; cp left open is 1 below `LONG_SEQUENCE` (the search's default)."""
    tp = _sizes(space.tp, gpus)
    if tp is None and space.max_tp == 1:
        tp = frozenset({1})
    cp = _sizes(space.cp, gpus)
    cp_by_default = cp is None and training.seq_len < LONG_SEQUENCE
    if cp_by_default:
        cp = frozenset({1})
    return Asked(
        tp=tp, pp=_sizes(space.pp, gpus), dp=_sizes(space.dp, gpus), cp=cp, ep=_sizes(space.ep, gpus),
        recompute=_set(space.recompute), zero=_set(space.zero),
        schedule=None if space.schedule is None else tuple(str(s) for s in space.schedule),
        sequence_parallel=_set(space.sequence_parallel), tp_overlap=_set(space.tp_overlap),
        fsdp_shard_size=_set(space.fsdp_shard_size), zeropp=_set(space.zeropp),
        offload_activations=_set(space.offload_activations),
        reshard_after_forward=space.reshard_after_forward,
        cp_by_default=cp_by_default)


def asked_of_plan(plan: Plan, training: TrainingSpec) -> Asked:
    """One plan's values (every axis fixed)."""
    one = frozenset
    return Asked(tp=one({plan.tp}), pp=one({plan.pp}), dp=one({plan.dp}), cp=one({plan.cp}), ep=one({plan.ep}),
                 recompute=one({plan.recompute or training.recompute}), zero=one({plan.zero}),
                 sequence_parallel=one({plan.sequence_parallel}))


def _only(values: frozenset | None, *allowed) -> bool:
    """Every value asked is one of `allowed` (an axis left open is not)."""
    return values is not None and values <= set(allowed)


def _lacks(values: frozenset | None, value) -> bool:
    """`value` is not among those asked (an open setting has every value)."""
    return values is not None and value not in values


def _listed(values) -> str:
    return ", ".join(str(v) for v in sorted(values))


def check_settings(spec, training: TrainingSpec, asked: Asked, profile: EngineProfile | None = None) -> list[str]:
    """Raise a SpecError for the first contradiction (field and values named); the warnings, one
    line each, for settings that act on nothing in the plans asked. `profile`: the run's engine
    (its element-wise kernels, loss and fp8 backend), None to skip the engine's rules."""
    _contradictions(spec, training, asked)
    if profile is not None:
        _engine_contradictions(training, asked, profile)
    return inert_settings(training, asked, profile) + _model_inert(spec, training)


def _model_inert(spec, training: TrainingSpec) -> list[str]:
    """Settings with nothing to act on in this model."""
    out: list[str] = []
    if not training.rope_fusion:
        # Megatron-core's apply_rope_fusion acts on rotary embeddings only (Megatron-Bridge
        # utils/fusions.py validate_rope_fusion_compatibility); the other engines' rotary is priced
        # by their own profile (plan/rotary_fusion.py runs_unfused)
        if getattr(spec, "position", None) != "rotary":
            out.append(f"rope_fusion (false) has no effect: the model has no rotary embedding "
                       f"(position '{getattr(spec, 'position', None)}')")
        elif training.framework != "megatron":
            out.append(f"rope_fusion (false) has no effect under framework '{training.framework}' "
                       "(Megatron-core's apply_rope_fusion)")
    return out


def _contradictions(spec, training: TrainingSpec, asked: Asked) -> None:
    moe = getattr(spec, "moe", None)
    rc = asked.recompute
    # a setting of one recompute policy with that policy ruled out (Megatron-LM arguments.py:
    # "recompute method is not yet supported for selective recomputing granularity")
    if training.ac_mode is not None and _lacks(rc, "selective"):
        raise SpecError(f"ac_mode ('{training.ac_mode}') sets what recompute 'selective' keeps, but recompute is "
                        f"{_listed(rc)}: add selective or drop ac_mode")
    if training.sac_saves_attention is False and _lacks(rc, "selective"):
        raise SpecError(f"sac_saves_attention (false) applies to recompute 'selective', but recompute is {_listed(rc)}")
    if training.recompute_modules is not None and _lacks(rc, "selective"):
        raise SpecError(f"recompute_modules ({', '.join(training.recompute_modules)}) needs recompute 'selective', "
                        f"but recompute is {_listed(rc)}")
    if training.recompute_method is not None and _lacks(rc, "full"):
        raise SpecError(f"recompute_method ('{training.recompute_method}') needs recompute 'full', but recompute is "
                        f"{_listed(rc)}")
    # Megatron-core transformer_config.py: 'overlap_moe_expert_parallel_comm is only supported with
    # expert model parallelism', 'disable full recomputation when enabling ...', bf16 or fp16 only
    if training.ep_comm_overlap:
        if moe is None:
            raise SpecError(f"ep_comm_overlap: {spec.name} has no routed experts (it overlaps the MoE AllToAlls)")
        if _only(asked.ep, 1):
            raise SpecError("ep_comm_overlap needs expert parallelism: ep is 1")
        if _only(rc, "full"):
            raise SpecError("ep_comm_overlap with recompute 'full': Megatron-core refuses the pair (disable full "
                            "recomputation when enabling overlap_moe_expert_parallel_comm)")
        if training.precision == "fp32":
            raise SpecError("ep_comm_overlap needs a bf16, fp16 or fp8 run (Megatron-core: only supported with bf16 or "
                            "fp16), not precision fp32")
    if training.fake_balanced_gate and moe is None:
        raise SpecError(f"fake_balanced_gate: {spec.name} has no routed experts (the gate replaces the MoE router)")
    # Megatron-LM arguments.py: 'Tensor parallel communication/GEMM overlap can happen only when
    # sequence parallelism is enabled'
    overlap = asked.tp_overlap is not None and "none" not in asked.tp_overlap
    if (training.tp_comm_overlap or overlap) and _only(asked.sequence_parallel, False) and not _only(asked.tp, 1):
        what = f"tp_overlap ({_listed(asked.tp_overlap)})" if overlap else "tp_comm_overlap"
        raise SpecError(f"{what} needs sequence parallelism, which is off (no-sequence-parallel)")
    if _only(asked.zeropp, True) and _lacks(asked.zero, 3):
        raise SpecError(f"zeropp is ZeRO-3's (DeepSpeed ZeRO++), but zero is {_listed(asked.zero)}")
    shards = asked.fsdp_shard_size is not None and asked.fsdp_shard_size != {0}
    if shards and _only(asked.zero, 0, 1):
        raise SpecError(f"fsdp_shard_size ({_listed(asked.fsdp_shard_size)}) shards ZeRO >= 2 states, but zero is "
                        f"{_listed(asked.zero)}")
    # resharding after forward is what makes FSDP's FULL_SHARD ZeRO-3 (false: SHARD_GRAD_OP, ZeRO-2's memory)
    if asked.reshard_after_forward is True and _lacks(asked.zero, 3):
        raise SpecError(f"reshard_after_forward (true) frees ZeRO-3's gathered parameters, but zero is {_listed(asked.zero)}")
    if training.compile_loss and not training.compile:
        raise SpecError("compile_loss needs compile (torch.compile covers the loss only when it compiles the model)")
    # Megatron-LM arguments.py: '--fp8-param-gather only supported with distributed optimizer,
    # torch fsdp2, megatron fsdp'
    if training.fp8_param_gather and training.framework == "megatron" and _only(asked.zero, 0):
        raise SpecError("fp8_param_gather needs Megatron's distributed optimizer (zero >= 1), but zero is 0")


def _engine_contradictions(training: TrainingSpec, asked: Asked, profile: EngineProfile) -> None:
    recipe = training.fp8_recipe
    runs = TE_RECIPES if profile.fp8_backend == "te" else TORCHAO_RECIPES
    if recipe is not None and recipe not in runs:
        backend = "Transformer Engine" if profile.fp8_backend == "te" else "torchao"
        raise SpecError(f"fp8_recipe ('{recipe}'): framework '{training.framework}' runs fp8 through {backend}, "
                        f"whose recipes are {', '.join(runs)}")


def inert_settings(training: TrainingSpec, asked: Asked, profile: EngineProfile | None = None) -> list[str]:
    """The warnings alone (a plan document's settings: the search that wrote it may have kept a
    setting for a policy it did not pick, so nothing is refused)."""
    out: list[str] = []
    if _only(asked.tp, 1):
        # Megatron-LM arguments.py: "Disabling sequence parallelism because tensor model
        # parallelism is disabled"
        if _only(asked.sequence_parallel, True):
            out.append("sequence_parallel has no effect at tp 1 (Megatron-LM turns it off there)")
        if training.tp_comm_overlap or (asked.tp_overlap is not None and asked.tp_overlap != {"none"}):
            out.append("tp_comm_overlap / tp_overlap has no effect at tp 1 (no TP collectives to overlap)")
    if _only(asked.cp, 1) and training.cp_comm_type is not None:
        # Megatron-core reads cp_comm_type only when context_parallel_size > 1 (transformer_config.py)
        out.append(f"cp_comm_type ('{training.cp_comm_type}') has no effect at cp 1"
                   + (f" (the search keeps cp 1 below seq {LONG_SEQUENCE}: give --cp)" if asked.cp_by_default else ""))
    if _only(asked.pp, 1):
        named = [s for s in asked.schedule or () if s != Schedule.ONE_F_ONE_B]
        if named:
            out.append(f"schedule ({', '.join(named)}) has no effect at pp 1 (no pipeline)")
        if training.pp_flush_microbatches is not None:
            out.append("pp_flush_microbatches has no effect at pp 1 (no pipeline)")
    if _only(asked.dp, 1) and _only(asked.cp, 1):
        if asked.zero is not None and min(asked.zero) > 0:
            out.append(f"zero ({_listed(asked.zero)}) has no effect at dp x cp = 1 (nothing to shard over)")
        if training.dp_overlap is not None:
            out.append("dp_overlap has no effect at dp x cp = 1 (no data-parallel traffic)")
    if training.fake_balanced_gate and training.moe_flex_dispatcher != "deepep":
        # only DeepEP's deduplicated exchange depends on which experts a token picks (plan/deepep.py)
        out.append("fake_balanced_gate has no effect without the deepep dispatcher (the all-to-all one sends "
                   "top_k copies whatever the gate picks)")
    if training.fsdp_ends_in_root and _lacks(asked.zero, 3):
        out.append(f"fsdp_ends_in_root has no effect at zero {_listed(asked.zero)} (it places ZeRO-3 / FSDP2 groups)")
    if training.precision == "fp32":
        if training.grad_dtype == "same":
            out.append("grad_dtype 'same' has no effect at precision fp32 (the compute dtype is fp32)")
        if training.optimizer_state_dtype == "same":
            out.append("optimizer_state_dtype 'same' has no effect at precision fp32 (the compute dtype is fp32)")
    if profile is not None:
        out += _engine_inert(training, asked, profile)
    return out


def _engine_inert(training: TrainingSpec, asked: Asked, profile: EngineProfile) -> list[str]:
    out: list[str] = []
    fw = training.framework
    if training.compile and profile.elementwise == "fused" and (training.loss_kernel or profile.loss_kernel) != "eager":
        out.append(f"compile has no effect under framework '{fw}' (its element-wise kernels are fused already)")
    if training.fused_norm and (profile.elementwise == "fused" or training.compile):
        out.append("fused_norm has no effect: the norms already run fused"
                   + (" (torch.compile)" if training.compile else f" (framework '{fw}')"))
    loss = engine_settings(training, profile).loss_kernel  # eager under torch.compile runs 'compiled'
    if not training.loss_upcast and loss != "eager":
        out.append(f"loss_upcast (false) has no effect on the '{loss}' loss kernel (only the eager cross-entropy "
                   "casts the logits)")
    # the search prices these for any engine when asked (plan/search_ext.py), as a what-if
    if _only(asked.zeropp, True) and fw != "deepspeed":
        out.append(f"zeropp is DeepSpeed's (ZeRO++); framework '{fw}' does not run it: priced as if it did")
    if _only(asked.offload_activations, True) and fw != "megatron":
        out.append(f"offload_activations is Megatron-core's (cpu_offloading); framework '{fw}' does not offload "
                   "saved activations: priced as if it did")
    selective = training.ac_mode or profile.selective
    if not training.sac_saves_attention and selective != "op_sac" and training.recompute_modules is None:
        out.append(f"sac_saves_attention (false) has no effect: selective recompute is '{selective}', not op_sac")
    return out
