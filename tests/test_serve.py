"""Serving memory (modelplan.count.serve) and capacity / roofline speed (modelplan.cost.serve):
KV cache bytes against formulas worked by hand, paged blocks, sequences that fit, `modelplan serve`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli.app import app
from modelplan.comm.clusters import load_cluster
from modelplan.cost.serve import serve_estimate
from modelplan.count.params import count_params
from modelplan.count.serve import count_serve_memory
from modelplan.errors import SpecError
from modelplan.specs.load import load_model
from modelplan.specs.serve import ServeSpec
from modelplan.specs.transformer import TransformerSpec

H100 = load_cluster("dgx-h100")


def test_kv_per_token_gqa_by_hand():
    """Llama-3-70B (80 layers, 8 KV heads of 128, bf16): 2 x 80 x 8 x 128 x 2 = 327,680 B per token."""
    mem = count_serve_memory(load_model("llama-3-70b"), ServeSpec(context=32768, tp=8))
    assert mem.kv_per_token_bytes == 2 * 80 * 8 * 128 * 2 == 327_680
    assert mem.kv_per_token_per_gpu_bytes == 327_680 // 8  # one KV head per TP rank


def test_kv_per_token_mha_by_hand():
    """GPT-2 small (MHA: 12 layers x 12 heads of 64), bf16: 2 x 12 x 12 x 64 x 2 = 36,864 B per token."""
    assert count_serve_memory(load_model("gpt2"), ServeSpec(context=1024)).kv_per_token_bytes == 36_864


def test_kv_fp8_halves_the_cache():
    """Mistral-7B (32 layers, 8 KV heads of 128) with an fp8 cache: 2 x 32 x 8 x 128 x 1 = 65,536 B per token."""
    mem = count_serve_memory(load_model("mistral-7b"), ServeSpec(context=4096, kv_cache="fp8"))
    assert mem.kv_per_token_bytes == 65_536


def test_kv_heads_replicate_when_tp_exceeds_them():
    """2 KV heads on tp 8: each rank keeps one head (vLLM replicates), half the model's cache per token."""
    spec = TransformerSpec(layers=4, hidden=1024, heads=8, kv_heads=2, ffn_hidden=4096, vocab=1000)
    mem = count_serve_memory(spec, ServeSpec(context=100, tp=8))
    assert mem.kv_per_token_per_gpu_bytes == 2 * 4 * 1 * 128 * 2
    with pytest.raises(SpecError, match="tp"):
        count_serve_memory(spec, ServeSpec(context=100, tp=3))


def test_paged_blocks_round_up():
    """Context 1000 in blocks of 16: 63 blocks (1008 tokens); the 8 unused slots are the paging overhead."""
    mem = count_serve_memory(load_model("gpt2"), ServeSpec(context=1000))
    assert mem.blocks_per_sequence == 63
    assert mem.kv_per_sequence_per_gpu_bytes == 1008 * 36_864
    assert mem.paging_overhead_per_sequence_per_gpu_bytes == 8 * 36_864


def test_weights_at_serving_precision():
    """bf16 is 2 B per parameter; fp8 and int4 shrink the block linears only (embeddings stay 16-bit)."""
    spec = load_model("llama-3-8b")
    bf16 = count_serve_memory(spec, ServeSpec(context=8)).weights_bytes
    fp8 = count_serve_memory(spec, ServeSpec(context=8, weights="fp8")).weights_bytes
    int4 = count_serve_memory(spec, ServeSpec(context=8, weights="int4")).weights_bytes
    assert bf16 == 2 * 8_030_261_248
    embeddings = 2 * 128_256 * 4096  # token embedding + untied lm_head
    norms = 4096 * (2 * 32 + 1)  # two RMSNorms per block and the final one
    linears = 8_030_261_248 - embeddings - norms
    assert fp8 == linears + 32 * 7 * 4 + 2 * (embeddings + norms)  # 1 B + one fp32 scale per tensor; rest 2 B
    assert int4 < fp8 < bf16


def test_sequences_that_fit_by_hand():
    """GPT-2 on one H100 at 0.9: KV budget = 72 GB - weights - workspace - 1 GB reserve, in 16-token blocks."""
    spec = load_model("gpt2")
    est = serve_estimate(spec, ServeSpec(context=1024), H100, gpus=1)
    weights = 2 * 124_439_808
    workspace = 8192 * 2 * (2 * 768 + (768 + 2 * 768 + 2 * 3072)) + 256 * 50257 * 4  # acts + fp32 logits
    budget = 80e9 * 0.9 - weights - workspace - 1e9
    blocks = int(budget // (16 * 36_864))
    assert est.kv_blocks_per_gpu == blocks
    assert est.max_sequences_per_replica == blocks // 64


def test_decode_is_memory_bound_roofline_by_hand():
    """Llama-3-8B, tp 1, batch 8 at 4096 tokens: bytes = weights + 8 x 4096 x 131,072 B of KV, at 3.35 TB/s x 0.85."""
    spec = load_model("llama-3-8b")
    est = serve_estimate(spec, ServeSpec(context=4096), H100, gpus=1, batch=8)
    read = 2 * 8_030_261_248 + 8 * 4096 * 131_072
    assert est.decode.bound == "memory"
    assert est.decode.memory_s == pytest.approx(read / (3.35e12 * 0.85))
    assert est.decode_tokens_per_s == pytest.approx(8 / est.decode.step_s)


def test_prefill_is_compute_bound():
    """A 32K prompt on Llama-3-8B is compute-bound: FLOPs ~ 2 x params x tokens plus causal attention."""
    spec = load_model("llama-3-8b")
    est = serve_estimate(spec, ServeSpec(context=32768), H100, gpus=1, batch=1)
    assert est.prefill.bound == "compute"
    linear = 8_030_261_248 - 2 * 128_256 * 4096 - 4096 * 65  # block linears (no embeddings, norms; lm_head once)
    attention = 2 * 4096 * 32768 * 32769 * 32  # 2 q_width c (c + 1) per layer
    flops = 2 * 32768 * linear + 2 * 128_256 * 4096 + attention
    assert est.prefill.compute_per_gpu_flops == pytest.approx(flops)


def test_moe_decode_reads_only_routed_experts():
    """Mixtral, batch 1: a token routes to 2 of 8 experts, so a step reads 2/8 of the expert weights."""
    spec = load_model("mixtral-8x7b")
    one = serve_estimate(spec, ServeSpec(context=1024, tp=8), H100, gpus=8, batch=1)
    params = count_params(spec)
    experts = 32 * 8 * 3 * 4096 * 14336
    assert one.decode.read_per_gpu_bytes == pytest.approx(
        (2 * (params.total - experts) + 2 * experts * 2 / 8) / 8 + 1024 * one.memory.kv_per_token_per_gpu_bytes)


def test_batch_that_does_not_fit_is_flagged():
    """Asking for more sequences than the cache holds marks the estimate as not fitting."""
    est = serve_estimate(load_model("llama-3-70b"), ServeSpec(context=32768, tp=8), H100, gpus=8, batch=1000)
    assert not est.fits


UNITS = ("_bytes", "_s", "_flops", "_tokens", "_fraction")
COUNTS = {"gpus", "tp", "replicas", "tokens", "kv_blocks_per_gpu", "blocks_per_sequence", "max_sequences_per_replica",
          "max_sequences", "batch_per_replica", "decode_tokens_per_s", "prefill_tokens_per_s", "max_num_seqs",
          "schema_version"}


def _numbers(doc, prefix=""):
    for key, value in doc.items():
        if isinstance(value, dict):
            yield from _numbers(value, f"{prefix}{key}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield prefix + key, key


def test_cli_serve_json_units():
    """`serve --json`: every number's key names its unit (or it is a count), and the KV figure is there."""
    result = CliRunner().invoke(app, ["serve", "llama-3-70b", "--gpus", "8", "--context", "32768", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["memory"]["kv_per_token_bytes"] == 327_680
    for path, key in _numbers(doc):
        assert key in COUNTS or key.endswith(UNITS), path


def test_cli_serve_encoder_is_an_error():
    """An encoder keeps no KV cache: one-line error, exit 2."""
    result = CliRunner().invoke(app, ["serve", "bert-base", "--context", "512"])
    assert result.exit_code == 2 and "encoder" in result.output


def test_kv_mla_latent_by_hand_and_replicated_over_tp():
    """DeepSeek-V3 (61 layers; MLA caches the latent d_c = kv_lora_rank 512 plus the shared rope key
    d_h^R = 64 per token, DeepSeek-V2 sec. 2.1.2; config.json of deepseek-ai/DeepSeek-V3), bf16:
    61 x (512 + 64) x 2 = 70,272 B per token. The latent is not split by heads: with tp 8 each GPU
    still holds all of it (vLLM's MLA backends), not 1/8."""
    mem = count_serve_memory(load_model("deepseek-v3"), ServeSpec(context=4096, tp=8))
    assert mem.kv_per_token_bytes == 61 * (512 + 64) * 2 == 70_272
    assert mem.kv_per_token_per_gpu_bytes == 70_272
    assert mem.kv_per_sequence_per_gpu_bytes == 4096 * 70_272  # 256 full blocks of 16


def test_kv_sliding_window_alternating_by_hand():
    """Gemma-2-27B (46 layers alternating sliding 4096 / global, 16 KV heads of 128; HF config):
    one layer-token is 2 x 16 x 128 x 2 = 8,192 B; at 8,192 tokens the 23 sliding layers keep 4,096
    tokens and the 23 global ones 8,192: 8,192 x 23 x (4,096 + 8,192) = 2,315,255,808 B."""
    mem = count_serve_memory(load_model("gemma-2-27b"), ServeSpec(context=8192))
    assert mem.kv_per_sequence_per_gpu_bytes == 8192 * 23 * (4096 + 8192) == 2_315_255_808


def test_kv_sliding_window_five_to_one_by_hand():
    """Gemma-3-27B (62 layers, 5 sliding (window 1024) then 1 global, repeating: 10 global and 52
    sliding layers; 16 KV heads of 128; HF config), bf16, 32,768 tokens:
    8,192 x (10 x 32,768 + 52 x 1,024) = 3,120,562,176 B; tp 2 halves it (8 heads per rank)."""
    mem = count_serve_memory(load_model("gemma-3-27b"), ServeSpec(context=32768))
    assert mem.kv_per_sequence_per_gpu_bytes == 8192 * (10 * 32768 + 52 * 1024) == 3_120_562_176
    half = count_serve_memory(load_model("gemma-3-27b"), ServeSpec(context=32768, tp=2))
    assert half.kv_per_sequence_per_gpu_bytes == 3_120_562_176 // 2


def test_default_tp_fits_the_heads(tmp_path):
    """12 attention / 12 KV heads on 8 GPUs: tp 8 does not divide 12 (vLLM: total_num_heads % tp_size
    == 0), so the default is the largest divisor of the 8 GPUs that does, 4 (2 replicas), worked by
    hand; an explicit --tp 8 is still refused in one line."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 768, "intermediate_size": 2048,
                                "num_hidden_layers": 2, "num_attention_heads": 12, "num_key_value_heads": 12,
                                "vocab_size": 1000, "max_position_embeddings": 4096}))
    result = CliRunner().invoke(app, ["serve", str(path), "--context", "2048", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["serve"]["tp"] == 4 and doc["replicas"] == 2
    bad = CliRunner().invoke(app, ["serve", str(path), "--context", "2048", "--tp", "8"])
    assert bad.exit_code != 0 and "tp (8) must divide kv_heads (12)" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_cli_serve_mla_formula_is_its_own():
    """DeepSeek-V3's table line spells MLA's cache, not 2 L h_kv d: 61 layers x (kv_lora_rank 512 +
    qk_rope_head_dim 64) x 2 B = 70,272 B (DeepSeek-V2 paper sec. 2.1), and the product printed
    is the figure printed (was '2 x 61 layers x 128 KV heads x 56 x 2 B', which is 1,748,992)."""
    result = CliRunner().invoke(app, ["serve", "deepseek-v3", "--gpus", "8", "--context", "8192"])
    assert result.exit_code == 0, result.output
    assert "70,272 B = 61 layers x (latent 512 + rotary key 64) x 2 B (MLA)" in result.output
    assert 61 * (512 + 64) * 2 == 70_272


def test_cli_serve_says_why_nothing_fits():
    """DeepSeek-V3 in bf16 on tp 8: 682.6e9 parameters (MTP included) x 2 B = 1.37 TB, /
    8 = 171 GB per GPU, over the 72 GB an 80 GB H100 gives at utilization 0.9, so no sequence fits;
    the line says what blocks it instead of 'the requested 0 sequences do not fit'."""
    result = CliRunner().invoke(app, ["serve", "deepseek-v3", "--gpus", "16", "--context", "8192"])
    assert result.exit_code == 0, result.output
    assert "not one sequence fits" in result.output and "--weights fp8" in result.output
    assert "the requested 0 sequences" not in result.output
