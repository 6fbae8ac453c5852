"""Hand-written backward passes of the numpy layers against central finite differences.

Expected values come from the forward pass itself, differentiated numerically:
dL/dtheta . u ~ (L(theta + eps u) - L(theta - eps u)) / (2 eps) with a random direction u and
L = sum(y * R) for a fixed random R (so dL/dy = R). In float64 with eps = 1e-6 the central
difference is accurate to about 1e-9 relative, so 1e-6 relative (1e-7 absolute, for gradients that are truly zero such as a key bias
under softmax) is a safe bound that any wrong term breaks.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelplan.execute.layers.activations import activation_backward, activation_forward
from modelplan.execute.layers.attention import AttentionShape, attention_backward, attention_forward
from modelplan.execute.layers.embedding import embedding_backward, embedding_forward
from modelplan.execute.layers.linear import linear_backward, linear_forward
from modelplan.execute.layers.loss import cross_entropy_backward, cross_entropy_forward
from modelplan.execute.layers.mlp import mlp_backward, mlp_forward
from modelplan.execute.layers.moe import experts_backward, experts_forward, router_backward, router_forward
from modelplan.execute.layers.norm import norm_backward, norm_forward

EPS = 1e-6
TOL = 1e-6


def directional_check(loss, arrays: dict[str, np.ndarray], grads: dict[str, np.ndarray], rng) -> None:
    """Each analytic gradient, projected on a random direction, equals the central difference."""
    for name, a in arrays.items():
        u = rng.normal(size=a.shape)
        a += EPS * u
        plus = loss()
        a -= 2 * EPS * u
        minus = loss()
        a += EPS * u
        numeric = (plus - minus) / (2 * EPS)
        analytic = float(np.sum(grads[name] * u))
        assert analytic == pytest.approx(numeric, rel=TOL, abs=1e-7), name


def test_linear_gradients():
    """dx, dw, db of y = x @ w + b."""
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)), rng.normal(size=5)
    R = rng.normal(size=(2, 3, 5))
    dx, dw, db = linear_backward(x, w, R, True)
    directional_check(lambda: float(np.sum(linear_forward(x, w, b) * R)), {"x": x, "w": w, "b": b},
                      {"x": dx, "w": dw, "b": db}, rng)


@pytest.mark.parametrize("kind", ["gelu", "gelu_tanh", "relu", "silu"])
def test_activation_gradients(kind):
    """phi'(x) of each activation (ReLU away from 0)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 7)) + 0.05
    R = rng.normal(size=x.shape)
    dx = activation_backward(kind, x, R)
    directional_check(lambda: float(np.sum(activation_forward(kind, x) * R)), {"x": x}, {"x": dx}, rng)


def test_gelu_matches_its_definition():
    """GELU(1) = 1 * Phi(1) = 0.8413447460685429 (standard normal CDF at 1, from tables)."""
    assert activation_forward("gelu", np.array([1.0]))[0] == pytest.approx(0.8413447460685429, rel=1e-15)


@pytest.mark.parametrize("kind,bias", [("layernorm", True), ("layernorm", False), ("rmsnorm", False)])
def test_norm_gradients(kind, bias):
    """dx, dweight, dbias of LayerNorm and RMSNorm."""
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=(2, 3, 6)), 1 + rng.normal(size=6) * 0.1
    b = rng.normal(size=6) if bias else None
    R = rng.normal(size=x.shape)
    _, cache = norm_forward(kind, x, w, b, 1e-5)
    dx, dw, db = norm_backward(cache, w, R, bias)
    arrays, grads = {"x": x, "w": w}, {"x": dx, "w": dw}
    if bias:
        arrays["b"], grads["b"] = b, db
    directional_check(lambda: float(np.sum(norm_forward(kind, x, w, b, 1e-5)[0] * R)), arrays, grads, rng)


def _attention_params(rng, h, heads, kv, d, bias):
    p = {"q/weight": rng.normal(size=(h, heads * d)), "k/weight": rng.normal(size=(h, kv * d)),
         "v/weight": rng.normal(size=(h, kv * d)), "out/weight": rng.normal(size=(heads * d, h))}
    if bias:
        for n, width in (("q", heads * d), ("k", kv * d), ("v", kv * d)):
            p[f"{n}/bias"] = rng.normal(size=width)
    return p


@pytest.mark.parametrize("heads,kv,causal,rotary,bias", [
    (2, 2, True, True, False),  # MHA, causal, rotary
    (4, 2, False, False, True),  # GQA, bidirectional, biases
    (4, 1, True, True, True),  # MQA
])
def test_attention_gradients(heads, kv, causal, rotary, bias):
    """Gradients of every attention input and weight, MHA / GQA / MQA."""
    rng = np.random.default_rng(3)
    h, d = 6, 4
    x = rng.normal(size=(2, 5, h)) * 0.5
    p = _attention_params(rng, h, heads, kv, d, bias)
    shape = AttentionShape(heads, kv, d, causal, rotary)
    R = rng.normal(size=(2, 5, h))
    _, cache = attention_forward(x, p, shape)
    dx, grads = attention_backward(cache, p, shape, R)
    directional_check(lambda: float(np.sum(attention_forward(x, p, shape)[0] * R)), {"x": x, **p},
                      {"x": dx, **grads}, rng)


def test_causal_attention_ignores_the_future():
    """With a causal mask, changing the last token leaves earlier outputs unchanged."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(1, 4, 6))
    p = _attention_params(rng, 6, 2, 2, 3, False)
    shape = AttentionShape(2, 2, 3, True, False)
    y1 = attention_forward(x, p, shape)[0]
    x[0, -1] += 1.0
    y2 = attention_forward(x, p, shape)[0]
    np.testing.assert_array_equal(y1[0, :-1], y2[0, :-1])
    assert not np.allclose(y1[0, -1], y2[0, -1])


@pytest.mark.parametrize("gated,activation,bias", [(False, "gelu", True), (True, "silu", False)])
def test_mlp_gradients(gated, activation, bias):
    """Plain GELU MLP with biases and gated SwiGLU MLP."""
    rng = np.random.default_rng(5)
    h, f = 4, 6
    p = {"in/weight": rng.normal(size=(h, f)), "out/weight": rng.normal(size=(f, h))}
    if gated:
        p["gate/weight"] = rng.normal(size=(h, f))
    if bias:
        p["in/bias"] = rng.normal(size=f)
    x = rng.normal(size=(2, 3, h))
    R = rng.normal(size=(2, 3, h))
    _, cache = mlp_forward(x, p, activation, gated)
    dx, grads = mlp_backward(cache, p, activation, gated, R)
    directional_check(lambda: float(np.sum(mlp_forward(x, p, activation, gated)[0] * R)), {"x": x, **p},
                      {"x": dx, **grads}, rng)


def test_router_gradients():
    """Top-2 softmax router: gradient of the combine weights w.r.t. tokens and router weights."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(7, 4))
    p = {"router/weight": rng.normal(size=(4, 5)), "router/bias": rng.normal(size=5)}
    R = rng.normal(size=(7, 2))
    _, _, cache = router_forward(x, p, 2)
    dx, grads = router_backward(cache, p, R)
    directional_check(lambda: float(np.sum(router_forward(x, p, 2)[0] * R)), {"x": x, **p}, {"x": dx, **grads}, rng)


def test_router_picks_the_largest_logits():
    """Identity router weights: token [0, 3, 1] picks experts 1 then 2 with softmax(3, 1) weights."""
    p = {"router/weight": np.eye(3)}
    weights, experts, _ = router_forward(np.array([[0.0, 3.0, 1.0]]), p, 2)
    assert experts.tolist() == [[1, 2]]
    assert weights[0, 0] == pytest.approx(np.exp(3) / (np.exp(3) + np.exp(1)))


def test_experts_gradients():
    """A stack of 3 gated experts with biases, each on its own rows."""
    rng = np.random.default_rng(7)
    E, C, h, f = 3, 4, 4, 5
    p = {"experts/in/weight": rng.normal(size=(E, h, f)), "experts/gate/weight": rng.normal(size=(E, h, f)),
         "experts/out/weight": rng.normal(size=(E, f, h)), "experts/in/bias": rng.normal(size=(E, f)),
         "experts/out/bias": rng.normal(size=(E, h))}
    x = rng.normal(size=(E, C, h))
    R = rng.normal(size=(E, C, h))
    _, caches = experts_forward(x, p, "silu", True, True)
    dx, grads = experts_backward(caches, p, "silu", True, R)
    directional_check(lambda: float(np.sum(experts_forward(x, p, "silu", True, True)[0] * R)),
                      {"x": x, **p}, {"x": dx, **grads}, rng)


def test_embedding_gradient_and_row_range():
    """Scatter-add gradient; ids outside a vocab shard read zeros and get no gradient."""
    rng = np.random.default_rng(8)
    table = rng.normal(size=(4, 3))
    ids = np.array([[0, 5, 2, 5], [7, 4, 4, 6]])  # rows 4..7 live in this shard
    R = rng.normal(size=(2, 4, 3))
    out = embedding_forward(table, ids, first_row=4)
    np.testing.assert_array_equal(out[0, 0], 0.0)  # id 0 is in another shard
    np.testing.assert_array_equal(out[1, 0], table[3])  # id 7 is local row 3
    dtable = embedding_backward(4, ids, R, first_row=4)
    directional_check(lambda: float(np.sum(embedding_forward(table, ids, 4) * R)), {"t": table}, {"t": dtable}, rng)


def test_cross_entropy_value_and_gradient():
    """Uniform logits over V classes give loss log(V); the gradient matches finite differences."""
    loss, _ = cross_entropy_forward(np.zeros((2, 3, 7)), np.zeros((2, 3), dtype=int))
    assert loss == pytest.approx(np.log(7))
    rng = np.random.default_rng(9)
    logits, labels = rng.normal(size=(2, 3, 7)), rng.integers(0, 7, size=(2, 3))
    _, probs = cross_entropy_forward(logits, labels)
    d = cross_entropy_backward(probs, labels, 1.0)
    directional_check(lambda: cross_entropy_forward(logits, labels)[0], {"z": logits}, {"z": d}, rng)
