"""HF config mapper of the Gemma 3n language model (gemma3n_text; transformers 5.24
Gemma3nForCausalLM): Gemma 3 blocks (sandwich norms, q/k RMSNorms over head_dim and a weight-free
v norm, four sliding blocks per global one, GeGLU, embeddings scaled by sqrt(h), tied head,
final soft-cap 30) with attention scaling 1, AltUp over altup_num_inputs copies of the stream,
per-layer inputs, LAuReL, and the last num_kv_shared_layers blocks reusing earlier K/V
(`specs/side_paths.py`). The gemma3n composite (MobileNetV5 vision tower, Conformer audio
encoder) is refused in hf.py with a hint to count its text_config."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import layer_types, llama


def _ffn_hidden(c: HFConfig) -> int:
    """intermediate_size: one width, or one per block (all equal: the spec has one MLP width)."""
    value = c.data.get("intermediate_size")
    if not isinstance(value, list):
        return c.integer("intermediate_size", 16384)
    if not value or any(not isinstance(w, int) or isinstance(w, bool) or w <= 0 for w in value):
        raise SpecError(f"{c.source}: {c.path}intermediate_size: expected positive integers, got {value!r}")
    if len(value) != c.size("num_hidden_layers"):
        raise SpecError(f"{c.source}: {c.path}intermediate_size: {len(value)} entries for num_hidden_layers "
                        f"{c.size('num_hidden_layers')}")
    if len(set(value)) > 1:
        raise SpecError(f"{c.source}: {c.path}intermediate_size: per-block widths {sorted(set(value))} are not "
                        f"modelled (one MLP width for every block is)")
    return value[0]


def _gemma3n_text(c: HFConfig) -> dict:
    """Gemma3nTextConfig defaults (google/gemma-3n-E4B)."""
    layers, hidden = c.size("num_hidden_layers"), c.size("hidden_size")
    default = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(layers)]
    shared = c.integer("num_kv_shared_layers", 15)
    if not 0 <= shared < layers:
        raise SpecError(f"{c.source}: {c.path}num_kv_shared_layers: {shared} must be in 0..{layers - 1}")
    types = c.texts("layer_types", None) or default
    if shared and set(types[:layers - shared]) != set(types):  # Gemma3nTextConfig.kv_sharing_modes' check
        raise SpecError(f"{c.source}: {c.path}num_kv_shared_layers: the first {layers - shared} blocks must hold "
                        f"every layer type ({sorted(set(types))}) for the {shared} sharing blocks to reuse")
    inputs = c.integer("altup_num_inputs", 4)
    if inputs < 2:
        raise SpecError(f"{c.source}: {c.path}altup_num_inputs: must be >= 2, got {inputs}")
    c = HFConfig({**c.data, "intermediate_size": _ffn_hidden(c)}, c.source, c.path, c.defaults)
    return llama(
        c, kv_heads=c.integer("num_key_value_heads", 2),
        head_dim=c.integer("head_dim", 256), vocab=c.integer("vocab_size", 262400),
        max_positions=c.integer("max_position_embeddings", 32768),
        activation=c.activation("gelu_pytorch_tanh", "hidden_activation", "hidden_act"),
        tied_embeddings=c.flag("tie_word_embeddings", True), embedding_scale=hidden ** 0.5,
        qk_norm=True, norm_placement="sandwich", attention_scale=1.0,  # Gemma3nTextAttention.scaling
        final_logit_softcap=c.number("final_logit_softcapping", 30.0, nullable=True),
        sliding_window=c.integer("sliding_window", 512, nullable=True), layer_types=layer_types(c, layers, default),
        altup=dict(inputs=inputs), laurel_rank=c.integer("laurel_rank", 64), kv_shared_layers=shared,
        per_layer_input=dict(width=c.integer("hidden_size_per_layer_input", 256),
                             vocab=c.integer("vocab_size_per_layer_input", 262144)),
    )


GEMMA3N_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"gemma3n_text": _gemma3n_text}
