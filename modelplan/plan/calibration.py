"""Published training runs as planner inputs, and the predicted-vs-published comparison.

A record (tests/data/calibration_runs.json, from Narayanan et al. SC'21 Table 1 with the launch
settings of Megatron-LM's examples/sc21 scripts) names a GPT's sizes, the parallel plan, the
batch and the reported TFLOP/s per GPU. Megatron GPT defaults of 2021 that the table does not
print are stated here: LayerNorm with bias, biases on every linear layer, learned positions,
GeLU MLP of ffn_hidden, tied embeddings, dropout, fp16 with fp32 master weights and fp32 grads,
Adam, full recompute, no ZeRO, unfused (eager) attention.

The paper's FLOP count 96 B s l h^2 (1 + s/6h + V/16lh) includes the recompute forward; it is
exactly the planner's hardware FLOPs for these models (count.flops convention), so the predicted
figure is hardware FLOPs / (step time x GPUs), compared with the reported TFLOP/s per GPU.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from modelplan.plan.estimate import estimate_plan
from modelplan.plan.results import PlanEstimate
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


class CalibrationCase(BaseModel):
    """One published run as planner inputs."""

    model_config = ConfigDict(frozen=True)

    id: str
    spec: TransformerSpec
    training: TrainingSpec
    plan: Plan
    gpus: int
    reported_tflops_per_gpu: float


class CalibrationRow(BaseModel):
    """Predicted against published throughput of one run."""

    model_config = ConfigDict(frozen=True)

    case: CalibrationCase
    estimate: PlanEstimate
    paper_flops: float
    """96 B s l h^2 (1 + s/6h + V/16lh) (Narayanan et al. 2021, eq. in sec. 5.1)."""
    predicted_tflops_per_gpu: float

    @property
    def error(self) -> float:
        """Relative error of the prediction (predicted / reported - 1)."""
        return self.predicted_tflops_per_gpu / self.case.reported_tflops_per_gpu - 1


def megatron_gpt(record: dict) -> CalibrationCase:
    """A calibration record as (spec, training, plan) with Megatron's 2021 GPT defaults."""
    m, p = record["model"], record["parallel"]
    spec = TransformerSpec(
        name=m["name"], source=record["source"], layers=m["layers"], hidden=m["hidden"],
        heads=m["heads"], kv_heads=m.get("kv_heads"), ffn_hidden=m["ffn_hidden"], vocab=m["vocab"],
        max_positions=m["seq_len"], position="learned", norm="layernorm", norm_bias=True,
        qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=m.get("gated_mlp", False),
        activation="gelu", tied_embeddings=m.get("tied_embeddings", True), dropout=True,
    )
    training = TrainingSpec(
        global_batch=p["global_batch"], seq_len=m["seq_len"], precision=record["precision"],
        optimizer="adam", recompute=p["recompute"], attention="eager",  # 2021: unfused softmax
    )
    plan = Plan(
        dp=p["dp"], tp=p["tp"], pp=p["pp"], vpp=p["vpp"], micro_batch=p["micro_batch"],
        schedule="interleaved" if p["vpp"] > 1 else "1f1b", sequence_parallel=p["sequence_parallel"],
        recompute=p["recompute"], zero=p["zero_stage"],
    )
    return CalibrationCase(
        id=record["id"], spec=spec, training=training, plan=plan, gpus=record["hardware"]["num_gpus"],
        reported_tflops_per_gpu=record["reported"]["tflops_per_gpu"],
    )


def paper_flops(spec: TransformerSpec, training: TrainingSpec) -> float:
    """Narayanan et al. 2021: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with full recompute."""
    B, s, l, h, V = training.global_batch, training.seq_len, spec.layers, spec.hidden, spec.vocab
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def calibrate(case: CalibrationCase, cluster: Cluster, cost: CostModel | None = None) -> CalibrationRow:
    """Predict one published run's throughput in the paper's convention."""
    est = estimate_plan(case.spec, case.training, case.plan, cluster, cost, world_size=case.gpus)
    flops = paper_flops(case.spec, case.training)
    return CalibrationRow(
        case=case, estimate=est, paper_flops=flops,
        predicted_tflops_per_gpu=flops / (est.step.step_time_s * case.gpus) / 1e12,
    )
