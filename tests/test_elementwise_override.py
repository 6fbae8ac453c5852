"""`TrainingSpec.elementwise` / `plan --elementwise`: the model code's element-wise ops where they
are not the engine's (a transformers model under DeepSpeed ZeRO runs eager PyTorch composites
while the deepspeed profile describes Megatron-DeepSpeed's fused kernels)."""

import json

from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import load_cluster
from modelplan.plan.engine import engine_settings
from modelplan.plan.estimate import estimate_split
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

BASE = dict(global_batch=8, seq_len=4096, precision="bf16", optimizer="adamw", recompute="none", framework="deepspeed")


def test_the_run_setting_overrides_the_engine_profile():
    """deepspeed's profile fuses; the run's 'eager' wins, and torch.compile still fuses everything."""
    deepspeed = load_engine("deepspeed")
    assert deepspeed.elementwise == "fused"
    assert engine_settings(TrainingSpec(**BASE), deepspeed).elementwise == "fused"
    eager = engine_settings(TrainingSpec(**BASE, elementwise="eager"), deepspeed)
    assert (eager.elementwise, eager.norm_elementwise) == ("eager", "eager")
    assert engine_settings(TrainingSpec(**BASE, elementwise="eager", compile=True), deepspeed).elementwise == "fused"


def test_eager_blocks_keep_what_autograd_saves():
    """Llama-2-7B, 4096 tokens a rank, no recompute: eager blocks keep 32 x 4096 x (8 h + 2 f) bytes more.

    Hand count from transformers' LlamaRMSNorm (`hidden_states.to(torch.float32)`, pow, mean,
    rsqrt, `weight * hidden_states.to(input_dtype)`): autograd saves the fp32 input (4 B) and the
    bf16 normalised output (2 B) where a fused norm saves its bf16 input (2 B): 4 h more per norm,
    two norms a block; LlamaMLP `act_fn(gate_proj(x)) * up_proj(x)`: the product saves silu's bf16
    output (2 B of f), which a fused SwiGLU recomputes. h = 4096, f = 11008 (Llama-2-7B config.json)."""
    spec, cluster = load_model("llama-2-7b"), load_cluster("dgx-a100")
    plan = Plan(dp=8, tp=1, pp=1, micro_batch=1, zero=3, recompute="none")
    fused = estimate_split(spec, TrainingSpec(**BASE), plan, cluster, world_size=8)
    eager = estimate_split(spec, TrainingSpec(**BASE, elementwise="eager"), plan, cluster, world_size=8)
    hand = 32 * 4096 * (2 * 4 * 4096 + 2 * 11008)
    assert hand == 7_180_648_448
    assert eager.memory[0].activations - fused.memory[0].activations == hand
    assert eager.step.step_time_s > fused.step.step_time_s  # each composite is another pass over HBM


def test_cli_elementwise_reaches_the_training_spec():
    args = ["plan", "llama-2-7b", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8", "--zero", "3", "--batch", "8",
            "--seq", "4096", "--micro-batch", "1", "--recompute", "none", "--framework", "deepspeed", "--top", "1",
            "--json"]
    result = CliRunner().invoke(app, [*args, "--elementwise", "eager"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["training"]["elementwise"] == "eager"
    base = json.loads(CliRunner().invoke(app, args).output)
    assert base["training"]["elementwise"] is None


def test_cli_rejects_an_unknown_kind():
    result = CliRunner().invoke(app, ["plan", "llama-2-7b", "--gpus", "8", "--elementwise", "lazy"])
    assert result.exit_code != 0
    assert "elementwise" in result.output and "Traceback" not in result.output
