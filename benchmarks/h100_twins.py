"""Pure helpers of `bench_h100_twins.py`: A100 / H100 twins of the same published run, and the
time a run is missing per FSDP unit and micro-batch (issue 13, n18h100; a probe, nothing in
modelplan uses it).

A twin pair is two runs of one engine with the same model (inline spec or preset), sequence,
micro-batch, recompute and precision, one on an A100 cluster, one on an H100 cluster. Their
speed ratio is seconds per token per GPU on the A100 over the same on the H100, published and
predicted; ratio_quotient = published / predicted (1.0: the H100 speed-up is priced right; 0.85:
the H100 runs 15 % slower than the model says, relative to its A100 twin).
"""

from __future__ import annotations

import json

A100_CLUSTERS = ("dgx-a100", "dgx-a100-40gb")
"""Cluster presets of A100 runs."""
H100_CLUSTERS = ("dgx-h100", "grand-teton-h100")
"""Cluster presets of H100 SXM runs (H200 / B200 have their own)."""


def twin_key(run: dict) -> tuple | None:
    """What two runs must share to be twins (module docstring); None for runs on other parts."""
    cluster = run.get("cluster")
    if cluster not in A100_CLUSTERS + H100_CLUSTERS or "seq" not in run:
        return None
    model = json.dumps(run["spec"], sort_keys=True) if "spec" in run else run.get("model")
    return (run["engine"], model, run["seq"], run.get("micro_batch"), run.get("recompute"),
            run.get("precision"))


def tokens_per_gpu(run: dict) -> float:
    """Tokens one GPU processes per step: global batch x sequence / GPUs."""
    return run["global_batch"] * run["seq"] / run["gpus"]


def speed_ratio(a100_s: float, a100_tokens: float, h100_s: float, h100_tokens: float) -> float:
    """Seconds per token per GPU on the A100 over the same on the H100 (the H100 speed-up)."""
    return (a100_s / a100_tokens) / (h100_s / h100_tokens)


def twin_pairs(runs: dict[str, dict], rows: list[dict]) -> list[tuple[dict, dict]]:
    """Every (A100 row, H100 row) pair of priced bench rows whose runs are twins."""
    priced = [r for r in rows if "time_error" in r and twin_key(runs[r["id"]]) is not None]
    a100 = [r for r in priced if runs[r["id"]]["cluster"] in A100_CLUSTERS]
    h100 = [r for r in priced if runs[r["id"]]["cluster"] in H100_CLUSTERS]
    return [(a, h) for a in a100 for h in h100 if twin_key(runs[a["id"]]) == twin_key(runs[h["id"]])]


def ratio_quotient(runs: dict[str, dict], a: dict, h: dict) -> tuple[float, float, float]:
    """(published speed ratio, predicted speed ratio, published / predicted) of one twin pair."""
    ta, th = tokens_per_gpu(runs[a["id"]]), tokens_per_gpu(runs[h["id"]])
    pub = speed_ratio(a["published_s"], ta, h["published_s"], th)
    pred = speed_ratio(a["predicted_s"], ta, h["predicted_s"], th)
    return pub, pred, pub / pred


def microbatches(run: dict) -> int:
    """Micro-batches per step: global batch / (micro-batch x data-parallel ranks)."""
    dp = run.get("dp") or run["gpus"] // (run.get("tp", 1) * run.get("pp", 1) * run.get("cp", 1))
    return run["global_batch"] // (run["micro_batch"] * dp)


def missing_ms_per_unit(published_s: float, predicted_s: float, layers: int, num_microbatches: int) -> float:
    """Published minus predicted step, per FSDP unit (one block) and micro-batch, in ms."""
    return (published_s - predicted_s) / (layers * num_microbatches) * 1e3
