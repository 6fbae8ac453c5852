"""FLOP counts (modelplan.count.flops) against Narayanan et al. 2021, 6ND and PyTorch's counter."""

from __future__ import annotations

import pytest

from modelplan.count.flops import count_flops, head_forward_flops, layer_forward_flops
from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.specs.load import load_model
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


def megatron_gpt(layers=24, hidden=2304, heads=24, vocab=51200) -> TransformerSpec:
    """The Megatron GPT of Narayanan et al. 2021 Table 1 (1.7B row): 4h MLP, tied, learned pos."""
    return TransformerSpec(
        layers=layers, hidden=hidden, heads=heads, ffn_hidden=4 * hidden, vocab=vocab,
        max_positions=2048, position="learned", norm="layernorm", norm_bias=True, qkv_bias=True,
        attn_out_bias=True, mlp_bias=True, gated_mlp=False, activation="gelu", tied_embeddings=True,
    )


def test_forward_matches_narayanan_per_layer_formula():
    """Forward = l (24 B s h^2 + 4 B s^2 h) + 2 B s h V (Narayanan et al. 2021, section 5.1)."""
    B, s, l, h, V = 4, 2048, 24, 2304, 51200
    flops = count_flops(megatron_gpt(), TrainingSpec(global_batch=B, seq_len=s))
    assert flops.forward == l * (24 * B * s * h * h + 4 * B * s * s * h) + 2 * B * s * h * V


def test_model_flops_are_72_formula():
    """Model FLOPs = 72 B s l h^2 (1 + s/6h + V/12lh) = 72Bslh^2 + 12Bs^2lh + 6BshV (no recompute)."""
    B, s, l, h, V = 512, 2048, 24, 2304, 51200
    flops = count_flops(megatron_gpt(), TrainingSpec(global_batch=B, seq_len=s, recompute="full"))
    assert flops.model == 72 * B * s * l * h * h + 12 * B * s * s * l * h + 6 * B * s * h * V


def test_full_recompute_hardware_flops_are_96_formula():
    """Full recompute: 96 B s l h^2 (1 + s/6h + V/16lh) = 96Bslh^2 + 16Bs^2lh + 6BshV (the logit
    layer is not recomputed), the formula behind calibration_runs.json's TFLOP/s."""
    B, s, l, h, V = 512, 2048, 24, 2304, 51200
    flops = count_flops(megatron_gpt(), TrainingSpec(global_batch=B, seq_len=s, recompute="full"))
    assert flops.hardware == 96 * B * s * l * h * h + 16 * B * s * s * l * h + 6 * B * s * h * V


def test_selective_recompute_adds_attention_scores_only():
    """Selective recompute re-runs QK^T and AV: 4 B s^2 h per layer (Korthikanti et al. 2022)."""
    B, s, l, h = 2, 2048, 24, 2304
    flops = count_flops(megatron_gpt(), TrainingSpec(global_batch=B, seq_len=s, recompute="selective"))
    assert flops.hardware - flops.model == l * 4 * B * s * s * h


def test_no_recompute_hardware_equals_model():
    """Without recompute the hardware executes exactly the model FLOPs."""
    flops = count_flops(megatron_gpt(), TrainingSpec(global_batch=2, seq_len=1024))
    assert flops.hardware == flops.model == 3 * flops.forward


def test_model_flops_tend_to_6nd_for_a_large_model():
    """As s/h -> 0, model FLOPs -> 6 N D (Kaplan et al. 2020): GPT-3 175B at s = 8 is within 0.1%,
    and the ratio falls towards 1 as the sequence shrinks (attention is 1 + s/6h)."""
    spec = load_model("gpt3-175b")
    n = count_params(spec).total

    def ratio(seq: int) -> float:
        flops = count_flops(spec, TrainingSpec(global_batch=1, seq_len=seq))
        return flops.model / (6 * n * seq)

    assert abs(ratio(8) - 1) < 1e-3
    assert ratio(2048) > ratio(512) > ratio(8)


def test_gqa_shrinks_qkv_but_not_scores():
    """GQA: the qkv matmul is h (a + 2 kv) d wide, the scores still a*d: 4 t s a d."""
    spec = TransformerSpec(layers=1, hidden=64, heads=8, kv_heads=2, ffn_hidden=128, vocab=100)
    parts = layer_forward_flops(spec, 0, tokens=10, seq_len=5)
    assert parts["attention/qkv"] == 2 * 10 * 64 * (64 + 2 * 16)
    assert parts["attention/score"] == 4 * 10 * 5 * 64


def test_moe_layer_counts_top_k_experts_and_router():
    """MoE forward per token: router 2hE + top_k expert MLPs (SwiGLU 3hf each), dropless."""
    spec = TransformerSpec(layers=1, hidden=16, heads=2, ffn_hidden=32, vocab=10,
                           moe=dict(num_experts=8, top_k=2, expert_ffn_hidden=24))
    parts = layer_forward_flops(spec, 0, tokens=3, seq_len=3)
    assert parts["mlp/router"] == 2 * 3 * 16 * 8
    assert parts["mlp/experts"] == 2 * 3 * 2 * (3 * 16 * 24)


def test_pooler_runs_once_per_sequence():
    """BERT's pooler is a dense h x h on the first token of each sequence: 2 * sequences * h^2."""
    spec = load_model("bert-base")
    parts = head_forward_flops(spec, tokens=4 * 512, seq_len=512)
    assert parts["pooler"] == 2 * 4 * 768 * 768
    assert parts["output"] == 0  # BertModel has no LM head


def test_tied_head_still_computes_logits():
    """Tying shares the matrix, not the matmul: logits cost 2 t h V either way."""
    spec = load_model("gpt2")
    assert head_forward_flops(spec, tokens=7, seq_len=7)["output"] == 2 * 7 * 768 * 50257


def test_breakdown_parents_are_sums():
    """Forward breakdown parents equal the sum of their children; total is the forward."""
    flops = count_flops(load_model("mixtral-8x7b"), TrainingSpec(global_batch=2, seq_len=256))
    b = flops.breakdown
    for key, value in b.items():
        kids = [v for k, v in b.items() if k.startswith(key + "/") and k.count("/") == key.count("/") + 1]
        if kids:
            assert value == sum(kids), key
    assert flops.forward == b["embedding"] + b["layers"] + b["final_norm"] + b["head"]


def test_convention_states_full_square_attention():
    """The result says how causal attention was counted."""
    convention = count_flops(load_model("gpt2"), TrainingSpec(seq_len=16)).convention
    assert "full s x s" in convention


def test_seq_longer_than_learned_positions_is_rejected():
    """GPT-2 has 1024 learned positions: seq_len 2048 is a one-line SpecError naming both."""
    with pytest.raises(SpecError, match=r"seq_len \(2048\) exceeds max_positions \(1024\)"):
        count_flops(load_model("gpt2"), TrainingSpec(seq_len=2048))


@pytest.mark.torch
@pytest.mark.slow
def test_training_flops_match_torch_flop_counter():
    """A GPT-2 (2 layers, h 128) fwd+bwd step under FlopCounterMode equals our model FLOPs (<1%).

    FlopCounterMode counts matmuls only (mm/addmm/bmm), like our convention. The attention-score
    term matches because HF's eager attention computes torch.matmul(q, k^T) and the AV matmul over
    the full s x s square and applies the causal mask by masking, which is the full-square
    convention we count; the backward of every matmul is two matmuls of the same size.
    """
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    batch, seq = 2, 32
    config = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=64)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 1000, (batch, seq))
    counter = FlopCounterMode(display=False)
    with counter:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    measured = counter.get_total_flops()

    spec = TransformerSpec(
        layers=2, hidden=128, heads=4, ffn_hidden=512, vocab=1000, max_positions=64,
        position="learned", norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True,
        mlp_bias=True, gated_mlp=False, activation="gelu_tanh", tied_embeddings=True,
    )
    ours = count_flops(spec, TrainingSpec(global_batch=batch, seq_len=seq)).model
    assert abs(ours - measured) / measured < 0.01, (ours, measured)
