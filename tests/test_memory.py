"""Memory (modelplan.count.memory) against Korthikanti et al. 2022, Megatron and ZeRO figures."""

from __future__ import annotations

import pytest

from modelplan.count.memory import (
    activation_bytes_per_layer,
    count_memory,
    embedding_activation_bytes,
    kv_cache_bytes,
    output_activation_bytes,
)
from modelplan.count.params import count_params
from modelplan.specs.load import load_model
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

# Sizes chosen so every fraction of the paper's formulas is an integer: 5as/h = 40, t = 4.
s, b, h, a, t = 512, 4, 1024, 16, 4
SBH = s * b * h


def gpt_layer(**overrides) -> TransformerSpec:
    """The GPT layer Korthikanti et al. derive their table for: LayerNorm, MHA, 4h GeLU MLP, dropout."""
    base = dict(layers=2, hidden=h, heads=a, ffn_hidden=4 * h, vocab=51200, position="learned",
                norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
                gated_mlp=False, activation="gelu", dropout=True)
    return TransformerSpec(**{**base, **overrides})


def act(spec=None, **kw) -> int:
    """Per-layer activation bytes with 16-bit activations for the module's (s, b)."""
    return activation_bytes_per_layer(spec or gpt_layer(), b, s, 2, **kw)


def test_korthikanti_no_parallelism():
    """sbh (34 + 5as/h) (Korthikanti et al. 2022, eq. 1)."""
    assert act() == SBH * (34 + 5 * a * s // h)


def test_korthikanti_tensor_parallel():
    """sbh (10 + 24/t + 5as/(ht)) (eq. 2): 10 sbh of norms, block inputs and masks is replicated."""
    assert act(tp=t) == SBH * 10 + SBH * 24 // t + SBH * 5 * a * s // (h * t)


def test_korthikanti_tensor_and_sequence_parallel():
    """sbh (34 + 5as/h) / t (eq. 4)."""
    assert act(tp=t, sequence_parallel=True) == SBH * (34 + 5 * a * s // h) // t


def test_korthikanti_selective_recompute_with_tp():
    """sbh (10 + 24/t) (Table 2, selective recompute, no sequence parallelism)."""
    assert act(tp=t, recompute="selective") == SBH * 10 + SBH * 24 // t


def test_korthikanti_selective_recompute_with_tp_and_sp():
    """34 sbh / t (Table 2, sequence parallel + selective recompute)."""
    assert act(tp=t, sequence_parallel=True, recompute="selective") == 34 * SBH // t


def test_korthikanti_full_recompute():
    """Full recompute keeps only the 2sbh block input; /t when that input is sequence-sharded."""
    assert act(recompute="full") == 2 * SBH
    assert act(tp=t, sequence_parallel=True, recompute="full") == 2 * SBH // t


def test_dtensor_sequence_parallel_keeps_the_gathered_linear_inputs():
    """PyTorch DTensor SP (torchtitan apply_tp: PrepareModuleInput Shard(1) -> Replicate before
    attention and the MLP): the norm inputs (4 sbh) and dropout masks (2 sbh) stay sequence-sharded,
    the two gathered linear inputs (2 sbh each) are saved whole, as in Korthikanti's eq. 2 without
    SP: sbh (4 + (4 + 2 + 24)/t + 5as/(ht)); selective drops the score term; full keeps 2sbh/t."""
    kw = dict(tp=t, sequence_parallel=True, gathered_inputs=True)
    assert act(**kw) == 4 * SBH + 30 * SBH // t + 5 * a * s * SBH // (h * t)
    assert act(recompute="selective", **kw) == 4 * SBH + 30 * SBH // t
    assert act(recompute="full", **kw) == 2 * SBH // t
    # no sequence parallelism, or tp 1: nothing is gathered, eq. 2 / eq. 1 unchanged
    assert act(tp=t, gathered_inputs=True) == act(tp=t)
    assert act(gathered_inputs=True) == act()


def test_megatron_estimator_generalisation_for_other_ffn():
    """Megatron's estimator for SP + selective: sbh (18 + 4 ffn/h) / t; ffn = 3h gives 30 sbh / t."""
    spec = gpt_layer(ffn_hidden=3 * h)
    assert act(spec, tp=t, sequence_parallel=True, recompute="selective") == SBH * (18 + 4 * 3) // t


def test_no_dropout_removes_masks_and_dropout_output():
    """Without dropout: attention 11sbh - sbh (mask) + 2as^2b (softmax output only), MLP 19 - 1,
    LayerNorms 4: 32 sbh + 2 a s^2 b (Korthikanti's item list with the dropout items removed)."""
    assert act(gpt_layer(dropout=False)) == 32 * SBH + 2 * a * s * s * b


def test_gqa_keeps_k_and_v_at_kv_width():
    """kv_heads a/4: K and V are 2sbh/4 each instead of 2sbh: 34 - 4 + 1 = 31 sbh + 5as^2b."""
    assert act(gpt_layer(kv_heads=a // 4)) == 31 * SBH + 5 * a * s * s * b


def test_gated_mlp_keeps_fc1_output_and_fc2_input():
    """SwiGLU with ffn f = 3h: fc1 output 2f (12sbh in 16-bit) + fc2 input f (6sbh) replace GeLU's
    input and output (16sbh): 34 - 16 + 18 = 36 sbh + 5as^2b."""
    assert act(gpt_layer(gated_mlp=True, ffn_hidden=3 * h)) == 36 * SBH + 5 * a * s * s * b


def test_rmsnorm_without_bias_keeps_the_same_inputs():
    """RMSNorm saves its input like LayerNorm: no change against the paper's 4sbh for two norms."""
    assert act(gpt_layer(norm="rmsnorm", norm_bias=False)) == act()


def test_parallel_block_with_one_norm_shares_its_input():
    """GPT-J style: one norm (2sbh input) whose output feeds attention and MLP (2sbh once):
    34 - 2 (second norm input) - 2 (separate MLP input) = 30 sbh + 5as^2b."""
    assert act(gpt_layer(parallel_block=True)) == 30 * SBH + 5 * a * s * s * b


def test_fp32_activations_double_the_16_bit_terms():
    """dtype_bytes 4 doubles every 2-byte tensor; the two 1-byte dropout masks stay: of the 34 sbh,
    32 are 2-byte tensors -> 2 * 32 + 2 = 66 sbh, and the score term becomes (4 + 1 + 4) a s^2 b."""
    spec = gpt_layer()
    assert activation_bytes_per_layer(spec, b, s, 4) == 66 * SBH + 9 * a * s * s * b


def test_embedding_and_output_layer_terms():
    """Embedding: 8sb token ids + sbh dropout mask; output: 4sbh (1 + V/h) (Megatron's estimator)."""
    spec = gpt_layer()
    V = 51200
    assert embedding_activation_bytes(spec, b, s) == 8 * s * b + SBH
    assert output_activation_bytes(spec, b, s, 2) == 4 * SBH + 4 * s * b * V
    assert output_activation_bytes(spec, b, s, 2, tp=t) == (4 * SBH + 4 * s * b * V) // t


def test_whole_model_activations_add_up():
    """count_memory's activations = embedding + every layer + output layer."""
    spec = gpt_layer()
    mem = count_memory(spec, TrainingSpec(global_batch=b, seq_len=s, attention="eager"), micro_batch=b)
    per_layer = SBH * (34 + 5 * a * s // h)
    assert mem.activations_per_layer == [per_layer, per_layer]
    assert mem.activations == 8 * s * b + SBH + 2 * per_layer + 4 * SBH + 4 * s * b * 51200


def test_megatron_mixed_precision_adam_is_18_bytes_per_param():
    """bf16 weights 2 + fp32 grads 4 + fp32 master 4 + Adam m, v 8 = 18 B/param (Megatron)."""
    spec = load_model("gpt2")
    n = count_params(spec).total
    mem = count_memory(spec, TrainingSpec(seq_len=1024, precision="bf16", optimizer="adam"), 1)
    assert mem.model_states == 18 * n


def test_zero_paper_16_bytes_with_half_precision_grads():
    """ZeRO's (2 + 2 + K) Psi with K = 12: fp16 weights and grads, fp32 master + Adam (Rajbhandari
    et al. 2020, section 3.1)."""
    spec = load_model("gpt2")
    n = count_params(spec).total
    training = TrainingSpec(seq_len=1024, precision="fp16", optimizer="adam", grad_dtype="same")
    assert count_memory(spec, training, 1).model_states == 16 * n


@pytest.mark.parametrize(("optimizer", "per_param"), [("adamw", 16), ("momentum", 12), ("sgd", 8)])
def test_fp32_training_has_no_master_copy(optimizer, per_param):
    """fp32: 4 weight + 4 grad + 4 per optimizer state, no master weights."""
    spec = load_model("gpt2")
    n = count_params(spec).total
    mem = count_memory(spec, TrainingSpec(seq_len=1024, precision="fp32", optimizer=optimizer), 1)
    assert (mem.master_weights, mem.model_states) == (0, per_param * n)


def test_kv_cache_llama_2_7b_is_half_a_megabyte_per_token():
    """Llama-2-7B: 2 (K, V) x 32 layers x 4096 x 2 bytes = 524,288 bytes per token in fp16."""
    assert kv_cache_bytes(load_model("llama-2-7b"), batch=1, seq_len=1, dtype_bytes=2) == 524_288


def test_kv_cache_gqa_llama_3_8b_is_a_quarter_of_that():
    """Llama-3-8B's 8 KV heads of 128: 2 x 32 x 1024 x 2 = 131,072 bytes per token."""
    assert kv_cache_bytes(load_model("llama-3-8b"), batch=3, seq_len=5, dtype_bytes=2) == 15 * 131_072


def test_encoder_has_no_kv_cache():
    """BERT does not decode token by token: no KV cache."""
    assert kv_cache_bytes(load_model("bert-base"), batch=1, seq_len=512, dtype_bytes=2) == 0


def _hf(name: str):
    from _hf_reference import config
    from modelplan.specs.hf import from_hf_config

    return from_hf_config(config(name))


def test_kv_cache_mla_is_the_compressed_latent():
    """DeepSeek-V3 caches d_c + d_h^R = 512 + 64 elements per token and layer (DeepSeek-V2 paper,
    Table 1: (d_c + d_h^R) l), not 2 * 128 heads * 128: 61 * 576 * 2 bytes per token."""
    spec = _hf("deepseek-v3")
    assert kv_cache_bytes(spec, batch=2, seq_len=10, dtype_bytes=2) == 2 * 10 * 61 * 576 * 2
    assert count_memory(spec, TrainingSpec(seq_len=10), 1).kv_cache_per_token == 61 * 576 * 2


def test_kv_cache_sliding_layers_stop_at_their_window():
    """Gemma-3-27B at 32k: 10 global blocks (every 6th of 62) cache 32768 tokens, the 52 sliding
    ones 1024; K and V are 16 kv heads x 128 wide; per further token only the global blocks grow."""
    spec = _hf("gemma-3-27b-it")
    kv = 2 * 16 * 128
    assert kv_cache_bytes(spec, batch=1, seq_len=32768, dtype_bytes=2) == (10 * 32768 + 52 * 1024) * kv * 2
    assert count_memory(spec, TrainingSpec(seq_len=2048), 1).kv_cache_per_token == 10 * kv * 2


def test_kv_cache_below_the_window_is_every_token():
    """Mistral-7B-v0.1 (window 4096): at 2048 tokens every layer caches all of them; at 8192, 4096."""
    spec = load_model("mistral-7b")  # the preset states no window: the HF config's 4096 is below
    hf = _hf("mistral-7b-v0.1")
    assert kv_cache_bytes(hf, 1, 2048, 2) == kv_cache_bytes(spec, 1, 2048, 2)
    assert kv_cache_bytes(hf, 1, 8192, 2) == kv_cache_bytes(spec, 1, 4096, 2)


def test_mamba_cache_is_a_fixed_state():
    """Mamba-2.8B: conv state d_inner x 4 and SSM state d_inner x 16 per block (HF MambaCache),
    whatever the sequence length: 64 * 5120 * 20 * 2 bytes per sequence, nothing per token."""
    spec = _hf("mamba-2.8b-hf")
    assert kv_cache_bytes(spec, 1, 10, 2) == kv_cache_bytes(spec, 1, 1000, 2) == 64 * 5120 * 20 * 2
    assert count_memory(spec, TrainingSpec(seq_len=16), 1).kv_cache_per_token == 0


def test_t5_cache_is_decoder_self_plus_cross_attention():
    """T5-base: 12 decoder blocks cache K/V (12 heads x 64) over the decoder tokens and over the
    encoder tokens (cross-attention); the encoder caches nothing."""
    spec = _hf("t5-base")
    assert kv_cache_bytes(spec, 1, 512, 2, decoder_seq_len=128) == 12 * 2 * 768 * (128 + 512) * 2
