"""Each family the executor runs, against transformers' own modules in float64: a small config of
the family goes through modelplan's HF reader (so the reader is checked too), the numpy reference
computes the loss and every gradient, and the transformers model built from the same config and
loaded with the same weights must give the same loss and gradients (relative 1e-9).

Differences the tests set away, each a fact of the executor: rotary base 10000 everywhere (it is
not a spec field; Gemma 3's global theta set to it), non-interleaved rotary (DeepSeek's
rope_interleave false), eager attention, and DeepSeek-V3's e_score_correction_bias buffer at the
executor's fixed value (`execute.shapes.score_correction_bias`).
"""

from __future__ import annotations

import numpy as np
import pytest

from _hf_reference import hf_config, transformers_module
from _hf_weights import (
    Link,
    experts_down,
    float64_everywhere,
    grads_in_our_names,
    interleaved,
    linear,
    load,
    offset_norm,
    same,
    stacked_gate_up,
)
from modelplan.execute.params import init_params, make_batch
from modelplan.execute.reference import loss_and_grads
from modelplan.execute.shapes import score_correction_bias
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

pytestmark = [pytest.mark.torch, pytest.mark.slow]

SMALL = dict(vocab_size=13, hidden_size=8, intermediate_size=12, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, head_dim=4, max_position_embeddings=64, rope_theta=10000.0,
             tie_word_embeddings=False, attention_dropout=0.0, pad_token_id=None)
NO_HEAD_DIM = {"head_dim": None, "num_key_value_heads": 2}  # MLA: its head dims are its own, no GQA
MOE = dict(num_experts_per_tok=2, moe_intermediate_size=6)

FAMILIES = {
    # Qwen3: q/k RMSNorm over head_dim shared by the heads
    "qwen3": dict(model_type="qwen3", rms_norm_eps=1e-6),
    # Gemma 3: sandwich norms (1 + w), q/k norms, query_pre_attn_scalar, 1 global : 1 local, sqrt(h) embeddings
    "gemma3_text": dict(model_type="gemma3_text", sliding_window=3, query_pre_attn_scalar=6,
                        layer_types=["sliding_attention", "full_attention"], rope_local_base_freq=10000.0,
                        tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh"),
    # Gemma 2: attention and final logit soft-caps, sandwich norms, sliding / global
    "gemma2": dict(model_type="gemma2", sliding_window=3, query_pre_attn_scalar=5, attn_logit_softcapping=1.5,
                   final_logit_softcapping=2.0, tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh"),
    # OLMo 2: norms on the sublayer outputs, q/k norms over the whole projection
    "olmo2": dict(model_type="olmo2"),
    # OLMo: non-parametric LayerNorm, q/k/v clipped
    "olmo": dict(model_type="olmo", clip_qkv=0.7),
    # gpt-oss: sinks, sliding / global, biased router and experts, clamped SwiGLU
    "gpt_oss": dict(model_type="gpt_oss", num_local_experts=4, num_experts_per_tok=2, sliding_window=3,
                    layer_types=["sliding_attention", "full_attention"], swiglu_limit=7.0,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    # DeepSeek-V3: MLA, dense first block, sigmoid router with correction bias, groups, scaling
    "deepseek_v3": dict(model_type="deepseek_v3", **MOE, **NO_HEAD_DIM, n_routed_experts=4, n_shared_experts=1,
                        first_k_dense_replace=1, n_group=2, topk_group=1, routed_scaling_factor=2.5,
                        kv_lora_rank=4, q_lora_rank=3, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=3,
                        rope_interleave=False, num_nextn_predict_layers=0, rope_scaling=None),
    # DeepSeek-V2-Lite: MLA without a query latent, softmax router not renormalised (its interleaved
    # complex rotary equals rotate_half on 2 rope dims; wider, it is a permutation of q/kv_a columns)
    "deepseek_v2": dict(model_type="deepseek_v2", **MOE, **NO_HEAD_DIM, n_routed_experts=4, n_shared_experts=1,
                        first_k_dense_replace=1, topk_method="greedy", routed_scaling_factor=1.0,
                        kv_lora_rank=4, q_lora_rank=None, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=3,
                        rope_scaling=None),
    # Qwen2-MoE: shared expert behind a sigmoid gate, top-k not renormalised
    "qwen2_moe": dict(model_type="qwen2_moe", **MOE, num_experts=4, shared_expert_intermediate_size=10,
                      norm_topk_prob=False),
    # Granite: embedding, residual, attention and logit multipliers
    "granite": dict(model_type="granite", embedding_multiplier=3.0, residual_multiplier=0.4,
                    attention_multiplier=0.3, logits_scaling=2.0),
    # Mamba: attention-free blocks of a selective-scan mixer, tied head
    "mamba": dict(model_type="mamba", state_size=3, expand=2, conv_kernel=3, time_step_rank=2, use_bias=False,
                  use_conv_bias=True, tie_word_embeddings=True, layer_norm_epsilon=1e-5),
    # Jamba: Mamba (dt/B/C norms) and attention blocks, MoE every second block
    "jamba": dict(model_type="jamba", mamba_d_state=3, mamba_expand=2, mamba_d_conv=3, mamba_dt_rank=2,
                  attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1,
                  num_experts=4, num_experts_per_tok=2, use_mamba_kernels=False),
    # Llama 4: chunked rotary blocks with a weight-free L2 q/k norm, a global NoPE block without it,
    # top-1 sigmoid router whose weight scales the expert's input, shared expert, dense block of its own width
    "llama4_text": dict(model_type="llama4_text", num_local_experts=4, num_experts_per_tok=1, intermediate_size=6,
                        intermediate_size_mlp=12, attention_chunk_size=3, no_rope_layer_interval=2,
                        interleave_moe_layer_step=2, use_qk_norm=True, rms_norm_eps=1e-5,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    # Starcoder2: LayerNorm with bias, plain GELU MLP with biases, sliding window everywhere
    "starcoder2": dict(model_type="starcoder2", sliding_window=3, use_bias=True, norm_epsilon=1e-5),
}


def _attention_links(i: int, spec, norms: str = "plain", bias: bool = False) -> list:
    hf, p = f"model.layers.{i}.self_attn", f"layers/{i}/attention"
    links = [linear(f"{hf}.{n}_proj.weight", f"{p}/{ours}/weight")
             for n, ours in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "out"))]
    if bias:
        links += [same(f"{hf}.{n}_proj.bias", f"{p}/{ours}/bias") for n, ours in (("q", "q"), ("k", "k"), ("v", "v"))]
    if spec.attn_out_bias:
        links.append(same(f"{hf}.o_proj.bias", f"{p}/out/bias"))
    if spec.qk_norm:
        norm = offset_norm if norms == "offset" else same
        links += [norm(f"{hf}.q_norm.weight", f"{p}/q_norm/weight"), norm(f"{hf}.k_norm.weight", f"{p}/k_norm/weight")]
    if spec.attention_sinks:
        links.append(same(f"{hf}.sinks", f"{p}/sinks"))
    return links


def _mla_links(i: int, spec) -> list:
    hf, p = f"model.layers.{i}.self_attn", f"layers/{i}/attention"
    links = [linear(f"{hf}.kv_a_proj_with_mqa.weight", f"{p}/kv_a/weight"),
             same(f"{hf}.kv_a_layernorm.weight", f"{p}/kv_a_norm/weight"),
             linear(f"{hf}.kv_b_proj.weight", f"{p}/kv_b/weight"), linear(f"{hf}.o_proj.weight", f"{p}/out/weight")]
    if spec.mla.q_lora_rank is None:
        return links + [linear(f"{hf}.q_proj.weight", f"{p}/q/weight")]
    return links + [linear(f"{hf}.q_a_proj.weight", f"{p}/q_a/weight"),
                    same(f"{hf}.q_a_layernorm.weight", f"{p}/q_a_norm/weight"),
                    linear(f"{hf}.q_b_proj.weight", f"{p}/q_b/weight")]


def _dense_mlp_links(hf: str, p: str, spec) -> list:
    if not spec.gated_mlp:
        links = [linear(f"{hf}.c_fc.weight", f"{p}/in/weight"), linear(f"{hf}.c_proj.weight", f"{p}/out/weight")]
        if spec.mlp_bias:
            links += [same(f"{hf}.c_fc.bias", f"{p}/in/bias"), same(f"{hf}.c_proj.bias", f"{p}/out/bias")]
        return links
    return [linear(f"{hf}.gate_proj.weight", f"{p}/gate/weight"), linear(f"{hf}.up_proj.weight", f"{p}/in/weight"),
            linear(f"{hf}.down_proj.weight", f"{p}/out/weight")]


def _moe_links(i: int, spec, family: str) -> list:
    hf, p = f"model.layers.{i}.mlp", f"layers/{i}/mlp"
    if family == "gpt_oss":
        e = f"{hf}.experts"
        return [linear(f"{hf}.router.weight", f"{p}/router/weight"), same(f"{hf}.router.bias", f"{p}/router/bias"),
                interleaved(f"{e}.gate_up_proj", f"{p}/experts/gate/weight", f"{p}/experts/in/weight"),
                interleaved(f"{e}.gate_up_proj_bias", f"{p}/experts/gate/bias", f"{p}/experts/in/bias"),
                same(f"{e}.down_proj", f"{p}/experts/out/weight"), same(f"{e}.down_proj_bias", f"{p}/experts/out/bias")]
    links = [linear(f"{hf}.gate.weight", f"{p}/router/weight"),
             stacked_gate_up(f"{hf}.experts.gate_up_proj", f"{p}/experts/gate/weight", f"{p}/experts/in/weight"),
             experts_down(f"{hf}.experts.down_proj", f"{p}/experts/out/weight")]
    shared = "shared_expert" if family == "qwen2_moe" else "shared_experts"
    links += _dense_mlp_links(f"{hf}.{shared}", f"{p}/shared", spec)
    if spec.moe.shared_expert_gate:
        links.append(linear(f"{hf}.shared_expert_gate.weight", f"{p}/shared_gate/weight"))
    return links


FLOAT32_STEP = {"deepseek_v2": (1e-6, 1e-8)}  # its complex rotary (torch.polar, complex64) rounds to float32
"""(rtol, atol) where transformers keeps a float32 step; else loss 1e-12 and gradients 1e-9 / 1e-12."""

NORM_NAMES = {  # HF block norm -> ours, by placement
    "pre": {"input_layernorm": "attention/norm", "post_attention_layernorm": "mlp/norm"},
    "sandwich": {"input_layernorm": "attention/norm", "post_attention_layernorm": "attention/post_norm",
                 "pre_feedforward_layernorm": "mlp/norm", "post_feedforward_layernorm": "mlp/post_norm"},
    "output": {"post_attention_layernorm": "attention/post_norm", "post_feedforward_layernorm": "mlp/post_norm"},
}


def _mamba_links(hf: str, p: str, spec) -> list:
    """HF MambaMixer tensors: in_proj (2d, h) = [x; z] rows, conv1d (d, 1, k)."""
    links = [Link(f"{hf}.in_proj.weight", (f"{p}/in_x/weight", f"{p}/in_z/weight"),
                  lambda a, b: np.concatenate([a.T, b.T], axis=0),
                  lambda g: [g[: g.shape[0] // 2].T, g[g.shape[0] // 2:].T]),
             Link(f"{hf}.conv1d.weight", (f"{p}/conv/weight",), lambda a: a[:, None, :], lambda g: [g[:, 0, :]]),
             same(f"{hf}.conv1d.bias", f"{p}/conv/bias"), linear(f"{hf}.x_proj.weight", f"{p}/x_proj/weight"),
             linear(f"{hf}.dt_proj.weight", f"{p}/dt_proj/weight"), same(f"{hf}.dt_proj.bias", f"{p}/dt_proj/bias"),
             same(f"{hf}.A_log", f"{p}/A_log"), same(f"{hf}.D", f"{p}/D"), linear(f"{hf}.out_proj.weight", f"{p}/out/weight")]
    if spec.ssm.bc_dt_norm:
        links += [same(f"{hf}.{n}_layernorm.weight", f"{p}/{n}_norm/weight") for n in ("dt", "b", "c")]
    return links


def _ssm_links(spec, family: str) -> list:
    """MambaForCausalLM / JambaForCausalLM."""
    if family == "mamba":
        links = [same("backbone.embeddings.weight", "embedding/word/weight"),
                 same("backbone.norm_f.weight", "head/norm/weight")]
        for i in range(spec.layers):
            links += [same(f"backbone.layers.{i}.norm.weight", f"layers/{i}/mamba/norm/weight")]
            links += _mamba_links(f"backbone.layers.{i}.mixer", f"layers/{i}/mamba", spec)
        return links
    links = [same("model.embed_tokens.weight", "embedding/word/weight"), linear("lm_head.weight", "head/lm/weight"),
             same("model.final_layernorm.weight", "head/norm/weight")]
    for i in range(spec.layers):
        hf, p = f"model.layers.{i}", f"layers/{i}"
        mixer = "mamba" if spec.layer_type(i) == "mamba" else "attention"
        links += [same(f"{hf}.input_layernorm.weight", f"{p}/{mixer}/norm/weight"),
                  same(f"{hf}.pre_ff_layernorm.weight", f"{p}/mlp/norm/weight")]
        links += _mamba_links(f"{hf}.mamba", f"{p}/mamba", spec) if mixer == "mamba" else _attention_links(i, spec)
        if spec.is_moe_layer(i):
            links += [linear(f"{hf}.feed_forward.router.weight", f"{p}/mlp/router/weight"),
                      stacked_gate_up(f"{hf}.feed_forward.experts.gate_up_proj", f"{p}/mlp/experts/gate/weight",
                                      f"{p}/mlp/experts/in/weight"),
                      experts_down(f"{hf}.feed_forward.experts.down_proj", f"{p}/mlp/experts/out/weight")]
        else:
            links += _dense_mlp_links(f"{hf}.feed_forward", f"{p}/mlp", spec)
    return links


def _pairs_to_halves(hf: str, ours: str, head_dim: int) -> Link:
    """Llama 4's q/k projection: its rotary pairs channels (2j, 2j + 1) of a head (complex form),
    ours (j, j + d/2), so each head's output columns are permuted (scores and L2 norms unchanged)."""
    order = np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])  # HF channel at our j

    def perm(width: int) -> np.ndarray:
        return (np.arange(width).reshape(-1, head_dim)[:, np.argsort(order)]).reshape(-1)

    return Link(hf, (ours,), lambda a: a[:, perm(a.shape[1])].T, lambda g: [g.T[:, np.argsort(perm(g.shape[0]))]])


def _llama4_links(spec) -> list:
    """Llama4ForCausalLM: feed_forward is Llama4TextMoe (router, experts gate_up (E, h, 2f) gate
    first and down (E, f, h), shared_expert) or a dense MLP."""
    links = [same("model.embed_tokens.weight", "embedding/word/weight"), linear("lm_head.weight", "head/lm/weight"),
             same("model.norm.weight", "head/norm/weight")]
    for i in range(spec.layers):
        hf, p = f"model.layers.{i}", f"layers/{i}"
        links += [_pairs_to_halves(f"{hf}.self_attn.{n}_proj.weight", f"{p}/attention/{n}/weight", spec.dim_head)
                  for n in "qk"]
        links += [linear(f"{hf}.self_attn.v_proj.weight", f"{p}/attention/v/weight"),
                  linear(f"{hf}.self_attn.o_proj.weight", f"{p}/attention/out/weight"),
                  same(f"{hf}.input_layernorm.weight", f"{p}/attention/norm/weight"),
                  same(f"{hf}.post_attention_layernorm.weight", f"{p}/mlp/norm/weight")]
        ff, m = f"{hf}.feed_forward", f"{p}/mlp"
        if not spec.is_moe_layer(i):
            links += _dense_mlp_links(ff, m, spec)
            continue
        links += [linear(f"{ff}.router.weight", f"{m}/router/weight"), same(f"{ff}.experts.down_proj", f"{m}/experts/out/weight"),
                  Link(f"{ff}.experts.gate_up_proj", (f"{m}/experts/gate/weight", f"{m}/experts/in/weight"),
                       lambda g, u: np.concatenate([g, u], axis=-1),
                       lambda t: [t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]])]
        links += _dense_mlp_links(f"{ff}.shared_expert", f"{m}/shared", spec)
    return links


def links_of(spec, family: str) -> list:
    """Every HF parameter of the family's CausalLM in terms of ours."""
    if family in ("mamba", "jamba"):
        return _ssm_links(spec, family)
    if family == "llama4_text":
        return _llama4_links(spec)
    gemma = family.startswith("gemma")
    norm = offset_norm if gemma else same
    links = [same("model.embed_tokens.weight", "embedding/word/weight")]
    if not spec.tied_embeddings:
        links.append(linear("lm_head.weight", "head/lm/weight"))
    if spec.norm_affine:
        links.append(norm("model.norm.weight", "head/norm/weight"))
        if spec.norm_bias:
            links.append(same("model.norm.bias", "head/norm/bias"))
    for i in range(spec.layers):
        if spec.mla is not None:
            links += _mla_links(i, spec)
        else:
            links += _attention_links(i, spec, "offset" if gemma else "plain", spec.qkv_bias)
        if spec.is_moe_layer(i):
            links += _moe_links(i, spec, family)
        else:
            links += _dense_mlp_links(f"model.layers.{i}.mlp", f"layers/{i}/mlp", spec)
        if spec.norm_affine:
            for hf_name, ours in NORM_NAMES[spec.placement].items():
                links.append(norm(f"model.layers.{i}.{hf_name}.weight", f"layers/{i}/{ours}/weight"))
                if spec.norm_bias:
                    links.append(same(f"model.layers.{i}.{hf_name}.bias", f"layers/{i}/{ours}/bias"))
    return links


def _hf_causal_lm(data: dict):
    import torch

    transformers = transformers_module()
    cfg = hf_config(data)
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"  # the per-expert loop (grouped_mm takes no float64)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).double()
    with torch.no_grad():  # rotary frequencies in float64 (transformers computes them in float32)
        for name, buf in model.named_buffers():
            if name.endswith("inv_freq"):
                dim = 2 * buf.numel()
                buf.copy_(1.0 / 10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
            if name.endswith("embed_scale"):  # Gemma's sqrt(hidden), stored in float32
                buf.copy_(torch.tensor(cfg.hidden_size ** 0.5, dtype=torch.float64))
    return model


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_matches_transformers_in_float64(family):
    """Loss and every gradient equal the transformers model of the same config and weights."""
    import torch

    data = {k: v for k, v in {**SMALL, **FAMILIES[family]}.items() if v is not None or k != "head_dim"}
    spec = from_hf_config(data, f"{family}.json")
    rng = np.random.default_rng(21)
    params = init_params(spec, rng, std=0.4)
    batch = make_batch(spec, TrainingSpec(global_batch=2, seq_len=6), rng)
    loss, grads = loss_and_grads(spec, params, batch)

    model = _hf_causal_lm(data)
    links = links_of(spec, family)
    load(model, params, links)
    if spec.moe is not None and spec.moe.router_score_correction:
        with torch.no_grad():
            for i in range(spec.layers):
                if spec.is_moe_layer(i):
                    bias = score_correction_bias(spec.moe.num_experts)
                    model.model.layers[i].mlp.gate.e_score_correction_bias.copy_(torch.tensor(bias))
    with float64_everywhere():
        logits = model(input_ids=torch.tensor(batch.tokens)).logits
        hf_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                    torch.tensor(batch.labels).reshape(-1))
        hf_loss.backward()
    assert loss == pytest.approx(float(hf_loss.detach()), rel=FLOAT32_STEP.get(family, (1e-12,))[0])
    hf_grads = grads_in_our_names(model, links)
    assert sorted(hf_grads) == sorted(grads)
    for name, g in hf_grads.items():
        rtol, atol = FLOAT32_STEP.get(family, (1e-9, 1e-12))
        np.testing.assert_allclose(grads[name], g, rtol=rtol, atol=atol, err_msg=name)
