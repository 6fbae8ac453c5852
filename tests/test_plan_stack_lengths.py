"""An encoder-decoder planned on two lengths (modelplan/plan/stack_lengths.py): the encoder blocks
on --seq, the decoder blocks, their cross-attention and the head on --decoder-seq.

Independent sources: the step's FLOPs of a tiny T5 worked by hand from its per-stack token counts
(Kaplan et al. 2020's C = 6 N D per stack: 2 FLOPs per multiply-add forward, twice that backward;
T5 v1.0 blocks, Raffel et al. 2020 sec. 3.1: q, k, v, o and a ReLU MLP wi, wo without biases) plus
the attention products Q K^T and A V by hand (2 x 2 x tokens x keys x heads*d_kv forward; Vaswani
et al. 2017 sec. 3.2.3: the decoder's cross-attention queries its own tokens against the encoder
output's keys and values); Megatron-LM core_v0.16.1 arguments.py for the export's flag."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import load_cluster
from modelplan.count.flops import count_flops
from modelplan.plan.commlist import communication_list
from modelplan.plan.compute import Roofline
from modelplan.plan.estimate import evaluate_plan
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.validate import plan_problems
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

runner = CliRunner()

H, HEADS, D_KV, FF, VOCAB, ENC, DEC = 64, 4, 16, 128, 1024, 2, 3
T5 = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": H, "d_kv": D_KV,
      "num_heads": HEADS, "d_ff": FF, "num_layers": ENC, "num_decoder_layers": DEC, "vocab_size": VOCAB,
      "feed_forward_proj": "relu", "tie_word_embeddings": True, "dropout_rate": 0.0}
"""A T5 v1.0 of 2 encoder and 3 decoder blocks; vocab 1024 is a multiple of Megatron's padding (128),
so the planner's head is the counted one."""

BART = {"model_type": "bart", "d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 24, "decoder_ffn_dim": 24, "vocab_size": 100,
        "max_position_embeddings": 64}
"""A BART whose learned position tables hold 64 positions per stack."""

UNIT_RATE = Roofline(matmul_flops_per_s=1.0, hbm_bytes_per_s=float("inf"), overhead_s=0.0, peak_flops_per_s=1.0,
                     flash_fwd_flops_per_s=1.0, flash_bwd_flops_per_s=1.0)
"""One FLOP per second, free memory traffic and launches: a plan's compute seconds are its FLOPs."""


def hand_step_flops(batch: int, s: int, t: int) -> int:
    """Model FLOPs of one step of `T5` on `batch` sequences of s source and t target tokens."""
    inner = HEADS * D_KV  # 64
    attention = 4 * H * inner  # q, k, v, o
    mlp = 2 * H * FF  # wi, wo
    enc_tokens, dec_tokens = batch * s, batch * t
    forward = (2 * enc_tokens * (attention + mlp) * ENC  # encoder weights on the source tokens
               + 2 * dec_tokens * (attention + 2 * H * inner + mlp) * DEC  # self-attn, cross q / o, MLP on the target
               + 2 * enc_tokens * (2 * H * inner) * DEC  # cross k / v of the encoder output, per decoder block
               + 2 * dec_tokens * H * VOCAB  # the (tied) head on the target tokens
               + 4 * batch * s * s * inner * ENC  # encoder Q K^T and A V: s keys per source token
               + 4 * batch * t * t * inner * DEC  # decoder self-attention: t keys per target token
               + 4 * batch * t * s * inner * DEC)  # cross-attention: s encoder keys per target token
    return 3 * forward  # backward = 2 x forward (PaLM app. B)


def planned(spec, training: TrainingSpec, plan: Plan):
    return evaluate_plan(Evaluator(spec, training, load_cluster("dgx-h100")), plan)


@pytest.mark.parametrize("t", [16, 64, 128])
def test_planned_step_flops_equal_the_hand_count(t):
    """At a unit roofline (eager attention: every product a GEMM) the plan's compute seconds are
    the FLOPs it prices; they, and count's model FLOPs, equal the hand-worked step at every target
    length (t < s, t = s, t > s)."""
    spec = from_hf_config(T5)
    training = TrainingSpec(global_batch=4, seq_len=64, decoder_seq_len=t, attention="eager")
    expected = hand_step_flops(4, 64, t)
    assert count_flops(spec, training).model == expected
    ev = Evaluator(spec, training, load_cluster("dgx-h100"))
    ev.roofline = UNIT_RATE
    est = evaluate_plan(ev, Plan(micro_batch=2))
    assert est.step.compute_s == pytest.approx(expected, rel=1e-12)
    assert est.model_flops == expected


def test_memory_moves_with_the_target_length_only():
    """Only decoder_seq changes: model states stay, activations grow with it, linearly under flash
    attention (the decoder's kept tensors and the logits are per target token, the cross-attention's
    K and V per source token; no t x t scores are kept)."""
    spec = from_hf_config(T5)
    plan = Plan(micro_batch=2)
    mems = [planned(spec, TrainingSpec(global_batch=4, seq_len=64, decoder_seq_len=t), plan).memory[0]
            for t in (32, 64, 96)]
    assert len({(m.weights, m.gradients, m.optimizer) for m in mems}) == 1
    acts = [m.activations for m in mems]
    assert acts[0] < acts[1] < acts[2]
    assert acts[2] - acts[1] == pytest.approx(acts[1] - acts[0], rel=1e-12)


def test_step_time_follows_the_target_length():
    """A shorter target is a faster step at the same source length (and the same encoder work)."""
    spec = from_hf_config(T5)
    steps = [planned(spec, TrainingSpec(global_batch=4, seq_len=64, decoder_seq_len=t), Plan(micro_batch=2))
             .step.step_time_s for t in (16, 64)]
    assert steps[0] < steps[1]


def test_decoder_calls_carry_the_target_tokens():
    """tp 2: each decoder block's f / g AllReduces move b t h bytes (1 x 16 x 64 x 2 = 2,048), the
    encoder's b s h (1 x 64 x 64 x 2 = 8,192); the embedding's on the source, the loss's fp32 sum
    on the target's 16 tokens (64 B); 2 micro-batches x blocks of each stack calls."""
    spec = from_hf_config(T5)
    items = communication_list(spec, TrainingSpec(global_batch=2, seq_len=64, decoder_seq_len=16),
                               Plan(tp=2, micro_batch=1))
    by = {(i.label, i.nbytes): i.count for i in items if i.label.startswith("tp/") and i.label != "tp/partial-grads"}
    assert by[("tp/attention/out", 8192)] == 2 * ENC and by[("tp/attention/out", 2048)] == 2 * DEC
    assert by[("tp/cross_attention/out", 2048)] == 2 * DEC and by[("tp/mlp/in", 2048)] == 2 * DEC
    assert by[("tp/embedding", 8192)] == 2 and by[("tp/cross-entropy/sum", 64)] == 2


def test_cp_must_divide_both_lengths():
    """cp splits both stacks' sequences: one message naming the length it does not divide."""
    spec = from_hf_config(T5)
    messages = [p.message for p in plan_problems(spec, TrainingSpec(global_batch=4, seq_len=64, decoder_seq_len=30),
                                                 Plan(cp=4, micro_batch=1))]
    assert "cp (4) must divide decoder_seq_len (30)" in messages


def _plan_json(path, *extra: str) -> dict:
    result = runner.invoke(app, ["plan", str(path), "--gpus", "8", "--batch", "16", "--seq", "64", "--top", "1",
                                 "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cli_plan_prices_count_decoder_seq(tmp_path):
    """plan --decoder-seq: the document carries it, the plan's FLOPs are count's for the same
    lengths, and the default (none given) is --seq, as count's."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(T5))
    doc = _plan_json(path, "--decoder-seq", "16")
    assert doc["training"]["decoder_seq_len"] == 16
    counted = runner.invoke(app, ["count", str(path), "--batch", "16", "--seq", "64", "--decoder-seq", "16", "--json"])
    assert counted.exit_code == 0, counted.output
    flops = doc["plans"][0]["predictions"]["throughput"]["model_flops"]
    assert flops == json.loads(counted.output)["flops"]["model"] == hand_step_flops(16, 64, 16)
    same = _plan_json(path)["plans"][0]["predictions"]["throughput"]["model_flops"]
    assert same == _plan_json(path, "--decoder-seq", "64")["plans"][0]["predictions"]["throughput"]["model_flops"]


@pytest.mark.parametrize(("model", "args", "message"), [
    ("gpt2", ["--decoder-seq", "128"], "--decoder-seq: GPT-2 small is not an encoder-decoder (decoder)"),
    ("bart", ["--decoder-seq", "65"], "decoder_seq_len (65) exceeds max_positions (64)"),
    ("bart", ["--decoder-seq", "0"], "decoder_seq_len"),
    ("bart", ["--decoder-seq", "30", "--cp", "4"], "cp (4) must divide decoder_seq_len (30)"),
])
def test_cli_errors_are_one_line(tmp_path, model, args, message):
    """Where --decoder-seq does not apply or breaks a rule: non-zero exit, one line naming it."""
    if model == "bart":
        path = tmp_path / "config.json"
        path.write_text(json.dumps(BART))
        model = str(path)
    result = runner.invoke(app, ["plan", model, "--gpus", "8", "--batch", "16", "--seq", "64", *args])
    assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_megatron_export_writes_the_decoder_length():
    """Megatron-LM core_v0.16.1: --seq-length is the encoder's (validate_args sets encoder_seq_length
    from it), --decoder-seq-length (arguments.py:2487) the target's, which pretrain_t5.py passes
    as sequence_length_decoder; max_position_embeddings >= both (validate_args l. 829-834)."""
    from modelplan.export.megatron import megatron_arguments
    from modelplan.specs.load import load_model

    spec = from_hf_config(BART)
    flags = megatron_arguments(spec, TrainingSpec(global_batch=8, seq_len=32, decoder_seq_len=48), Plan()).flags()
    assert (flags["--seq-length"], flags["--decoder-seq-length"]) == ("32", "48")
    assert int(flags["--max-position-embeddings"]) >= 48
    gpt2 = megatron_arguments(load_model("gpt2"), TrainingSpec(global_batch=8, seq_len=32), Plan()).flags()
    assert "--decoder-seq-length" not in gpt2  # one stack: --seq-length only


def test_count_refuses_decoder_seq_for_one_stack():
    """count --decoder-seq on a decoder-only model: the same one-line error as plan's."""
    result = runner.invoke(app, ["count", "gpt2", "--decoder-seq", "128"])
    assert result.exit_code != 0 and "--decoder-seq: GPT-2 small is not an encoder-decoder" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_edge_tp_seconds_follow_their_stack():
    """tp 2: the head's (and loss's) exposed TP seconds depend on the target length only, the
    embedding's on the source's: each equals the figure of a run with both lengths at its own."""
    spec = from_hf_config(T5)
    cluster = load_cluster("dgx-h100")

    def edges(s: int, t: int) -> tuple[float, float]:
        tp = Evaluator(spec, TrainingSpec(global_batch=4, seq_len=s, decoder_seq_len=t), cluster).block_terms(
            2, False, 2, "none").tp
        return tp.embedding_s, tp.head_s

    embedding, head = edges(64, 16)
    assert embedding == edges(64, 64)[0] and head == edges(16, 16)[1] and head < edges(64, 64)[1]
