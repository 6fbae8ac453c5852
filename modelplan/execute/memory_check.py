"""Measured memory against the planner's memory model, per pipeline stage and per term.

Each rank reports the peak bytes of the live arrays it held (`memory_probe.py`, observed after
every parameter gather, compute step and optimizer step). The expected figures come from the
planner's functions for the same (scaled-down) plan, at 8 bytes per element (float64):

- weights, gradients, optimizer state: `plan/shard.py`'s per-rank elements (ZeRO 0-3, padded
  flat buffers) x 8, exact;
- gathered (ZeRO-3): the units of the largest chunk the rank computes (`plan/stages.py`,
  `plan/shard.py`), exact; the executor gathers a whole chunk before computing it, where the
  planner's model (`plan/memory.py`) allows two blocks (current and prefetched, FSDP);
- activations (what the blocks keep) and edge activations (the embedding's, the head's and the
  loss's): `plan/memory.py`'s `stage_memory` with Korthikanti et al.'s per-block bytes
  (`count/memory.py` at 8 bytes, eager attention: the executor keeps the s x s probabilities)
  times the micro-batches the schedule keeps in flight, within ACTIVATION_TOLERANCE (wider below
  than above); its embedding and head terms are shown beside what the executor keeps there, not
  compared (EDGE_NOTE). MoE blocks are priced with every expert slot filled (top_k = num_experts):
  the executor's fixed-shape dispatch gives every expert one slot per token (GShard's dispatch
  tensor at capacity = tokens), where a dropless engine keeps only the top_k routed copies; the executor's caches differ from the paper's tally in known small ways
  (norm statistics, K/V kept after the GQA repeat, float64 logits, the scaled-down tensors'
  sizes); a wrong free or a kept cache moves it by whole micro-batches or whole blocks;
- unaccounted: arrays the rank's state reaches outside every term above: none expected.

Observation happens between steps, so transient working buffers are not seen (the planner's
working-set term is left out of the comparison). Communication buffers (messages received and
not consumed yet) are reported, not compared: the simulator's in-flight messages live in its
fabric, not in the rank.
"""

from __future__ import annotations

import math
from dataclasses import fields

from modelplan.count.memory import activation_bytes_per_layer, embedding_activation_bytes, output_activation_bytes
from modelplan.execute.report import VerifyRow
from modelplan.plan.layerterms import LayerTerms
from modelplan.plan.memory import inflight_microbatches, stage_memory
from modelplan.plan.shard import rank_elements, unit_shards
from modelplan.plan.stages import stage_layers, stage_units
from modelplan.specs.costmodel import CostModel
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

ITEMSIZE = 8  # float64
ACTIVATION_TOLERANCE = (0.5, 0.35)
"""Measured block activations may be this fraction below / above the model's figure. Below is
wider: the tallies count a tensor two layers keep (an activation's output that is the next
linear layer's input) once per layer, the executor holds it once; above is where leaks show."""
EDGE_NOTE = ("reported, not compared: the planner's edge terms are Megatron's estimator (token ids; "
             "4 s b h (1 + V/h) / t with fp32 logits), whose s b h part tp does not split without sequence "
             "parallelism and weighs as much as the logits at the scaled-down widths")
"""Why the embedding's, head's and loss's activations are shown but not checked."""
STATE_TERMS = ("weights", "gradients", "optimizer")


def _terms(activation: int, embedding: int, head: int) -> LayerTerms:
    """LayerTerms carrying only the byte terms stage_memory reads (times are irrelevant here)."""
    values = {f.name: 0.0 for f in fields(LayerTerms) if f.type in ("float", float)}
    return LayerTerms(**values, activation_bytes=activation, working_bytes=0, embedding_activation_bytes=embedding,
                      head_activation_bytes=head, boundary_bytes=0)


def planned_stage_memory(spec: TransformerSpec, training: TrainingSpec, plan: Plan, num_microbatches: int,
                         recompute: str) -> list[dict[str, float]]:
    """Per pipeline rank, the planner's bytes per term for this (scaled) plan at float64."""
    b, s, tp, sp = plan.micro_batch, training.seq_len, plan.tp, plan.sequence_parallel
    elements = rank_elements(spec, plan, training)
    shards = unit_shards(spec, plan)
    stages = plan.pp * plan.vpp
    units = stage_units(spec, stages)
    emb = embedding_activation_bytes(spec, b, s, tp, sp)
    head = output_activation_bytes(spec, b, s, ITEMSIZE, tp)
    out = []
    for r in range(plan.pp):
        mine = [c * plan.pp + r for c in range(plan.vpp)]
        layers = [i for v in mine for i in stage_layers(spec.layers, stages, v)]
        moe = [i for i in layers if spec.is_moe_layer(i)]
        dispatched = spec if spec.moe is None else spec.model_copy(
            update={"moe": spec.moe.model_copy(update={"top_k": spec.moe.num_experts})})
        per = {kind: activation_bytes_per_layer(model, b, s, ITEMSIZE, tp, sp, recompute, layer_index=group[0],
                                                attention="eager") if group else 0
               for kind, model, group in (("dense", spec, [i for i in layers if i not in moe]),
                                          ("moe", dispatched, moe))}
        e = elements[r]
        states = (e.weights * ITEMSIZE, e.gradients * ITEMSIZE, e.optimizer * ITEMSIZE)
        inflight = inflight_microbatches(plan.schedule, plan.pp, r, num_microbatches, plan.vpp)
        first, last = 0 in mine, stages - 1 in mine
        mem = stage_memory(states, len(layers), inflight, _terms(per["dense"], emb, head), first, last, 0, CostModel(),
                           _terms(per["moe"], emb, head), len(moe))
        blocks = stage_memory(states, len(layers), inflight, _terms(per["dense"], 0, 0), first, last, 0, CostModel(),
                              _terms(per["moe"], 0, 0), len(moe)).activations
        gathered = 0
        if plan.zero == 3:
            gathered = max(sum(shards[u].numel for u in units[v] if u in shards) for v in mine) * ITEMSIZE
        out.append({"weights": mem.weights, "gradients": mem.gradients, "optimizer": mem.optimizer,
                    "gathered": float(gathered), "activations": blocks, "edge_activations": mem.activations - blocks})
    return out


def check_measured_memory(results, expected: list[dict[str, float]]) -> list[VerifyRow]:
    """One row per term: every rank's measured peak against its stage's planned bytes."""
    rows = []
    bounds = {"activations": ACTIVATION_TOLERANCE}
    for term, label in (("weights", "weights"), ("gradients", "gradients"), ("optimizer", "optimizer state"),
                        ("gathered", "gathered parameters"), ("activations", "activations"),
                        ("edge_activations", "edge activations")):
        if term in ("gathered", "edge_activations") and not any(e[term] for e in expected):
            continue
        got = [(r, r.memory.peak[term], expected[r.coords.pp_rank][term]) for r in results]
        if term == "edge_activations":
            ratios = [g / w for _, g, w in got if w]
            span = f"measured/planned x{min(ratios):.3g}..x{max(ratios):.3g}; " if ratios else ""
            rows.append(VerifyRow(name=f"memory {label}", passed=True, detail=span + EDGE_NOTE,
                                  measured=sum(g for _, g, _ in got), expected=sum(w for _, _, w in got)))
            continue
        below, above = bounds.get(term, (0.0, 0.0))
        wrong = [(r, g, w) for r, g, w in got if not w * (1 - below) <= g <= w * (1 + above)]
        if wrong:
            r, g, w = max(wrong, key=lambda x: abs(x[1] - x[2]) / max(x[2], 1))
            detail = (f"{len(wrong)} rank(s) off; rank {r.rank} (stage {r.coords.pp_rank}) peaked at {g:,.0f} B, "
                      f"the planner's {term} term is {w:,.0f} B (x{g / w:.3g})" if w else
                      f"{len(wrong)} rank(s) off; rank {r.rank} (stage {r.coords.pp_rank}) peaked at {g:,.0f} B, "
                      f"the planner's {term} term is 0 B")
        else:
            ratios = [g / w for _, g, w in got if w]
            span = f"measured/planned x{min(ratios):.3g}..x{max(ratios):.3g}" if ratios else "0 B everywhere"
            within = f" (within -{below:.0%}/+{above:.0%})" if above else ", exact"
            detail = f"peak per stage against the planner; {span}{within}"
        rows.append(VerifyRow(name=f"memory {label}", passed=not wrong, detail=detail,
                              measured=sum(g for _, g, _ in got), expected=sum(w for _, _, w in got)))
    other = [(r, r.memory.peak["other"]) for r in results]
    stray = [(r, n) for r, n in other if n]
    detail = "no live arrays outside the terms above" if not stray else (
        f"{len(stray)} rank(s) hold arrays no term accounts for; rank {stray[0][0].rank}: {stray[0][1]:,} B")
    rows.append(VerifyRow(name="memory unaccounted", passed=not stray, detail=detail,
                          measured=sum(n for _, n in other), expected=0))
    return rows


def planned_network_memory(stages, plan: Plan, optimizer_states: int, schedules) -> list[dict[str, float]]:
    """Per pipeline rank, the network planner's bytes per term (`plan/net_shard.py`) at float64:
    states exact; activations the peak, over the schedule, of what the in-flight micro-batches
    keep (float elements x 8 plus masks and indices), the last stage's also counting what its loss
    keeps for backward (the softmax or the residual, one output per sample), which
    `plan/net_shard.py` leaves out."""
    from modelplan.plan.net_shard import StageActivations, in_flight_peak, net_rank_elements, net_unit_shards
    from modelplan.plan.net_shard import stage_activations

    elements = net_rank_elements(stages, plan, optimizer_states)
    shards = net_unit_shards(stages, plan)
    last = len(stages) - 1
    out = []
    for r in range(plan.pp):
        mine = [c * plan.pp + r for c in range(plan.vpp)]
        layers, losses = [], []
        for v in mine:
            layers.append(stage_activations(stages[v], plan))
            loss = math.prod(stages[v].nodes[-1].info.output_shape) * plan.micro_batch if v == last else 0
            losses.append(StageActivations(loss, 0))
        a, loss = in_flight_peak(schedules[r], layers), in_flight_peak(schedules[r], losses)
        e = elements[r]
        gathered = 0
        if plan.zero == 3:
            gathered = max(sum(shards[u].numel for u in stages[v].units if u in shards) for v in mine) * ITEMSIZE
        out.append({"weights": e.weights * ITEMSIZE, "gradients": e.gradients * ITEMSIZE,
                    "optimizer": e.optimizer * ITEMSIZE, "gathered": float(gathered),
                    "activations": float(a.elements * ITEMSIZE + a.fixed_bytes),
                    "edge_activations": float(loss.elements * ITEMSIZE)})
    return out
