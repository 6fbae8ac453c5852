"""An anchored oracle (`oracle.result.Starts`): step t's loss and gradients at the weights it is
given, its optimizer state carried from its own earlier steps; verify anchors it to the sharded
run, so every step is compared from the same weights.

Expected values are worked by hand for L(w) = w^2 / 2 (dL/dw = w) from Adam's update (Kingma &
Ba 2015, Algorithm 1; AdamW without weight decay is the same rule, Loshchilov & Hutter 2019):
m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, w -= lr * m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps).
The torch case runs torch.optim.AdamW on the same loss.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle.numpy_ref import numpy_run

ADAM = OptimizerConfig(kind="adamw", lr=0.1, weight_decay=0.0)  # constant lr, betas (0.9, 0.999), eps 1e-8
W0, ANCHOR = 2.0, 5.0
"""Step 1 from w = 2 (the oracle's own initial weight), step 2 from w = 5 (given)."""


def hand_two_steps() -> tuple[float, float, float]:
    """(step-1 weight, step-2 gradient, step-2 weight) by Algorithm 1 with state from both steps."""
    b1, b2, lr, eps = 0.9, 0.999, 0.1, 1e-8
    g1 = W0
    m, v = (1 - b1) * g1, (1 - b2) * g1**2
    w1 = W0 - lr * (m / (1 - b1)) / (math.sqrt(v / (1 - b2)) + eps)  # 2 - 0.1 * 2 / (2 + 1e-8)
    g2 = ANCHOR  # the gradient at the anchor, not at w1
    m, v = b1 * m + (1 - b1) * g2, b2 * v + (1 - b2) * g2**2  # m = 0.68, v = 0.028996
    w2 = ANCHOR - lr * (m / (1 - b1**2)) / (math.sqrt(v / (1 - b2**2)) + eps)
    return w1, g2, w2


def quadratic(params, _batch):
    w = params["w"]
    return float(0.5 * np.sum(w * w)), {"w": w.copy()}


def test_hand_values_differ_from_a_fresh_start():
    """The case can tell carried state from reset state: a reset Adam moves the anchor by lr."""
    _, _, w2 = hand_two_steps()
    assert abs((ANCHOR - w2) - 0.1) > 5e-3


def test_numpy_oracle_starts_step_two_at_the_anchor():
    """Step 2's gradient is the anchor's (5, not w1 = 1.9) and its update carries step 1's state."""
    w1, g2, w2 = hand_two_steps()
    run = numpy_run({"w": np.array([W0])}, [None, None], ADAM, quadratic, starts=[None, {"w": np.array([ANCHOR])}])
    first, second = run.steps
    assert first.params["w"][0] == pytest.approx(w1, rel=1e-14)
    assert second.grads["w"][0] == g2 and second.loss == 0.5 * ANCHOR**2
    assert second.params["w"][0] == pytest.approx(w2, rel=1e-14)


def test_numpy_oracle_without_starts_runs_free():
    """No anchor: step 2 starts from the oracle's own step-1 weight."""
    w1, _, _ = hand_two_steps()
    run = numpy_run({"w": np.array([W0])}, [None, None], ADAM, quadratic)
    assert run.steps[1].grads["w"][0] == pytest.approx(w1, rel=1e-14)


def test_torch_oracle_starts_step_two_at_the_anchor():
    """torch.optim.AdamW keeps its state when the anchor is copied into its parameter."""
    torch = pytest.importorskip("torch")
    from modelplan.execute.oracle.torch_train import train_torch

    w = torch.tensor([W0], dtype=torch.float64, requires_grad=True)
    run = train_torch(torch, {"w": w}, lambda _batch: 0.5 * (w * w).sum(), [None, None], ADAM,
                      lambda _name, a: a, starts=[None, {"w": np.array([ANCHOR])}])
    w1, g2, w2 = hand_two_steps()
    first, second = run.steps
    assert first.params["w"][0] == pytest.approx(w1, rel=1e-14)
    assert second.grads["w"][0] == g2
    assert second.params["w"][0] == pytest.approx(w2, rel=1e-14)
