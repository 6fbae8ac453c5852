"""A HuggingFace LlamaForCausalLM with the shape of a TransformerSpec, and which of its parameters
is which executor tensor (name, transposed?): the executor stores weights (in, out), HF (out, in)."""

from __future__ import annotations


def hf_llama(transformers, spec):
    """(float64 LlamaForCausalLM with eager attention and rope_theta 1e4, {HF name: (ours, transpose)})."""
    cfg = transformers.LlamaConfig(vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=spec.ffn_hidden,
                                   num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
                                   num_key_value_heads=spec.kv_heads, rms_norm_eps=spec.norm_eps,
                                   rope_theta=10000.0, max_position_embeddings=64, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(cfg).double()
    pairs = {"model.embed_tokens.weight": ("embedding/word/weight", False), "lm_head.weight": ("head/lm/weight", True),
             "model.norm.weight": ("head/norm/weight", False)}
    for i in range(spec.layers):
        hf, p = f"model.layers.{i}", f"layers/{i}"
        for ours, theirs in (("attention/q", "self_attn.q_proj"), ("attention/k", "self_attn.k_proj"),
                             ("attention/v", "self_attn.v_proj"), ("attention/out", "self_attn.o_proj"),
                             ("mlp/gate", "mlp.gate_proj"), ("mlp/in", "mlp.up_proj"), ("mlp/out", "mlp.down_proj")):
            pairs[f"{hf}.{theirs}.weight"] = (f"{p}/{ours}/weight", True)
        pairs[f"{hf}.input_layernorm.weight"] = (f"{p}/attention/norm/weight", False)
        pairs[f"{hf}.post_attention_layernorm.weight"] = (f"{p}/mlp/norm/weight", False)
    return model, pairs
