"""The single-device reference model: whole-model gradients against finite differences, and
loss and gradients against PyTorch/HuggingFace models loaded with the same weights."""

from __future__ import annotations

import numpy as np
import pytest

from modelplan.execute.optim import OptimizerConfig, optimizer_step
from modelplan.execute.params import init_params, make_batch, param_defs
from modelplan.execute.reference import loss_and_grads
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec
from _hf_llama import hf_llama

GPT2_LIKE = TransformerSpec(
    layers=2, hidden=8, heads=2, ffn_hidden=16, vocab=11, max_positions=5, position="learned",
    norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
    gated_mlp=False, activation="gelu_tanh", tied_embeddings=True,
)
LLAMA_LIKE = TransformerSpec(
    layers=2, hidden=8, heads=4, kv_heads=2, ffn_hidden=12, vocab=11, position="rotary",
    norm="rmsnorm", gated_mlp=True, activation="silu",
)
MOE_LIKE = LLAMA_LIKE.model_copy(update={"moe": MoESpec(
    num_experts=4, top_k=2, expert_ffn_hidden=6, shared_experts=1, router_bias=True, first_dense_layers=1,
), "mlp_bias": True})
PARALLEL_ENCODER = TransformerSpec(
    arch="encoder", layers=2, hidden=8, heads=2, ffn_hidden=16, vocab=11, max_positions=5,
    position="learned", norm="layernorm", norm_bias=True, parallel_block=True, type_vocab=2,
    embedding_norm=True, lm_head_bias=True, gated_mlp=False, activation="gelu",
)


@pytest.mark.parametrize("spec", [GPT2_LIKE, LLAMA_LIKE, MOE_LIKE, PARALLEL_ENCODER],
                         ids=["gpt2", "llama", "moe", "parallel-encoder"])
def test_model_gradients_match_finite_differences(spec):
    """dLoss/dtheta . u equals the central difference of the loss for every parameter tensor."""
    rng = np.random.default_rng(0)
    params = init_params(spec, rng)
    batch = make_batch(spec, TrainingSpec(global_batch=2, seq_len=5), rng)
    _, grads = loss_and_grads(spec, params, batch)
    assert sorted(grads) == sorted(params)
    eps = 1e-6
    for name, w in params.items():
        u = rng.normal(size=w.shape)
        w += eps * u
        plus = loss_and_grads(spec, params, batch)[0]
        w -= 2 * eps * u
        minus = loss_and_grads(spec, params, batch)[0]
        w += eps * u
        assert float(np.sum(grads[name] * u)) == pytest.approx((plus - minus) / (2 * eps), rel=1e-6, abs=1e-9), name


def test_gpt2_small_parameter_table():
    """GPT-2 small has 124,439,808 parameters (HF safetensors metadata; tied, with biases)."""
    spec = TransformerSpec(
        layers=12, hidden=768, heads=12, ffn_hidden=3072, vocab=50257, max_positions=1024,
        position="learned", norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True,
        mlp_bias=True, gated_mlp=False, activation="gelu_tanh", tied_embeddings=True,
    )
    assert sum(d.numel for d in param_defs(spec)) == 124_439_808


def _torch_loss_and_grads(model, torch, tokens, labels):
    ids = torch.tensor(tokens)
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.tensor(labels).reshape(-1))
    loss.backward()
    return float(loss.detach())


@pytest.mark.torch
@pytest.mark.slow
def test_gpt2_like_matches_huggingface_gpt2():
    """Loss and gradients equal transformers' GPT2LMHeadModel with the same weights (float64)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    spec = GPT2_LIKE
    rng = np.random.default_rng(1)
    params = init_params(spec, rng)
    batch = make_batch(spec, TrainingSpec(global_batch=2, seq_len=5), rng)
    loss, grads = loss_and_grads(spec, params, batch)

    cfg = transformers.GPT2Config(vocab_size=spec.vocab, n_positions=spec.max_positions, n_embd=spec.hidden,
                                  n_layer=spec.layers, n_head=spec.heads, n_inner=spec.ffn_hidden,
                                  activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0, layer_norm_epsilon=spec.norm_eps)
    model = transformers.GPT2LMHeadModel(cfg).double()
    t = lambda a: torch.tensor(a)  # noqa: E731
    names = {}  # HF parameter -> (our name(s), transform)
    with torch.no_grad():
        sd = model.state_dict()
        sd["transformer.wte.weight"].copy_(t(params["embedding/word/weight"]))
        sd["transformer.wpe.weight"].copy_(t(params["embedding/position/weight"]))
        for i in range(spec.layers):
            p = f"layers/{i}"
            hf = f"transformer.h.{i}"
            qkv = [f"{p}/attention/{n}" for n in "qkv"]
            sd[f"{hf}.attn.c_attn.weight"].copy_(t(np.concatenate([params[f"{n}/weight"] for n in qkv], 1)))
            sd[f"{hf}.attn.c_attn.bias"].copy_(t(np.concatenate([params[f"{n}/bias"] for n in qkv])))
            names[f"{hf}.attn.c_attn.weight"] = [f"{n}/weight" for n in qkv]
            pairs = {"attn.c_proj": "attention/out", "ln_1": "attention/norm", "ln_2": "mlp/norm",
                     "mlp.c_fc": "mlp/in", "mlp.c_proj": "mlp/out"}
            for hf_name, ours in pairs.items():
                for kind in ("weight", "bias"):
                    sd[f"{hf}.{hf_name}.{kind}"].copy_(t(params[f"{p}/{ours}/{kind}"]))
                    names[f"{hf}.{hf_name}.{kind}"] = [f"{p}/{ours}/{kind}"]
        sd["transformer.ln_f.weight"].copy_(t(params["head/norm/weight"]))
        sd["transformer.ln_f.bias"].copy_(t(params["head/norm/bias"]))
    hf_loss = _torch_loss_and_grads(model, torch, batch.tokens, batch.labels)
    assert loss == pytest.approx(hf_loss, rel=1e-12)
    hp = dict(model.named_parameters())
    np.testing.assert_allclose(grads["embedding/word/weight"], hp["transformer.wte.weight"].grad.numpy(), rtol=1e-9, atol=1e-13)
    for hf_name, ours in names.items():
        expected = np.concatenate([grads[n] for n in ours], axis=-1) if len(ours) > 1 else grads[ours[0]]
        np.testing.assert_allclose(expected, hp[hf_name].grad.numpy(), rtol=1e-9, atol=1e-13, err_msg=hf_name)


@pytest.mark.torch
@pytest.mark.slow
def test_llama_like_matches_huggingface_llama():
    """Loss and gradients equal transformers' LlamaForCausalLM (GQA, RoPE, SwiGLU, RMSNorm), float64."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    spec = LLAMA_LIKE
    rng = np.random.default_rng(2)
    params = init_params(spec, rng)
    batch = make_batch(spec, TrainingSpec(global_batch=2, seq_len=5), rng)
    loss, grads = loss_and_grads(spec, params, batch)

    model, pairs = hf_llama(transformers, spec)
    hp = dict(model.named_parameters())
    assert sorted(hp) == sorted(pairs)
    with torch.no_grad():
        for hf_name, (ours, transpose) in pairs.items():
            w = params[ours].T if transpose else params[ours]
            hp[hf_name].copy_(torch.tensor(np.ascontiguousarray(w)))
    hf_loss = _torch_loss_and_grads(model, torch, batch.tokens, batch.labels)
    # LlamaRMSNorm casts to float32 inside (x.to(torch.float32)), so HF is float32-exact only:
    # differences of ~1e-8 absolute are HF's rounding; a wrong term would be O(1e-1).
    assert loss == pytest.approx(hf_loss, rel=1e-7)
    for hf_name, (ours, transpose) in pairs.items():
        g = grads[ours].T if transpose else grads[ours]
        np.testing.assert_allclose(g, hp[hf_name].grad.numpy(), rtol=1e-5, atol=1e-7, err_msg=hf_name)


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["sgd", "momentum", "adam", "adamw"])
def test_optimizer_step_matches_torch(kind):
    """One step of each optimizer equals torch.optim's with the same hyper-parameters."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w, g = rng.normal(size=10), rng.normal(size=10)
    cfg = OptimizerConfig(kind=kind)
    ours = optimizer_step(cfg, w.copy(), g, cfg.init_state(10), 1)
    tw = torch.tensor(w.copy(), requires_grad=True)
    tw.grad = torch.tensor(g)
    opt = {"sgd": lambda: torch.optim.SGD([tw], lr=cfg.lr),
           "momentum": lambda: torch.optim.SGD([tw], lr=cfg.lr, momentum=cfg.momentum),
           "adam": lambda: torch.optim.Adam([tw], lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay),
           "adamw": lambda: torch.optim.AdamW([tw], lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)}[kind]()
    opt.step()
    np.testing.assert_allclose(ours, tw.detach().numpy(), rtol=1e-14)
