"""`execute/step_checks.py` and `optim.update_sensitivity`: the updated-parameter check allows what
the gradient's tolerance moves an update, element by element, and no more.

Expected values are hand-worked from Adam's update (Kingma & Ba 2015, Algorithm 1): at step 1,
m_hat = g and v_hat = g^2, so u = lr g / (|g| + eps) and du/dg = lr eps / (|g| + eps)^2, which is
lr / eps at g = 0; at later steps the derivative is checked against a central finite difference of
`optimizer_step` itself."""

from __future__ import annotations

import numpy as np
import pytest

from modelplan.execute.checks import REL_TOL, compare_tensors
from modelplan.execute.optim import OptimizerConfig, optimizer_step, update_sensitivity
from modelplan.execute.oracle.result import OracleStep
from modelplan.execute.step_checks import update_allowances

ADAMW = OptimizerConfig(kind="adamw", lr=1e-2, eps=1e-6, weight_decay=0.1)


def test_adam_first_step_sensitivity_is_lr_eps_over_g_plus_eps_squared():
    """Step 1: |du/dg| = lr eps / (|g| + eps)^2: lr / eps = 1e4 at g = 0, 1e-2 * 1e-6 / (1 + 1e-6)^2 at g = 1."""
    g = np.array([0.0, 1.0, -1e-6])
    state = ADAMW.init_state(3)
    optimizer_step(ADAMW, np.zeros(3), g, state, 1)
    got = update_sensitivity(ADAMW, g, state, 1)
    want = 1e-2 * 1e-6 / (np.abs(g) + 1e-6) ** 2
    assert got == pytest.approx(want, rel=1e-12)
    assert got[0] == pytest.approx(1e4, rel=1e-12)


@pytest.mark.parametrize("kind", ["adam", "adamw", "momentum", "sgd"])
def test_sensitivity_matches_a_finite_difference_of_the_update(kind):
    """At step 3 (moments from two earlier steps) |d w_new / d g| equals a central difference."""
    cfg = OptimizerConfig(kind=kind, lr=1e-2, eps=1e-6, weight_decay=0.1)
    rng = np.random.default_rng(0)
    w, g1, g2, g3 = (rng.standard_normal(5) for _ in range(4))
    state = cfg.init_state(5)
    for t, g in ((1, g1), (2, g2)):
        w = optimizer_step(cfg, w, g, state, t)
    h = 1e-6
    up = optimizer_step(cfg, w, g3 + h, [s.copy() for s in state], 3)
    down = optimizer_step(cfg, w, g3 - h, [s.copy() for s in state], 3)
    after = [s.copy() for s in state]
    optimizer_step(cfg, w, g3, after, 3)
    used = g3 + cfg.weight_decay * w if kind == "adam" else g3
    assert update_sensitivity(cfg, used, after, 3) == pytest.approx(np.abs(up - down) / (2 * h), rel=1e-5)


def _one_step(grad: np.ndarray) -> tuple[OracleStep, np.ndarray]:
    """The oracle's step 1 from w = 1 with gradient `grad`, and its updated weights."""
    w = np.ones_like(grad)
    new = optimizer_step(ADAMW, w, grad, ADAMW.init_state(grad.size), 1)
    return OracleStep(loss=1.0, grads={"w": grad}, params={"w": new}), w


def test_a_zero_gradients_rounding_amplified_by_lr_over_eps_passes():
    """A gradient element that is 0 in the oracle and 1e-12 in the sharded run (far inside the
    gradient's 1e-9 tolerance) moves its first Adam update by ~ lr/eps x 1e-12 = 1e-8, over the
    plain 1e-9 check; the allowance (1e4 x 1e-9 x scale 1) accepts it."""
    grad = np.array([1.0, 0.0])
    ref, w = _one_step(grad)
    got = optimizer_step(ADAMW, w, grad + np.array([0.0, 1e-12]), ADAMW.init_state(2), 1)
    plain = compare_tensors("updated parameters", {"w": got}, ref.params, [])
    allowed = compare_tensors("updated parameters", {"w": got}, ref.params, [],
                              allowance=update_allowances(ADAMW, [ref])[0])
    assert not plain.passed and plain.measured > REL_TOL
    assert allowed.passed, allowed.detail


def test_a_perturbed_gradient_still_fails_the_update_check():
    """The same zero element off by 1e-7 (100 x the gradient's tolerance of 1e-9 x scale 1) moves
    the update by lr x 1e-7 / (1e-7 + eps) ~ 9.1e-4, past the allowance lr / eps x 1e-9 = 1e-5
    (relative to the tensor's scale, the decayed weight 1 - lr x weight_decay = 0.999)."""
    grad = np.array([1.0, 0.0])
    ref, w = _one_step(grad)
    got = optimizer_step(ADAMW, w, grad + np.array([0.0, 1e-7]), ADAMW.init_state(2), 1)
    row = compare_tensors("updated parameters", {"w": got}, ref.params, [],
                          allowance=update_allowances(ADAMW, [ref])[0])
    assert not row.passed, row.detail
    assert row.measured == pytest.approx(1e-2 * 1e-7 / (1e-7 + 1e-6) / 0.999, rel=1e-6)
