"""The architectural features the executor runs, each checked against central finite differences:
attention options (q/k norms of every scope, sinks, soft-cap, sliding / chunked masks, scale,
clip, partial rotary), MLA, the routers (softmax without renormalisation, sigmoid with selection
bias, groups and scaling), gpt-oss's clamped SwiGLU, and whole models using them (norm
placements, scales, shared-expert gate, MTP). Expected values are numerical derivatives of the
forward pass; forward semantics are pinned by hand-worked values where a formula fixes them."""

from __future__ import annotations

import numpy as np
import pytest

from test_exec_layers import _attention_params, directional_check
from modelplan.execute.layers.attention import AttentionShape, QKNorm, attention_backward, attention_forward, attention_mask
from modelplan.execute.layers.mla import MLAShape, mla_backward, mla_forward
from modelplan.execute.layers.mlp import mlp_backward, mlp_forward
from modelplan.execute.layers.moe import Router, router_backward, router_forward
from modelplan.execute.params import init_params, make_batch
from modelplan.execute.reference import loss_and_grads
from modelplan.specs.blocks import MLASpec, SSMSpec
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec


def _qk(scope, weight, kind="rmsnorm", bias=False, heads=4, kv=2, d=4):
    return QKNorm(kind, 1e-5, scope, weight, bias, heads * d, kv * d)


ATTENTION_CASES = {
    "qk-norm-head-shared": dict(qk_norm=_qk("head", "shared")),
    "qk-norm-per-head-layernorm": dict(qk_norm=_qk("head", "per_head", "layernorm")),
    "qk-norm-l2": dict(qk_norm=_qk("head", "none")),
    "qk-norm-all-heads": dict(qk_norm=_qk("all_heads", "shared")),
    "qk-norm-all-heads-layernorm-bias": dict(qk_norm=_qk("all_heads", "shared", "layernorm", True)),
    "sinks": dict(sinks=True),
    "softcap-scale": dict(softcap=0.8, scale=0.3),
    "sliding-window": dict(window=3),
    "chunked": dict(chunk=2),
    "clip": dict(clip=0.9),
    "partial-rotary": dict(rotary_dims=2),
}


def _qk_norm_params(rng, qk: QKNorm, heads, kv, d):
    p = {}
    if qk is None or qk.weight == "none":
        return p
    for name, n in (("q_norm", heads), ("k_norm", kv)):
        shape = (n * d,) if qk.scope == "all_heads" else (n, d) if qk.weight == "per_head" else (d,)
        p[f"{name}/weight"] = 1 + 0.3 * rng.normal(size=shape)
        if qk.bias:
            p[f"{name}/bias"] = 0.3 * rng.normal(size=shape)
    return p


@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
def test_attention_feature_gradients(case):
    """Each attention option: gradients of the input and of every weight (sinks, norm weights)."""
    rng = np.random.default_rng(11)
    h, heads, kv, d = 6, 4, 2, 4
    opts = ATTENTION_CASES[case]
    x = rng.normal(size=(2, 5, h)) * 0.7
    p = _attention_params(rng, h, heads, kv, d, bias=True)
    p.update(_qk_norm_params(rng, opts.get("qk_norm"), heads, kv, d))
    if opts.get("sinks"):
        p["sinks"] = rng.normal(size=heads)
    shape = AttentionShape(heads, kv, d, True, True, **opts)
    R = rng.normal(size=(2, 5, h))
    _, cache = attention_forward(x, p, shape)
    dx, grads = attention_backward(cache, p, shape, R)
    assert sorted(grads) == sorted(k for k in p if k != "out/bias")
    directional_check(lambda: float(np.sum(attention_forward(x, p, shape)[0] * R)), {"x": x, **p},
                      {"x": dx, **grads}, rng)


def test_sliding_window_mask_counts_the_query_itself():
    """Window 3 (HF: q - k < sliding_window): query 4 sees keys 2, 3, 4; chunk 2 splits 0-1, 2-3."""
    masked = attention_mask(5, True, window=3)
    assert np.flatnonzero(~masked[4]).tolist() == [2, 3, 4]
    assert np.flatnonzero(~attention_mask(4, True, chunk=2)[3]).tolist() == [2, 3]


def test_sink_takes_its_share_of_the_softmax():
    """One key with score 0 and a sink logit 0: the key gets probability 1/2, so the output is v/2."""
    p = {"q/weight": np.zeros((1, 1)), "k/weight": np.zeros((1, 1)), "v/weight": np.ones((1, 1)),
         "out/weight": np.ones((1, 1)), "sinks": np.zeros(1)}
    y, _ = attention_forward(np.ones((1, 1, 1)), p, AttentionShape(1, 1, 1, True, False, sinks=True))
    assert y[0, 0, 0] == pytest.approx(0.5)


@pytest.mark.parametrize("q_rank,bias", [(3, True), (None, False)])
def test_mla_gradients(q_rank, bias):
    """MLA with a query latent (DeepSeek-V3) and with a plain q projection (V2-Lite)."""
    rng = np.random.default_rng(12)
    h, H, dn, dr, dv, dc = 6, 2, 3, 2, 4, 5
    p = {"kv_a/weight": rng.normal(size=(h, dc + dr)), "kv_a_norm/weight": 1 + 0.2 * rng.normal(size=dc),
         "kv_b/weight": rng.normal(size=(dc, H * (dn + dv))), "out/weight": rng.normal(size=(H * dv, h))}
    if q_rank is None:
        p["q/weight"] = rng.normal(size=(h, H * (dn + dr)))
    else:
        p.update({"q_a/weight": rng.normal(size=(h, q_rank)), "q_a_norm/weight": 1 + 0.2 * rng.normal(size=q_rank),
                  "q_b/weight": rng.normal(size=(q_rank, H * (dn + dr)))})
    if bias:
        p["kv_a/bias"] = rng.normal(size=dc + dr)
        p["q_a/bias"] = rng.normal(size=q_rank)
    shape = MLAShape(H, dn, dr, dv, dc, q_rank, "rmsnorm", 1e-6, AttentionShape(H, H, dn + dr, True, False, window=3))
    x = rng.normal(size=(2, 5, h))
    R = rng.normal(size=(2, 5, h))
    _, cache = mla_forward(x, p, shape)
    dx, grads = mla_backward(cache, p, shape, R)
    assert sorted(grads) == sorted(p)
    directional_check(lambda: float(np.sum(mla_forward(x, p, shape)[0] * R)), {"x": x, **p}, {"x": dx, **grads}, rng)


ROUTERS = {
    "softmax-no-renorm": Router("softmax", 2, norm_topk_prob=False, scaling=1.5),
    "sigmoid-renorm-bias-groups": Router("sigmoid", 2, True, 3, 2, "top2_sum", np.linspace(-0.2, 0.3, 6), 2.5),
    "sigmoid-plain": Router("sigmoid", 2, norm_topk_prob=False),
    "softmax-groups-max": Router("softmax", 2, False, 2, 1, "max"),
}


@pytest.mark.parametrize("case", sorted(ROUTERS))
def test_router_variant_gradients(case):
    """Gradient of the combine weights of each router kind w.r.t. tokens and router weights."""
    rng = np.random.default_rng(13)
    x = rng.normal(size=(9, 4))
    p = {"router/weight": rng.normal(size=(4, 6)), "router/bias": rng.normal(size=6)}
    router = ROUTERS[case]
    R = rng.normal(size=(9, 2))
    _, _, cache = router_forward(x, p, router)
    dx, grads = router_backward(cache, p, R, router)
    directional_check(lambda: float(np.sum(router_forward(x, p, router)[0] * R)), {"x": x, **p}, {"x": dx, **grads}, rng)


def test_sigmoid_router_picks_on_biased_scores_and_weighs_by_raw_ones():
    """DeepSeek-V3 noaux_tc: logits (0, 0, 1) with bias (0, 2, 0) pick experts 1, 2 (scores
    0.5+2, 0.73) and weigh them sigmoid(0), sigmoid(1) renormalised, times the scaling 2."""
    router = Router("sigmoid", 2, True, score_bias=np.array([0.0, 2.0, 0.0]), scaling=2.0)
    weights, experts, _ = router_forward(np.array([[0.0, 0.0, 1.0]]), {"router/weight": np.eye(3)}, router)
    s0, s1 = 0.5, 1 / (1 + np.exp(-1.0))
    assert experts.tolist() == [[1, 2]]
    np.testing.assert_allclose(weights[0], [2 * s0 / (s0 + s1), 2 * s1 / (s0 + s1)], rtol=1e-12)


def test_group_limited_routing_keeps_the_best_groups():
    """Two groups of two: group (2, 3) holds the best expert, so top-2 of one group is (3, 2)."""
    router = Router("softmax", 2, True, groups=2, group_top_k=1)
    _, experts, _ = router_forward(np.array([[1.0, 0.9, 0.0, 2.0]]), {"router/weight": np.eye(4)}, router)
    assert experts.tolist() == [[3, 2]]


def test_clamped_swiglu_gradients_across_the_clamp():
    """gpt-oss's SwiGLU with gate values above 7 and up values beyond +-7 (clamped, no gradient)."""
    rng = np.random.default_rng(14)
    h, f = 4, 6
    p = {"in/weight": rng.normal(size=(h, f)) * 4, "gate/weight": rng.normal(size=(h, f)) * 4,
         "out/weight": rng.normal(size=(f, h)), "in/bias": rng.normal(size=f), "gate/bias": rng.normal(size=f)}
    x = rng.normal(size=(3, 5, h))
    pre = x @ p["gate/weight"] + p["gate/bias"]
    assert (pre > 7).any() and (np.abs(x @ p["in/weight"] + p["in/bias"]) > 7).any()
    R = rng.normal(size=(3, 5, h))
    _, cache = mlp_forward(x, p, "swiglu_clamp", True)
    dx, grads = mlp_backward(cache, p, "swiglu_clamp", True, R)
    directional_check(lambda: float(np.sum(mlp_forward(x, p, "swiglu_clamp", True)[0] * R)), {"x": x, **p},
                      {"x": dx, **grads}, rng)


def test_clamped_swiglu_value():
    """One unit: gate 1, up 2 -> 1 * sigmoid(1.702) * (2 + 1) (GptOssExperts' formula)."""
    p = {"in/weight": np.array([[2.0]]), "gate/weight": np.array([[1.0]]), "out/weight": np.array([[1.0]])}
    y, _ = mlp_forward(np.ones((1, 1)), p, "swiglu_clamp", True)
    assert y[0, 0] == pytest.approx(3.0 / (1.0 + np.exp(-1.702)))


BASE = dict(layers=2, hidden=8, heads=2, kv_heads=1, ffn_hidden=12, vocab=11, norm_eps=1e-6)
MODELS = {
    "gemma3-like": dict(layer_types=["sliding_attention", "full_attention"], sliding_window=2, qk_norm=True,
                        attention_scale=0.4, norm_placement="sandwich", embedding_scale=8 ** 0.5,
                        activation="gelu_tanh", tied_embeddings=True),
    "gemma2-like": dict(layer_types=["sliding_attention", "full_attention"], sliding_window=3, attn_logit_softcap=1.5,
                        final_logit_softcap=2.0, norm_placement="sandwich", tied_embeddings=True),
    "olmo2-like": dict(qk_norm=True, qk_norm_scope="all_heads", norm_placement="output"),
    "olmo-like": dict(norm="layernorm", norm_affine=False, qkv_clip=0.8),
    "granite-like": dict(attention_scale=0.2, embedding_scale=3.0, residual_scale=0.3, logit_scale=0.25),
    "cohere-like": dict(norm="layernorm", qk_norm=True, qk_norm_weight="per_head", parallel_block=True,
                        logit_scale=0.5, tied_embeddings=True),
    "glm4-like": dict(rotary_fraction=0.5, norm_placement="sandwich", qkv_bias=True),
    "post-norm-decoder": dict(norm="layernorm", norm_bias=True, norm_placement="post", gated_mlp=False,
                              activation="gelu"),
    "gpt-oss-like": dict(layer_types=["sliding_attention", "full_attention"], sliding_window=3, attention_sinks=True,
                         qkv_bias=True, attn_out_bias=True, activation="swiglu_clamp",
                         moe=MoESpec(num_experts=4, top_k=2, expert_ffn_hidden=6, router="topk_softmax",
                                     router_bias=True, expert_bias=True)),
    "qwen2-moe-like": dict(qkv_bias=True, moe=MoESpec(num_experts=4, top_k=2, expert_ffn_hidden=6, shared_experts=1,
                                                      shared_expert_ffn_hidden=10, shared_expert_gate=True,
                                                      norm_topk_prob=False)),
    "deepseek-v3-like": dict(kv_heads=None, mtp_layers=2, mla=MLASpec(kv_lora_rank=4, q_lora_rank=3, qk_nope_head_dim=2,
                                                                        qk_rope_head_dim=2, v_head_dim=3),
                             moe=MoESpec(num_experts=4, top_k=2, expert_ffn_hidden=6, shared_experts=1,
                                         first_dense_layers=1, router="sigmoid", router_score_correction=True,
                                         router_groups=2, router_group_top_k=1, routed_scaling=2.5)),
    "mamba-like": dict(layer_types=["mamba"], mlp=False, heads=1, kv_heads=None, tied_embeddings=True,
                       ssm=SSMSpec(inner=12, state_size=3, dt_rank=2, conv_kernel=3)),
    "jamba-like": dict(layer_types=["mamba", "full_attention"], ssm=SSMSpec(inner=12, state_size=3, dt_rank=2,
                                                                            conv_kernel=3, bc_dt_norm=True),
                       moe=MoESpec(num_experts=4, top_k=2, expert_ffn_hidden=6, layers=[1])),
    "llama4-routed-inputs": dict(moe=MoESpec(num_experts=4, top_k=2, expert_ffn_hidden=6, shared_experts=1,
                                             router="sigmoid", norm_topk_prob=False, weights_on_input=True)),
    "llama4-chunked-nope": dict(layer_types=["chunked_attention", "full_attention"], attention_chunk=2,
                                nope_full_attention=True, qk_norm=True, qk_norm_weight="none"),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_feature_gradients_match_finite_differences(name):
    """Whole-model loss gradients (every parameter tensor) of a small model of each family."""
    spec = TransformerSpec(**{**BASE, **MODELS[name]})
    rng = np.random.default_rng(15)
    params = init_params(spec, rng, std=0.4)
    batch = make_batch(spec, TrainingSpec(global_batch=2, seq_len=5), rng)
    _, grads = loss_and_grads(spec, params, batch)
    assert sorted(grads) == sorted(params)
    directional_check(lambda: loss_and_grads(spec, params, batch)[0], params, grads, rng)


@pytest.mark.parametrize("norms,bias", [(False, False), (True, True)], ids=["mamba", "jamba-norms-biases"])
def test_mamba_mixer_gradients(norms, bias):
    """The selective scan's backward through time, the causal conv, softplus, A = -exp(A_log)."""
    from modelplan.execute.layers.mamba import MambaShape, mamba_backward, mamba_forward

    rng = np.random.default_rng(16)
    h, d, N, r, k = 4, 6, 3, 2, 3
    p = {"in_x/weight": rng.normal(size=(h, d)), "in_z/weight": rng.normal(size=(h, d)),
         "conv/weight": rng.normal(size=(d, k)), "conv/bias": rng.normal(size=d),
         "x_proj/weight": rng.normal(size=(d, r + 2 * N)), "dt_proj/weight": rng.normal(size=(r, d)),
         "dt_proj/bias": rng.normal(size=d), "A_log": rng.normal(size=(d, N)) * 0.3, "D": rng.normal(size=d),
         "out/weight": rng.normal(size=(d, h))}
    if norms:
        p.update({f"{n}_norm/weight": 1 + 0.2 * rng.normal(size=w) for n, w in (("dt", r), ("b", N), ("c", N))})
    if bias:
        p.update({"in_x/bias": rng.normal(size=d), "in_z/bias": rng.normal(size=d)})
    shape = MambaShape(d, N, r, k, norms, 1e-6)
    x = rng.normal(size=(2, 5, h)) * 0.5
    R = rng.normal(size=(2, 5, h))
    _, cache = mamba_forward(x, p, shape)
    dx, grads = mamba_backward(cache, p, shape, R)
    assert sorted(grads) == sorted(p)
    directional_check(lambda: float(np.sum(mamba_forward(x, p, shape)[0] * R)), {"x": x, **p}, {"x": dx, **grads}, rng)


def test_causal_conv_sees_only_the_past():
    """Kernel taps (0.5, 2): out_t = 2 x_t + x_{t-1} / 2, with zeros before the sequence."""
    from modelplan.execute.layers.mamba import causal_conv

    x = np.arange(1.0, 5.0).reshape(1, 4, 1)
    assert causal_conv(x, np.array([[0.5, 2.0]]), None)[0, :, 0].tolist() == [2.0, 4.5, 7.0, 9.5]  # 2 x_t + x_{t-1}/2


def test_nope_blocks_take_only_weight_free_qk_norms():
    """HF Llama 4 puts its q/k norm on the rotary blocks only (use_qk_norm and use_rope); a norm
    with weights there would have parameters on blocks that skip it, so the spec refuses it."""
    fields = dict(name="t", layers=2, hidden=8, heads=2, ffn_hidden=12, vocab=13, layer_types=["chunked_attention",
                  "full_attention"], attention_chunk=2, nope_full_attention=True, qk_norm=True)
    with pytest.raises(ValueError, match="qk_norm_weight .* with nope_full_attention"):
        TransformerSpec(**fields)
    spec = TransformerSpec(**fields, qk_norm_weight="none")
    assert [spec.qk_norm_in(t) for t in ("chunked_attention", "full_attention")] == [True, False]
