"""What verify can execute, and a scaled-down copy of a model that keeps its family and options.

`check_executable` raises a one-line `SpecError` for a plan the executor cannot run (every number
in the message). `scale_down` keeps every flag of the model (norm, biases, gated MLP, GQA, tied
head, positions, parallel block, MoE routing) and shrinks the dimensions so that every split of
the plan is exact and the whole step runs in seconds: heads = 2*tp, kv_heads = tp for GQA
(kv_heads = heads for MHA, 1 for MQA; both times cp under cp_comm_type a2a, which splits heads
over cp), head_dim 4, vocab 16*tp, layers = stages*layers_per_stage
plus the model's remainder layers % stages (stages: pp*vpp, or the schedule's own count; an uneven
split stays uneven, same shape), sequence 8 (a multiple of tp), experts a multiple of ep, and the
fewest micro-batches from min(m, 2*pp) up that the schedule runs.
"""

from __future__ import annotations

from modelplan.count.blocks import block_of
from modelplan.errors import SpecError
from modelplan.execute.layers.mamba2 import check_tp as check_mamba2_tp
from modelplan.execute.context_parallel import EXECUTED_CP_TYPES, cp_comm_type
from modelplan.execute.residual import check_norms
from modelplan.execute.scale_features import head_dim, scaled_features, small_layer_types, small_moe
from modelplan.plan.parallel.cp import cp_problem
from modelplan.plan.pipeline import schedule_layout, schedule_problem
from modelplan.plan.pipeline.flush import flush_problem, flush_sizes
from modelplan.plan.validate import pp_problem
from modelplan.specs.load import load_engine
from modelplan.specs.family import family_of
from modelplan.specs.plan import Plan
from modelplan.specs.tp_kv_heads import attention_kv_heads
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


def _divides(what: str, n: int, by_what: str, by: int) -> None:
    if n % by:
        raise SpecError(f"{by_what} ({by}) must divide {what} ({n})")


def check_plan(spec: TransformerSpec, training: TrainingSpec, plan: Plan) -> int:
    """The splits a real engine needs (Megatron-LM's own checks); returns num_microbatches."""
    if not family_of(spec).blocks:  # the registry (`specs/family.py`): a family of transformer blocks
        raise SpecError(f"verify executes transformer models only, not '{getattr(spec, 'kind', type(spec).__name__)}'")
    if any(spec.layer_type(i) not in ("mamba", "mamba2", "gated_deltanet", "mlp") for i in range(spec.layers)):  # attention-free: no heads
        _divides("heads", spec.heads, "tp", plan.tp)
        _divides("kv_heads", attention_kv_heads(spec), "tp", plan.tp)  # MLA: its K, V heads are the query heads
    if plan.cp > 1:
        _check_cp(spec, training, plan)
    if spec.ssm is not None:
        _divides("ssm.inner", spec.ssm.inner, "tp", plan.tp)
    if spec.mamba2 is not None:
        problem = check_mamba2_tp(spec.mamba2.heads, spec.mamba2.groups, plan.tp)
        if problem:
            raise SpecError(problem)
    if spec.deltanet is not None:
        _divides("deltanet.key_heads", spec.deltanet.key_heads, "tp", plan.tp)
    problem = pp_problem(spec.layers, plan.pp, plan.vpp, _stages(plan))
    if problem:
        raise SpecError(problem.message)
    _divides("ffn_hidden", spec.ffn_hidden, "tp", plan.tp)
    if plan.sequence_parallel:
        _divides("seq_len", training.seq_len, "tp", plan.tp)
    if spec.moe is not None:
        _divides("moe.num_experts", spec.moe.num_experts, "ep", plan.ep)
        _divides("moe.expert_ffn_hidden", spec.moe.expert_ffn_hidden, "tp", plan.tp)
    elif plan.ep > 1:
        raise SpecError(f"ep ({plan.ep}) > 1 needs an MoE model (moe is not set)")
    try:
        m = plan.num_microbatches(training.global_batch)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    problem = flush_problem(plan.schedule, plan.pp, m, plan.vpp, training.pp_flush_microbatches)  # every flush runs
    if problem:
        raise SpecError(problem.message)
    return m


def _check_cp(spec: TransformerSpec, training: TrainingSpec, plan: Plan) -> None:
    """Context parallelism as the executor runs it (`execute/context_parallel.py`)."""
    kind = cp_comm_type(training)
    if kind not in EXECUTED_CP_TYPES:
        raise SpecError(f"cp_comm_type '{kind}' (cp {plan.cp}): verify executes context parallelism with "
                        f"{', '.join(EXECUTED_CP_TYPES)} only")
    if load_engine(training.framework).cp_fp32_merge:
        raise SpecError(f"cp ({plan.cp}) > 1 under framework '{training.framework}': verify executes Transformer "
                        "Engine's exchanges; PyTorch's ring (fp32 dK, dV accumulators passed round it) is not "
                        "executed yet")
    unsupported = [what for what, on in (
        ("MoE", spec.moe is not None), ("MLA", spec.mla is not None),
        ("mamba layers", any(spec.layer_type(i) in ("mamba", "mamba2", "gated_deltanet") for i in range(spec.layers))),
        ("MTP", bool(spec.mtp_layers)), (f"arch '{spec.arch}'", spec.arch != "decoder")) if on]
    if unsupported:
        raise SpecError(f"cp ({plan.cp}) > 1 with {', '.join(unsupported)} is not executed by verify yet")
    problem = cp_problem(kind, plan.cp, spec.heads // plan.tp, spec.num_kv_heads // plan.tp, torch_cp=False)
    if problem:  # the real model's heads: the scaled-down copy keeps their split (scale_down)
        raise SpecError(problem)
    _divides("seq_len", training.seq_len, "cp", plan.cp)


def _stages(plan: Plan) -> int:
    """Virtual stages the plan's schedule cuts the model into (pp * vpp, or ZB-V's 2 pp)."""
    return schedule_layout(plan.schedule, plan.pp, plan.vpp).num_stages


def small_microbatches(plan: Plan, m: int) -> int:
    """The fewest micro-batches, from min(m, 2 pp) up, that the plan's schedule can run."""
    for n in range(min(m, 2 * plan.pp), m + 1):
        if schedule_problem(plan.schedule, plan.pp, n, plan.vpp) is None:
            return n
    return m


def _check_features(spec: TransformerSpec) -> None:
    for flag in ("pooler", "mlm_transform"):
        if getattr(spec, flag):
            raise SpecError(f"{flag} is not executed by verify yet (set {flag} = false)")
    if spec.position == "alibi":
        raise SpecError("position 'alibi' is not executed by verify yet")
    if spec.activation == "swiglu_clamp" and not spec.gated_mlp:
        raise SpecError("activation 'swiglu_clamp' needs gated_mlp = true (gpt-oss's clamped SwiGLU is gated)")
    if spec.moe is not None and spec.moe.shared_expert_gate and spec.mlp_bias:
        raise SpecError("moe.shared_expert_gate with mlp_bias is not executed (the gate would scale the bias)")
    if spec.position == "rotary" and spec.mla is None:
        rotated = int(spec.dim_head * spec.rotary_fraction)
        if rotated < 2 or rotated % 2:
            raise SpecError(f"rotary_fraction ({spec.rotary_fraction}) of head_dim ({spec.dim_head}) rotates "
                            f"{rotated} dims: rotary needs an even number >= 2")
    if spec.mla is not None and spec.mla.qk_rope_head_dim % 2:
        raise SpecError(f"mla.qk_rope_head_dim ({spec.mla.qk_rope_head_dim}) must be even for rotary")
    for i in range(spec.layers):
        check_norms(spec, block_of(spec, i))


def check_executable(spec: TransformerSpec, training: TrainingSpec, plan: Plan) -> None:
    """check_plan plus what the numpy executor itself needs (exact splits, supported features)."""
    check_plan(spec, training, plan)
    _check_features(spec)
    _divides("vocab", spec.vocab, "tp", plan.tp)
    if spec.position == "learned" and spec.max_positions < training.seq_len:
        raise SpecError(f"max_positions ({spec.max_positions}) must be >= seq_len ({training.seq_len})")


def _width(ratio: float, hidden: int, tp: int) -> int:
    """A hidden width close to ratio * hidden that tp divides."""
    return tp * max(1, round(ratio * hidden / tp))


def scale_down(spec: TransformerSpec, plan: Plan, training: TrainingSpec, *, layers_per_stage: int = 1
               ) -> tuple[TransformerSpec, TrainingSpec]:
    """A small model of the same family, and its training settings, that `plan` splits exactly."""
    m = check_plan(spec, training, plan)
    _check_features(spec)
    if layers_per_stage < 1:
        raise SpecError(f"layers_per_stage ({layers_per_stage}) must be >= 1")
    tp = plan.tp
    ulysses = plan.cp if plan.cp > 1 and cp_comm_type(training) == "a2a" else 1  # heads and kv heads split over cp too
    heads = 2 * tp * ulysses
    kv = heads if spec.num_kv_heads == spec.heads else 1 if spec.num_kv_heads == 1 else tp * ulysses
    decoupled = spec.head_dim is not None and spec.head_dim * spec.heads != spec.hidden
    dim = head_dim(spec)
    hidden = 12 * tp if decoupled else heads * dim
    # keep an uneven split uneven: the same remainder gives the same shape of `split_layers`
    stages = _stages(plan)
    kinds = small_layer_types(spec) or []
    if "mlp" in kinds:  # Nemotron-H: mixer-free MLP blocks beside MLP-free ones: run every kind of block
        layers_per_stage = max(layers_per_stage, -(-len(kinds) // stages))
    layers = stages * layers_per_stage + spec.layers % stages
    if plan.stage_split is not None:  # the plan's fixed first / last stage keep their blocks
        fixed = [n for n in plan.stage_split if n is not None]
        layers = sum(fixed) + (stages - len(fixed)) * layers_per_stage
    unit = tp * plan.cp  # every cp rank's slice splits over tp (sequence parallelism)
    seq = unit * -(-8 // unit)
    small_m, flush = small_microbatches(plan, m), {}
    sizes = flush_sizes(m, training.pp_flush_microbatches)
    if len(sizes) > 1:  # keep the step's pipeline flushes: two of the fewest micro-batches a flush can run
        per_flush = small_microbatches(plan, sizes[0])
        small_m, flush = 2 * per_flush, {"pp_flush_microbatches": per_flush}
    moe = None
    if spec.moe is not None:
        with_mlp = [i for i in range(layers) if spec.mlp or (kinds and kinds[i % len(kinds)] == "mlp")]
        moe = small_moe(spec.moe, layers, _width(spec.moe.expert_ffn_hidden / spec.hidden, hidden, tp), plan.ep,
                        with_mlp)
    small = spec.model_copy(update={
        **scaled_features(spec, hidden, dim, tp),
        "name": f"{spec.name} (scaled down)", "layers": layers, "hidden": hidden, "heads": heads,
        "kv_heads": kv, "head_dim": dim if decoupled or dim != hidden // heads else None,
        "ffn_hidden": _width(spec.ffn_hidden / spec.hidden, hidden, tp), "vocab": 16 * tp,
        "max_positions": seq, "type_vocab": min(spec.type_vocab, 2), "dropout": False, "moe": moe,
    })
    small = TransformerSpec.model_validate(small.model_dump())
    small_training = training.model_copy(update={"seq_len": seq, "global_batch": plan.dp * plan.micro_batch * small_m,
                                                 **flush})
    return small, small_training
