"""verify --oracle torch on today's families: the sharded run equals PyTorch float64 rebuilt from the
spec alone (`execute/oracle/torch_blocks.py`: masks, sinks, soft-caps, q/k norms, MLA, routers;
`torch_mamba.py`: the selective scan and causal conv; written with torch's functions; autograd and torch.optim), over two AdamW steps."""

from __future__ import annotations

import pytest

from modelplan.execute.verify import verify
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

CASES = {
    "deepseek-v3": Plan(dp=2, tp=2, pp=2, ep=2),  # MLA, sigmoid groups + correction, scaling, MTP
    "gemma-3-27b": Plan(tp=2, pp=2),  # sandwich norms, q/k norms, sliding window, scales
    "gemma-2-27b": Plan(tp=2, sequence_parallel=True),  # soft-caps
    "gpt-oss-20b": Plan(dp=2, ep=2, tp=2),  # sinks, expert biases, clamped SwiGLU
    "olmo-2-32b": Plan(tp=2, pp=2),  # output norms, q/k norms over all heads (statistics over tp)
    "granite-3.1-8b": Plan(tp=2),  # embedding, residual, attention and logit multipliers
    "jamba-v0.1": Plan(dp=2, tp=2, pp=2, ep=2),  # Mamba mixers (dt/B/C norms, x_proj reduce), MoE every other block
    "mamba-2.8b": Plan(tp=2, pp=2),
    "llama-4-maverick-text": Plan(dp=2, tp=2, ep=2),  # chunked + NoPE blocks, router weights on the expert inputs  # attention-free: selective scan, causal conv, no MLP
}


@pytest.mark.parametrize("preset", sorted(CASES))
def test_family_equals_torch(preset):
    """Every row passes against the torch oracle, gradients and parameters within 1e-9."""
    plan = CASES[preset]
    training = TrainingSpec(global_batch=plan.dp * 2 * plan.pp, seq_len=8, optimizer="adamw")
    report = verify(load_model(preset), training, plan, oracle="torch", steps=2)
    assert report.oracle == "torch"
    failed = {r.name: r.detail for r in report.rows if not r.passed}
    assert not failed, failed
