"""A100 / H100 twin helpers (`benchmarks/h100_twins.py`, the probe beside `bench_h100_twins.py`);
every expected value is hand arithmetic on the published figures the runs cite (llm-foundry
scripts/train/benchmarking/README.md tables; pytorch.org blog 2024-03-13 'Maximizing training
throughput using PyTorch FSDP', Table 1)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # not part of the package

from h100_twins import (microbatches, missing_ms_per_unit, ratio_quotient, speed_ratio,  # noqa: E402
                        tokens_per_gpu, twin_key, twin_pairs)

SPEC = {"name": "MPT-7b", "layers": 32, "hidden": 4096}


def _run(cluster, **kw):
    base = {"engine": "foundry", "spec": dict(SPEC), "seq": 2048, "micro_batch": 6, "recompute": "none",
            "precision": "bf16", "gpus": 8, "global_batch": 48}
    return {**base, "cluster": cluster, **kw}


def test_tokens_per_gpu_is_global_batch_times_seq_over_gpus():
    """MPT-7B 2k on 8 H100 (README: global batch 48): 48 x 2048 / 8 = 12,288 tokens per GPU."""
    assert tokens_per_gpu(_run("dgx-h100")) == 12_288


def test_speed_ratio_of_the_published_7b_tables():
    """README 7b 2k: A100 4,641 T/s/GPU, H100 10,643 T/s/GPU; the ratio of seconds per token is
    the ratio of tokens per second: 10,643 / 4,641 = 2.293."""
    a100_tokens, h100_tokens = 96 * 2048 / 8, 48 * 2048 / 8
    a100_s, h100_s = a100_tokens / 4641, h100_tokens / 10643
    assert speed_ratio(a100_s, a100_tokens, h100_s, h100_tokens) == pytest.approx(10643 / 4641)


def test_twins_share_engine_model_sequence_micro_batch_recompute_precision():
    a, h = _run("dgx-a100"), _run("dgx-h100", gpus=64, global_batch=384)
    assert twin_key(a) == twin_key(h)
    assert twin_key(_run("dgx-a100", micro_batch=2)) != twin_key(h)
    assert twin_key(_run("dgx-a100", recompute="full")) != twin_key(h)
    assert twin_key(_run("dgx-h200")) is None  # only A100 and H100 SXM clusters pair


def test_pairs_and_quotient_by_hand():
    """IBM blog Table 1, 7B batch 2: A100 3,700, H100 7,500 tokens/s/GPU, published speed-up
    7,500 / 3,700 = 2.027; priced at (say) 3,600 and 8,000 tokens/s/GPU the predicted speed-up is
    8,000 / 3,600 = 2.222 and the quotient 2.027 / 2.222 = 0.912."""
    runs = {
        "a": _run("dgx-a100", engine="fsdp", seq=4096, micro_batch=2, gpus=128, global_batch=256),
        "h": _run("dgx-h100", engine="fsdp", seq=4096, micro_batch=2, gpus=96, global_batch=192),
        "x": _run("dgx-h100", engine="fsdp", seq=4096, micro_batch=4, gpus=96, global_batch=384),
    }
    tok = 2 * 4096  # tokens per GPU per step in both
    rows = [
        {"id": "a", "engine": "fsdp", "published_s": tok / 3700, "predicted_s": tok / 3600, "time_error": 0.0},
        {"id": "h", "engine": "fsdp", "published_s": tok / 7500, "predicted_s": tok / 8000, "time_error": 0.0},
        {"id": "x", "engine": "fsdp", "published_s": 1.0, "predicted_s": 1.0, "time_error": 0.0},
    ]
    pairs = twin_pairs(runs, rows)
    assert [(a["id"], h["id"]) for a, h in pairs] == [("a", "h")]
    pub, pred, q = ratio_quotient(runs, *pairs[0])
    assert pub == pytest.approx(7500 / 3700)
    assert pred == pytest.approx(8000 / 3600)
    assert q == pytest.approx((7500 / 3700) / (8000 / 3600))


def test_microbatches_from_global_batch_micro_batch_and_dp():
    """README 30b 8k on 8 H100: global 168, micro-batch 1, dp 8: 21 micro-batches (its GradAccum)."""
    assert microbatches(_run("dgx-h100", global_batch=168, micro_batch=1, dp=8)) == 21
    # dp from gpus / (tp pp cp) when the run does not print it: 64 / (2 x 2) = 16; 512 / (4 x 16) = 8
    assert microbatches(_run("dgx-h100", gpus=64, tp=2, pp=2, global_batch=512, micro_batch=4)) == 8


def test_missing_ms_per_unit():
    """1.092 s published, 0.901 s predicted, 32 blocks, 1 micro-batch: 191 ms / 32 = 5.97 ms."""
    assert missing_ms_per_unit(1.092, 0.901, 32, 1) == pytest.approx(191 / 32)
    assert missing_ms_per_unit(2.0, 2.5, 10, 5) == pytest.approx(-10.0)
