"""The mutation suite: verify must fail, on the right check, under every deliberate fault.

Each fault (tests/_faults.py) patches one seam of the executor or of the layer functions the
executor shares with its numpy reference, runs verify on a tiny model and asserts that (a) the
fault fired and (b) every check it names failed. Faults in shared layer math are invisible to the
numpy reference by construction (both sides call the broken function), so they run with
`--oracle torch` and skip without PyTorch. The expected failures are what the bug breaks by
definition: a wrong forward changes the loss, a wrong backward the gradients, a missing or padded
collective the bytes of that collective, a wrong schedule the schedule properties.
"""

from __future__ import annotations

import math
import threading
import types
from dataclasses import dataclass

import numpy as np
import pytest

import modelplan.execute.verify  # noqa: F401  (load the executor before patching its seams)
from modelplan.comm.ops import Collective
from modelplan.execute.layers.moe import RouterCache
from modelplan.execute.verify import verify
from modelplan.plan.pipeline import Action, ActionKind
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec
from _faults import Fault, Injector

LLAMA = TransformerSpec(name="llama-hd8", layers=2, hidden=32, heads=4, kv_heads=2, ffn_hidden=48, vocab=32,
                        position="rotary", norm="rmsnorm", gated_mlp=True, activation="silu")
GPT = TransformerSpec(name="gpt-hd8", layers=2, hidden=32, heads=4, ffn_hidden=64, vocab=32, max_positions=8,
                      position="learned", norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True,
                      mlp_bias=True, gated_mlp=False, activation="gelu", tied_embeddings=True)
MOE = LLAMA.model_copy(update={"name": "moe-hd8", "moe": MoESpec(
    num_experts=4, top_k=2, expert_ffn_hidden=16, shared_experts=1, router_bias=True)})
TRAIN = TrainingSpec(global_batch=4, seq_len=8, optimizer="adamw")


@dataclass(frozen=True)
class Run:
    """One verify configuration a fault runs under (unscaled tiny model)."""

    spec: TransformerSpec
    plan: Plan
    training: TrainingSpec = TRAIN
    oracle: str = "numpy"

    def __call__(self):
        return verify(self.spec, self.training, self.plan, scale=False, oracle=self.oracle)


def _verify(spec, plan, training=TRAIN):
    return Run(spec, plan, training)


def _torch(spec, plan, training=TRAIN):
    return Run(spec, plan, training, "torch")


# --- layer math shared by the executor and its numpy reference (caught by the torch oracle) ---


def _rmsnorm_backward_scaled(inj: Injector) -> None:
    def make(original):
        def norm_backward(cache, weight, dy, has_bias):
            dx, dw, db = original(cache, weight, dy, has_bias)
            return (dx * 1.5 if cache.kind == "rmsnorm" else dx), dw, db
        return norm_backward
    inj.wrap("modelplan.execute.layers.norm:norm_backward", make)


def _attention_scaled_by_1_over_d(inj: Injector) -> None:
    counter = inj.fired

    class _Math(types.SimpleNamespace):
        def sqrt(self, x):  # 1/d instead of 1/sqrt(d) in the score scaling, forward and backward
            counter["attention 1/d"] += 1
            return x

    inj.set("modelplan.execute.layers.attention:math", _Math(**{k: getattr(math, k) for k in ("pi", "erf")}))


def _rope_base_1e3(inj: Injector) -> None:
    inj.set("modelplan.execute.layers.attention:ROTARY_BASE", 1e3)


def _router_softmax_before_topk(inj: Injector) -> None:
    """Softmax over all experts, then keep the top-k probabilities unrenormalised (forward and a
    consistent backward): the weights no longer sum to one."""
    def softmax(z):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def logits_of(x, p):
        return x @ p["router/weight"] + p.get("router/bias", 0.0)

    def make_forward(_original):
        def router_forward(x, p, router):
            top_k = router if isinstance(router, int) else router.top_k
            logits = logits_of(x, p)
            experts = np.argsort(-logits, axis=-1, kind="stable")[:, :top_k]
            weights = np.take_along_axis(softmax(logits), experts, axis=-1)
            return weights, experts, RouterCache(x, experts, weights, None, logits.shape[-1])
        return router_forward

    def make_backward(_original):
        def router_backward(cache, p, dweights, router=None):
            probs = softmax(logits_of(cache.x, p))
            chosen = np.zeros_like(probs)
            np.put_along_axis(chosen, cache.experts, dweights, axis=-1)
            dlogits = probs * chosen - probs * (dweights * cache.weights).sum(axis=-1, keepdims=True)
            grads = {"router/weight": cache.x.T @ dlogits}
            if "router/bias" in p:
                grads["router/bias"] = dlogits.sum(axis=0)
            return dlogits @ p["router/weight"].T, grads
        return router_backward

    inj.wrap("modelplan.execute.layers.moe:router_forward", make_forward)
    inj.wrap("modelplan.execute.layers.moe:router_backward", make_backward)


def _silu_derivative_wrong(inj: Injector) -> None:
    def make(original):
        def activation_backward(kind, x, dy):
            if kind == "silu":  # sigmoid(x) alone: the x * sigmoid'(x) term dropped
                return dy / (1.0 + np.exp(-x))
            return original(kind, x, dy)
        return activation_backward
    inj.wrap("modelplan.execute.layers.activations:activation_backward", make)


def _layernorm_without_eps(inj: Injector) -> None:
    def make(original):
        def norm_forward(kind, x, weight, bias, eps):
            return original(kind, x, weight, bias, 0.0)
        return norm_forward
    inj.wrap("modelplan.execute.layers.norm:norm_forward", make)


def _mlp_gate_and_up_swapped(inj: Injector) -> None:
    def make(original):
        def mlp_forward(x, p, activation, gated):
            if gated:
                p = dict(p, **{"in/weight": p["gate/weight"], "gate/weight": p["in/weight"]})
            return original(x, p, activation, gated)
        return mlp_forward

    def make_backward(original):
        def mlp_backward(cache, p, activation, gated, dout):
            if gated:
                p = dict(p, **{"in/weight": p["gate/weight"], "gate/weight": p["in/weight"]})
                dx, g = original(cache, p, activation, gated, dout)
                g["in/weight"], g["gate/weight"] = g["gate/weight"], g["in/weight"]
                return dx, g
            return original(cache, p, activation, gated, dout)
        return mlp_backward
    inj.wrap("modelplan.execute.layers.mlp:mlp_forward", make)
    inj.wrap("modelplan.execute.layers.mlp:mlp_backward", make_backward)


# --- collectives, sharding and pipelining (caught by the numpy oracle and the plan's data) ---


def _drop_tp_allreduce(inj: Injector) -> None:
    inj.wrap("modelplan.execute.mappings:reduce_from_tensor_model_parallel_region", lambda _o: lambda tp, x, label: x)


def _pad_dp_allreduce(inj: Injector) -> None:
    """The gradient AllReduce sends one extra padding element per call (same sums)."""
    def make(original):
        def collective(self, op, group, x, label):
            if op is Collective.ALL_REDUCE and group.size > 1:
                return original(self, op, group, np.concatenate([x, np.zeros(1)]), label)[:-1]
            return original(self, op, group, x, label)
        return collective
    inj.wrap("modelplan.execute.data_parallel:DataParallel._collective", make)


def _dp_sum_not_mean(inj: Injector) -> None:
    def make(original):
        def finish_grads(self, bucket):
            original(self, bucket)
            bucket.grad *= self.dp
        return finish_grads
    inj.wrap("modelplan.execute.data_parallel:DataParallel.finish_grads", make)


def _zero_wrong_shard_owner(inj: Injector) -> None:
    """ZeRO ranks update their neighbour's slice of the flat buffer."""
    def make(_original):
        def shard(self):
            size = self.padded // self.group.size
            k = (self.group_index + 1) % self.group.size
            return k * size, (k + 1) * size
        return shard
    owner = "modelplan.execute.data_parallel:Bucket.shard"
    from modelplan.execute.data_parallel import Bucket

    original = Bucket.shard.fget

    def fget(self):
        inj.fired[owner] += 1
        return make(original)(self)
    inj.monkeypatch.setattr(Bucket, "shard", property(fget))


def _vocab_parallel_loss_without_sum(inj: Injector) -> None:
    def make(original):
        def all_reduce(self, x, label):
            return x if label == "tp/cross-entropy/sum" else original(self, x, label)
        return all_reduce
    inj.wrap("modelplan.execute.mappings:TensorParallel.all_reduce", make)


def _moe_dispatch_rotated(inj: Injector) -> None:
    def make(original):
        def all_to_all(self, chunks, label):
            out = original(self, chunks, label)
            return out[1:] + out[:1] if label == "ep/dispatch" else out
        return all_to_all
    inj.wrap("modelplan.execute.expert_parallel:ExpertParallel.all_to_all", make)


def _tied_embedding_not_synchronised(inj: Injector) -> None:
    def make(original):
        def all_reduce(self, x, group, label=""):
            return np.array(x, copy=True) if label == "pp/tied-embedding-grads" else original(self, x, group, label)
        return all_reduce
    inj.wrap("modelplan.execute.collectives:P2PCommunicator.all_reduce", make)


def _sequence_parallel_grads_not_reduced(inj: Injector) -> None:
    inj.wrap("modelplan.execute.data_parallel:DataParallel._reduce_partial_over_tp",
             lambda _o: lambda self, bucket, flat: None)


def _wrong_microbatch_sent(inj: Injector) -> None:
    """Each forward send carries the previous micro-batch's activation."""
    def make(original):
        def send(self, action, x):
            if action.kind is ActionKind.SEND_F:
                previous, self.__dict__["_previous"] = self.__dict__.get("_previous"), x
                x = x if previous is None else previous
            return original(self, action, x)
        return send
    inj.wrap("modelplan.execute.pipeline:PipelineP2P.send", make)


def _zero1_parameters_not_gathered(inj: Injector) -> None:
    def make(original):
        def collective(self, op, group, x, label):
            if op is Collective.ALL_GATHER and label == "dp/params":
                me = group.index(self.comm.rank)
                return np.concatenate([x if k == me else np.zeros_like(x) for k in range(group.size)])
            return original(self, op, group, x, label)
        return collective
    inj.wrap("modelplan.execute.data_parallel:DataParallel._collective", make)


def _zero3_stale_parameters(inj: Injector) -> None:
    """ZeRO-3 gathers each unit once and reuses it: later steps compute with the step-1 weights."""
    def make(original):
        def materialize(self, bucket):
            kept = bucket.__dict__.setdefault("_gathered", None)
            if kept is None:
                bucket._gathered = kept = original(self, bucket)
            return kept
        return materialize
    inj.wrap("modelplan.execute.data_parallel:DataParallel.materialize", make)


def _zero3_gathered_never_freed(inj: Injector) -> None:
    """ZeRO-3 gathers every time (same math, same traffic) but keeps each gathered copy."""
    def make(original):
        def materialize(self, bucket):
            out = original(self, bucket)
            if bucket.zero == 3:
                bucket.__dict__.setdefault("_kept", []).append(out)
            return out
        return materialize
    inj.wrap("modelplan.execute.data_parallel:DataParallel.materialize", make)


def _activations_never_freed(inj: Injector) -> None:
    """Each micro-batch's saved activations keep the previous one's alive (a dangling reference)."""
    def make(original):
        last: dict = {}

        def forward(self, st, p, x, mb):
            out, cache = original(self, st, p, x, mb)
            key = (id(self), st.index)
            _, _, kept = cache["blocks"][0]  # (layers, checkpoint, kept): no recompute keeps the block caches
            block = kept[0]  # the first block's cache holds on to the previous micro-batch's
            block["_earlier"], last[key] = last.get(key), cache
            return out, cache
        return forward
    inj.wrap("modelplan.execute.stage:StageModel.forward", make)


def _full_recompute_keeps_the_cache(inj: Injector) -> None:
    """Full recomputation that also keeps every block's forward cache (nothing saved, all kept)."""
    local = threading.local()

    def make_block(original):
        def block_forward(*args):
            out, cache = original(*args)
            if getattr(local, "kept", None) is not None:
                local.kept.append(cache)
            return out, cache
        return block_forward

    class Inputs(list):
        """The recompute inputs, with the full caches riding along."""

    def make_forward(original):
        def forward(self, st, p, x, mb):
            local.kept = []
            out, cache = original(self, st, p, x, mb)
            cache["blocks"] = Inputs(cache["blocks"])
            cache["blocks"].full, local.kept = local.kept, None
            return out, cache
        return forward
    inj.wrap("modelplan.execute.tensor_parallel:block_forward", make_block)
    inj.wrap("modelplan.execute.stage:StageModel.forward", make_forward)


# --- optimizer state over several steps --------------------------------------------------------


def _optimizer_state_discarded(inj: Injector) -> None:
    def make(original):
        def step(self, bucket, step=1):
            bucket.optim = self.optimizer.init_state(sum(s.size for s in bucket.optim) // max(len(bucket.optim), 1))
            return original(self, bucket, step)
        return step
    inj.wrap("modelplan.execute.data_parallel:DataParallel.step", make)


def _step_counter_stuck(inj: Injector) -> None:
    """Every update is taken as step 1: Adam's bias correction and the LR schedule never advance."""
    inj.wrap("modelplan.execute.data_parallel:DataParallel.step", lambda original: lambda self, bucket, step=1:
             original(self, bucket, 1))


def _momentum_not_kept_on_zero_shards(inj: Injector) -> None:
    """ZeRO shards update a copy of their momentum buffer: the buffer stays zero."""
    def make(original):
        def step(self, bucket, step=1):
            kept = [s.copy() for s in bucket.optim]
            original(self, bucket, step)
            if bucket.zero >= 1:
                bucket.optim = kept
        return step
    inj.wrap("modelplan.execute.data_parallel:DataParallel.step", make)


def _momentum_dampened(inj: Injector) -> None:
    """The shared optimizer dampens momentum, buf = mu buf + (1 - mu) g (not torch.optim.SGD's)."""
    def make(original):
        def optimizer_step(cfg, w, g, state, step):
            if cfg.kind != "momentum":
                return original(cfg, w, g, state, step)
            (buf,) = state
            buf[:] = g if step == 1 else cfg.momentum * buf + (1 - cfg.momentum) * g
            return w - cfg.lr_at(step) * buf
        return optimizer_step
    inj.wrap("modelplan.execute.optim:optimizer_step", make)


def _lr_schedule_ignored_on_ranks(inj: Injector) -> None:
    """The ranks update with the peak learning rate, skipping the warm-up the reference applies."""
    from dataclasses import replace

    def make(original):
        def step(self, bucket, step=1):
            flat = replace(self, optimizer=replace(self.optimizer, warmup_steps=0, decay_steps=0))
            return original(flat, bucket, step)
        return step
    inj.wrap("modelplan.execute.data_parallel:DataParallel.step", make)


def _gradients_not_zeroed(inj: Injector) -> None:
    inj.wrap("modelplan.execute.data_parallel:DataParallel.zero_grad", lambda _o: lambda bucket: None)


# --- diagnostics ---------------------------------------------------------------------------------


def _pipeline_message_dropped(inj: Injector) -> None:
    def make(original):
        def send(self, action, x):
            skip = action.kind is ActionKind.SEND_F and action.microbatch == 1
            return (-1, 0) if skip else original(self, action, x)
        return send
    inj.wrap("modelplan.execute.pipeline:PipelineP2P.send", make)


def _shape_error_in_a_rank(inj: Injector) -> None:
    inj.wrap("modelplan.execute.layers.mlp:mlp_forward",
             lambda original: lambda x, p, activation, gated: original(x[..., :-1], p, activation, gated))


def _schedule_fault(inj: Injector, transform) -> None:
    """Patch the schedule generator everywhere: the executor and the schedule-order check agree."""
    from dataclasses import replace

    def make(original):
        def pipeline_schedule(kind, pp, m, vpp=1):
            schedule = original(kind, pp, m, vpp)
            return replace(schedule, actions=tuple(tuple(a) for a in transform(schedule.actions)))
        return pipeline_schedule
    inj.wrap("modelplan.plan.pipeline:pipeline_schedule", make)


def _one_f_one_b_warmup_one_too_long(inj: Injector) -> None:
    def longer(schedules):
        out = []
        for steps in schedules:
            steps = list(steps)
            first_b = next((k for k, s in enumerate(steps) if s.kind is ActionKind.B), None)
            if first_b is not None and first_b + 1 < len(steps) and steps[first_b + 1].kind is ActionKind.F:
                steps[first_b], steps[first_b + 1] = steps[first_b + 1], steps[first_b]  # one more forward first
            out.append(steps)
        return out
    _schedule_fault(inj, longer)


def _unpipelined_order(inj: Injector) -> None:
    _schedule_fault(inj, lambda schedules: [[Action(k, i) for i in range(len(s) // 2) for k in (ActionKind.F, ActionKind.B)]
                                            for s in schedules])


FAULTS = [
    Fault("rmsnorm backward scaled x1.5", "layer math", _rmsnorm_backward_scaled, _torch(LLAMA, Plan(tp=2)),
          frozenset({"gradients"}), needs_torch=True),
    Fault("attention scaled by 1/d", "layer math", _attention_scaled_by_1_over_d, _torch(LLAMA, Plan(tp=2)),
          frozenset({"loss", "gradients"}), needs_torch=True),
    Fault("RoPE base 1e3", "layer math", _rope_base_1e3, _torch(LLAMA, Plan(dp=2)),
          frozenset({"loss", "gradients"}), needs_torch=True),
    Fault("router softmax over all experts before top-k", "layer math", _router_softmax_before_topk,
          _torch(MOE, Plan(dp=2, ep=2)), frozenset({"loss", "gradients"}), needs_torch=True),
    Fault("SiLU derivative without its x*sigmoid' term", "layer math", _silu_derivative_wrong,
          _torch(LLAMA, Plan(pp=2)), frozenset({"gradients"}), needs_torch=True),
    Fault("LayerNorm without eps", "layer math", _layernorm_without_eps, _torch(GPT, Plan(tp=2)),
          frozenset({"loss"}), needs_torch=True),
    Fault("gated MLP gate and up projections swapped", "layer math", _mlp_gate_and_up_swapped,
          _torch(LLAMA, Plan(dp=2)), frozenset({"loss", "gradients"}), needs_torch=True),
    Fault("g forward without its TP AllReduce", "collective", _drop_tp_allreduce, _verify(GPT, Plan(tp=2)),
          frozenset({"loss", "gradients", "bytes all_reduce/tp"})),
    Fault("DP gradient AllReduce padded by one element", "collective", _pad_dp_allreduce, _verify(GPT, Plan(dp=2)),
          frozenset({"bytes all_reduce/dp"})),
    Fault("DP gradients summed, not averaged", "data parallel", _dp_sum_not_mean, _verify(LLAMA, Plan(dp=2)),
          frozenset({"gradients", "updated parameters"}), detail_contains=("expected ones x2 (= dp",)),
    Fault("ZeRO-1 rank updates its neighbour's shard", "ZeRO", _zero_wrong_shard_owner,
          _verify(GPT, Plan(dp=2, zero=1)), frozenset({"updated parameters"})),
    Fault("vocab-parallel loss without the sum AllReduce", "collective", _vocab_parallel_loss_without_sum,
          _verify(LLAMA, Plan(tp=2)), frozenset({"loss", "bytes all_reduce/tp"})),
    Fault("MoE dispatch AllToAll delivers to the wrong rank", "expert parallel", _moe_dispatch_rotated,
          _verify(MOE, Plan(dp=2, ep=2)), frozenset({"loss"})),
    Fault("tied embedding gradients not synchronised across stages", "pipeline", _tied_embedding_not_synchronised,
          _verify(GPT, Plan(pp=2)), frozenset({"updated parameters", "bytes all_reduce/pp"})),
    Fault("sequence-parallel norm gradients not reduced over tp", "collective", _sequence_parallel_grads_not_reduced,
          _verify(GPT, Plan(tp=2, sequence_parallel=True)), frozenset({"gradients", "bytes all_reduce/tp"})),
    Fault("stage sends the previous micro-batch's activation", "pipeline", _wrong_microbatch_sent,
          _verify(GPT, Plan(pp=2)), frozenset({"loss"})),
    Fault("ZeRO-1 updated parameters not gathered", "ZeRO", _zero1_parameters_not_gathered,
          _verify(GPT, Plan(dp=2, zero=1)), frozenset({"updated parameters", "bytes all_gather/dp"})),
    Fault("stale ZeRO-3 parameters: gathered once, reused", "ZeRO", _zero3_stale_parameters,
          _verify(GPT, Plan(dp=2, zero=3)), frozenset({"loss", "bytes all_gather/dp"})),
    Fault("ZeRO-3 keeps every gathered unit", "memory", _zero3_gathered_never_freed,
          _verify(GPT, Plan(dp=2, zero=3)), frozenset({"memory weights"})),
    Fault("activations never freed", "memory", _activations_never_freed, _verify(LLAMA, Plan(pp=2)),
          frozenset({"memory activations"})),
    Fault("full recompute also keeps the full cache", "memory", _full_recompute_keeps_the_cache,
          _verify(GPT, Plan(tp=2, recompute="full")), frozenset({"memory activations"})),
    Fault("optimizer state discarded every step", "optimizer", _optimizer_state_discarded,
          _verify(LLAMA, Plan(dp=2, zero=1)), frozenset({"updated parameters"})),  # the loss of each step is
    # computed from the sharded run's own weights (anchored oracle): the wrong update shows where it is made
    Fault("Adam step counter stuck at 1", "optimizer", _step_counter_stuck, _verify(GPT, Plan(dp=2)),
          frozenset({"updated parameters"})),
    Fault("momentum buffer not kept on ZeRO shards", "optimizer", _momentum_not_kept_on_zero_shards,
          _verify(GPT, Plan(dp=2, zero=2), TRAIN.model_copy(update={"optimizer": "momentum"})),
          frozenset({"updated parameters"})),
    Fault("shared optimizer dampens momentum", "optimizer", _momentum_dampened,
          _torch(GPT, Plan(dp=2), TRAIN.model_copy(update={"optimizer": "momentum"})),
          frozenset({"updated parameters"}), needs_torch=True),
    Fault("LR warm-up not applied on the ranks", "optimizer", _lr_schedule_ignored_on_ranks,
          _verify(LLAMA, Plan(tp=2)), frozenset({"updated parameters"})),
    Fault("gradients not zeroed between steps", "optimizer", _gradients_not_zeroed, _verify(LLAMA, Plan(dp=2)),
          frozenset({"gradients"})),
    Fault("pipeline message never sent (deadlock)", "diagnostics", _pipeline_message_dropped,
          _verify(GPT, Plan(pp=2)), frozenset({"execution"}),
          detail_contains=("deadlock", "waits for", "needs the activation of micro-batch", "stages: pp rank 0: stage 0")),
    Fault("numpy shape error inside a rank", "diagnostics", _shape_error_in_a_rank, _verify(LLAMA, Plan(tp=2)),
          frozenset({"execution"}), detail_contains=("RankStepError", "stage 0: F0 of optimizer step 1", "ValueError")),
    Fault("1F1B warm-up one micro-batch too long", "schedule", _one_f_one_b_warmup_one_too_long,
          _verify(GPT, Plan(pp=2)), frozenset({"warm-up forwards", "in-flight micro-batches"})),
    Fault("no pipelining: F_i B_i per micro-batch", "schedule", _unpipelined_order, _verify(GPT, Plan(pp=2)),
          frozenset({"warm-up forwards", "measured bubble"})),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_verify_fails_on_the_named_check(fault, monkeypatch):
    """Under the fault, verify fails and every check the fault breaks by definition is a failed row."""
    if fault.needs_torch:
        pytest.importorskip("torch")
    inj = Injector(monkeypatch)
    fault.inject(inj)
    report = fault.run()
    assert inj.fired, f"{fault.name}: the fault never fired (its seam left the executed path: update the fault)"
    failed = {r.name: r.detail for r in report.rows if not r.passed}
    assert not report.passed, f"{fault.name}: verify passed"
    assert fault.must_fail <= set(failed), f"{fault.name}: expected {sorted(fault.must_fail)} to fail, got {failed}"
    if fault.detail_contains:
        detail = " ".join(failed[name] for name in sorted(fault.must_fail))
        missing = [w for w in fault.detail_contains if w not in detail]
        assert not missing, f"{fault.name}: the report does not say {missing}: {detail}"


def test_the_suite_covers_the_issue_classes():
    """At least 25 faults, across layer math, collectives, memory, optimizer and schedule."""
    families = {f.family for f in FAULTS}
    assert {"layer math", "collective", "memory", "optimizer", "schedule", "ZeRO", "diagnostics"} <= families
    assert len({f.name for f in FAULTS}) == len(FAULTS) >= 25


def test_the_numpy_oracle_cannot_see_shared_layer_faults(monkeypatch):
    """Why the layer-math faults need --oracle torch: the numpy reference calls the same broken
    RoPE as the sharded run, so verify with it passes (issue 15's first bullet)."""
    inj = Injector(monkeypatch)
    _rope_base_1e3(inj)
    assert verify(LLAMA, TRAIN, Plan(dp=2), scale=False, steps=1).passed


RUNS = list(dict.fromkeys(f.run for f in FAULTS))


@pytest.mark.parametrize("run", RUNS, ids=[f"{r.spec.name} {r.plan.dp}x{r.plan.tp}x{r.plan.pp} z{r.plan.zero} "
                                           f"{r.training.optimizer} {r.oracle}" + (" rc" if r.plan.recompute else "")
                                           for r in RUNS])
def test_every_fault_run_passes_without_the_fault(run):
    """The control: each configuration the faults run under passes when nothing is broken, so
    every failure above is the fault's."""
    if run.oracle == "torch":
        pytest.importorskip("torch")
    report = run()
    assert report.passed, {r.name: r.detail for r in report.rows if not r.passed}
