"""Compute-optimal sizing (modelplan.cost.scaling, shape, budget) and `modelplan budget`."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from modelplan.cli.app import app
from modelplan.comm.clusters import load_cluster
from modelplan.cost.budget import budget
from modelplan.cost.scaling import LAWS, rule_optimum
from modelplan.cost.shape import shape_for_params
from modelplan.count.params import count_params
from modelplan.plan.search import SearchSpace, search_plans
from modelplan.specs.training import TrainingSpec


def test_twenty_tokens_per_param_gives_chinchilla():
    """Chinchilla (Hoffmann et al. sec. 4): 70B parameters on 1.4T tokens, C = 6 x 70e9 x 1.4e12."""
    params, tokens = rule_optimum(6 * 70e9 * 1.4e12, 20.0)
    assert params == pytest.approx(70e9)
    assert tokens == pytest.approx(1.4e12)


@pytest.mark.parametrize("name", sorted(LAWS))
@pytest.mark.parametrize("flops", [1e21, 5.76e23, 1e25])
def test_law_optimum_minimises_loss_on_the_isoflop_line(name, flops):
    """Eq. 4's N_opt is the minimum of L(N, C/6N): 1 % more or fewer parameters both lose more."""
    law = LAWS[name]
    n, d = law.optimum(flops)
    assert 6 * n * d == pytest.approx(flops)
    best = law.loss(n, d)
    for factor in (0.99, 1.01):
        assert law.loss(n * factor, flops / (6 * n * factor)) > best


def test_hoffmann_fit_as_published():
    """Hoffmann et al. 2022 sec. 3.3 (Approach 3): E 1.69, A 406.4, B 410.7, alpha 0.34, beta 0.28."""
    law = LAWS["hoffmann"]
    assert (law.E, law.A, law.B, law.alpha, law.beta) == (1.69, 406.4, 410.7, 0.34, 0.28)
    # Besiroglu et al. 2024: Approach 3's N exponent beta/(alpha+beta) = 0.45 (paper's a = 0.46) vs 0.51 refit
    assert law.beta / (law.alpha + law.beta) == pytest.approx(0.4516, abs=1e-4)
    besiroglu = LAWS["besiroglu"]
    assert besiroglu.beta / (besiroglu.alpha + besiroglu.beta) == pytest.approx(0.5126, abs=1e-4)


def test_shape_for_8b_is_llama_3_8b():
    """The rule at 8.03B parameters lands on Llama-3-8B itself (HF config: 32 x 4096, 8 KV heads, ffn 14336)."""
    spec = shape_for_params(8.03e9)
    assert (spec.layers, spec.hidden, spec.heads, spec.num_kv_heads, spec.ffn_hidden) == (32, 4096, 32, 8, 14336)
    assert count_params(spec).total == 8_030_261_248  # HF safetensors metadata of Meta-Llama-3-8B


@pytest.mark.parametrize("target", [3e9, 7e10, 4e11])
def test_shape_hits_the_target_size(target):
    """Within half a block of the target, heads a multiple of 8, aspect ratio within 2x of 128."""
    spec = shape_for_params(target)
    total = count_params(spec).total
    per_layer = count_params(spec).per_layer[0]
    assert abs(total - target) <= per_layer / 2 + 1
    assert spec.heads % 8 == 0 and 64 <= spec.hidden / spec.layers <= 256


def _search(spec, training, cluster, gpus):
    return search_plans(spec, training, cluster, gpus, SearchSpace(), top_k=1).best[0]


def test_gpu_days_budget_converges_to_the_days():
    """--gpus 64 --days 10: the chosen shape's run (failures, checkpoints included) takes 10 days within 1 %."""
    cluster = load_cluster("dgx-h100")
    training = TrainingSpec(global_batch=256, seq_len=4096)
    result = budget(cluster, training, _search, gpus=64, days=10.0)
    assert abs(result.run.wall_clock_days - 10.0) / 10.0 < 0.01
    assert result.run.tokens >= result.tokens
    assert result.compute_flops == pytest.approx(6 * result.params * result.tokens, rel=1e-6)


def test_flops_budget_cli_json_units():
    """`budget --flops 1e23 --gpus 64 --json`: the chosen split, its shape, and a run with units in its keys."""
    result = CliRunner().invoke(app, ["budget", "--flops", "1e23", "--gpus", "64", "--batch", "256", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["compute_flops"] == 1e23
    chosen = next(a for a in doc["allocations"] if a["rule"] == "tokens-per-param")
    assert chosen["params"] == pytest.approx(math.sqrt(1e23 / 120))
    assert abs(doc["params"] - chosen["params"]) / chosen["params"] < 0.05
    assert doc["run"]["tokens"] >= doc["tokens"]
    assert "wall_clock_days" in doc["run"] and "loss_hoffmann_nats" in chosen


def test_budget_needs_flops_or_days():
    """No budget at all is a one-line error (exit 2)."""
    result = CliRunner().invoke(app, ["budget", "--gpus", "8"])
    assert result.exit_code == 2 and "--flops" in result.output
