"""FLOPs of every new family against torch.utils.flop_counter.FlopCounterMode on a small instance.

The instance is the family's published config.json with small sizes; transformers runs it on CPU
with eager attention and eager experts, one forward + backward with its own loss. The convention
(count.flops.CONVENTION) and FlopCounterMode agree exactly (to the FLOP) wherever the HF code
computes what the convention counts; where it computes more, the test states the difference as a
formula of its own and checks it to the FLOP:
- sliding layers with seq_len > window: eager attention computes the full s x s square and masks
  it; the convention counts the window (4 t (s - w) a d per layer and pass, x3 for fwd + bwd);
- Llama 4's HF MoE runs every expert on every token (scores are zero for the others), the
  convention counts top_k (dropless);
- Mamba's conv: HF pads the causal conv to s + k - 1 outputs and FlopCounterMode counts a grouped
  conv's backward as a dense one; the matmuls (incl. the scan's y = C h) match exactly and the
  conv forward matches once the padding is written out.
The rotary inv_freq x positions product (no weights, no backward) is left out of the measurement.
"""

from __future__ import annotations

import pytest

from _hf_reference import config, hf_training_flop_counts
from modelplan.count.flops import count_flops
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

pytestmark = [pytest.mark.torch, pytest.mark.slow]

SMALL = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             vocab_size=128, num_hidden_layers=2, pad_token_id=None)
SMALL_NO_HEAD_DIM = {k: v for k, v in SMALL.items() if k != "head_dim"}  # MLA: head dims of its own
MLA = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=12, moe_intermediate_size=32,
           n_routed_experts=8, num_experts_per_tok=2, n_group=1, topk_group=1, num_key_value_heads=4)
T5 = dict(d_model=64, d_ff=96, d_kv=16, num_heads=4, num_layers=2, vocab_size=128)
TINY_SIGLIP = {"hidden_size": 32, "image_size": 28, "intermediate_size": 48, "model_type": "siglip_vision_model",
               "num_attention_heads": 2, "num_hidden_layers": 1, "patch_size": 14, "vision_use_head": False}
TINY_PIXTRAL = {"hidden_size": 32, "image_size": 56, "intermediate_size": 48, "model_type": "pixtral",
                "num_attention_heads": 2, "num_hidden_layers": 1, "patch_size": 14, "head_dim": 16}
BATCH = 2

# (fixture, overrides, seq_len, decoder_seq_len): FlopCounterMode equals our model FLOPs exactly.
EXACT = [
    ("qwen3-8b", SMALL, 12, None),
    ("qwen3-30b-a3b", {**SMALL, "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2}, 12, None),
    ("qwen1.5-moe-a2.7b", {**SMALL, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
                           "num_experts": 8, "num_experts_per_tok": 2}, 12, None),
    ("gemma-2-9b", {**SMALL, "sliding_window": 8, "query_pre_attn_scalar": 16}, 8, None),  # s <= window
    ("gemma-3-27b-it", {"text_config": {**SMALL, "model_type": "gemma3_text", "sliding_window": 16},
                        "vision_config": TINY_SIGLIP, "mm_tokens_per_image": 4}, 12, None),
    ("phi-4", SMALL, 12, None),
    ("phi-3.5-moe-instruct", {**SMALL, "num_local_experts": 4}, 12, None),
    ("deepseek-v3", {**SMALL_NO_HEAD_DIM, **MLA, "num_hidden_layers": 3, "first_k_dense_replace": 1,
                     "q_lora_rank": 24, "num_nextn_predict_layers": 0}, 12, None),
    ("deepseek-v2-lite", {**SMALL_NO_HEAD_DIM, **MLA}, 12, None),
    ("olmo-7b-hf", SMALL, 12, None),
    ("olmo-2-0325-32b", SMALL, 12, None),
    ("olmoe-1b-7b-0924", {**SMALL, "num_experts": 8, "num_experts_per_tok": 2}, 12, None),
    ("starcoder2-15b", {**SMALL, "sliding_window": 16}, 12, None),
    ("gpt-oss-20b", {**SMALL, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 16,
                     "layer_types": ["sliding_attention", "full_attention"]}, 12, None),
    ("granite-3.1-8b-base", SMALL, 12, None),
    ("granite-3.0-3b-a800m-base", {**SMALL, "num_local_experts": 4, "num_experts_per_tok": 2}, 12, None),
    ("c4ai-command-r-plus", {**SMALL, "use_qk_norm": True}, 12, None),
    ("mistral-small-3.1-24b-instruct-2503", {"text_config": {**SMALL, "model_type": "mistral"},
                                             "vision_config": TINY_PIXTRAL}, 12, None),
    ("glm-4-32b-0414", SMALL, 12, None),
    ("t5-base", {**T5, "num_decoder_layers": 2}, 12, 7),  # encoder and decoder lengths differ
    ("flan-t5-xl", {**T5, "num_decoder_layers": 3}, 10, 6),
    ("bert-base-uncased", {**SMALL, "num_key_value_heads": None, "head_dim": None}, 12, None),
    ("bert-base-uncased", {**SMALL, "num_key_value_heads": None, "head_dim": None,
                           "architectures": ["BertForSequenceClassification"]}, 12, None),
]


def ours(data: dict, seq: int, dec: int | None = None) -> int:
    # the measured step is text only (input_ids, no pixel_values): no image through a composite's tower
    return count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=seq, decoder_seq_len=dec,
                                                          images_per_seq=0)).model


def measured(data: dict, seq: int, dec: int | None = None) -> int:
    return sum(hf_training_flop_counts(data, BATCH, seq, dec).values())


@pytest.mark.parametrize(("name", "overrides", "seq", "dec"), EXACT, ids=[f"{c[0]}-{i}" for i, c in enumerate(EXACT)])
def test_training_flops_equal_flop_counter(name, overrides, seq, dec):
    """One fwd + bwd step of the HF module counts exactly our model FLOPs (3 x forward)."""
    data = config(name, **overrides)
    assert ours(data, seq, dec) == measured(data, seq, dec)


@pytest.mark.parametrize(("name", "overrides", "seq", "window", "sliding_layers"), [
    ("gemma-2-9b", {**SMALL, "sliding_window": 5, "query_pre_attn_scalar": 16}, 12, 5, 1),  # block 0 of 2
    ("gemma-3-1b-it", {**SMALL, "num_hidden_layers": 3, "sliding_window": 4, "sliding_window_pattern": 3}, 10, 4, 2),
])
def test_sliding_window_counts_the_band(name, overrides, seq, window, sliding_layers):
    """seq > window: eager attention scores the full square; we count the window, so the
    difference is 3 (fwd + bwd) x 4 t (s - w) a d per sliding layer."""
    data = config(name, **overrides)
    q_width = 4 * 16
    band = 3 * 4 * BATCH * seq * (seq - window) * q_width * sliding_layers
    assert measured(data, seq) - ours(data, seq) == band


def test_llama4_counts_top_k_experts_where_hf_runs_all():
    """Llama 4: HF's MoE multiplies every expert's output by a zero score except the top-1; the
    dropless convention counts top_k, so the difference is (E - k) experts, 3 x 2 t (3 h f) each."""
    data = config("llama-4-scout-17b-16e-text", **SMALL, intermediate_size_mlp=80, num_local_experts=4,
                  attention_chunk_size=16)
    tokens, experts, top_k, moe_layers = BATCH * 12, 4, 1, 2
    skipped = 3 * (experts - top_k) * 2 * tokens * 3 * 64 * 96 * moe_layers
    assert measured(data, 12) - ours(data, 12) == skipped


@pytest.mark.parametrize(("name", "overrides", "mamba_layers"), [
    ("mamba-130m-hf", {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 128, "intermediate_size": 128,
                       "time_step_rank": 4}, 2),
    ("jamba-v0.1", {**SMALL, "num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1,
                    "num_experts": 4, "mamba_dt_rank": 4}, 2),
])
def test_mamba_matmuls_equal_and_conv_is_the_padded_one(name, overrides, mamba_layers):
    """Mamba blocks: every matmul, the scan's y = C h included (HF runs it as a bmm per step),
    equals ours; HF's conv forward runs over s + k - 1 padded outputs: 2 b d (s + k - 1) k."""
    data = config(name, **overrides)
    seq, d, k = 10, 128, 4
    counts = hf_training_flop_counts(data, BATCH, seq)
    conv_ours = 3 * 2 * BATCH * seq * d * k * mamba_layers
    assert counts["aten.mm"] + counts["aten.bmm"] == ours(data, seq) - conv_ours
    assert counts["aten.convolution"] == 2 * BATCH * d * (seq + k - 1) * k * mamba_layers
