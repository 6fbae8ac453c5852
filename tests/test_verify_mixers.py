"""The Mamba-2 mixer the executor runs (execute/layers/mamba2.py) against transformers' own
Mamba2Mixer (its torch fallback path, float64, the same random weights), and `modelplan verify`
on Mamba-2 hybrids at tp 1 and 2 against the single-device oracle."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mm = pytest.importorskip("transformers.models.mamba2.modeling_mamba2")

from modelplan.execute.layers.mamba2 import Mamba2Shape, mamba2_backward, mamba2_forward  # noqa: E402

D, GN, H = 16, 6, 4
IN_PARTS = ["z", "x", "B", "C", "dt"]  # HF in_proj's output order


class _Float64Torch:
    """transformers casts the scan and the gated norm to float32; this keeps them in float64 so
    the comparison is at float64 precision (the math is unchanged)."""

    float32 = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


@pytest.fixture()
def hf_mixer(monkeypatch):
    from transformers import Mamba2Config
    torch.manual_seed(0)
    cfg = Mamba2Config(hidden_size=8, num_heads=H, head_dim=4, expand=2, n_groups=2, state_size=3, conv_kernel=4,
                       use_bias=True, use_conv_bias=True, chunk_size=4, layer_norm_epsilon=1e-5, vocab_size=16,
                       num_hidden_layers=1)
    m = mm.Mamba2Mixer(cfg, 0).double().eval()  # eval: the torch path, not the fused training kernel
    with torch.no_grad():
        for prm in m.parameters():
            prm.copy_(torch.randn_like(prm) * 0.5)
    orig = torch.Tensor.float
    monkeypatch.setattr(torch.Tensor, "float",
                        lambda self, *a, **k: self.double() if self.dtype == torch.float64 else orig(self, *a, **k))
    monkeypatch.setattr(mm, "torch", _Float64Torch())
    return m


def _params(m) -> dict:
    w, b = m.in_proj.weight.detach().numpy().T, m.in_proj.bias.detach().numpy()
    cuts = np.cumsum([0, D, D, GN, GN, H])
    p = {}
    for i, k in enumerate(IN_PARTS):
        p[f"in_{k}/weight"], p[f"in_{k}/bias"] = w[:, cuts[i]:cuts[i + 1]], b[cuts[i]:cuts[i + 1]]
    cw, cb = m.conv1d.weight.detach().numpy()[:, 0], m.conv1d.bias.detach().numpy()
    for k, (lo, hi) in zip("xBC", [(0, D), (D, D + GN), (D + GN, D + 2 * GN)]):
        p[f"conv_{k}/weight"], p[f"conv_{k}/bias"] = cw[lo:hi], cb[lo:hi]
    for k in ("dt_bias", "A_log", "D"):
        p[k] = getattr(m, k).detach().numpy()
    p["gate_norm/weight"] = m.norm.weight.detach().numpy()
    p["out/weight"] = m.out_proj.weight.detach().numpy().T
    return p


def test_mamba2_forward_and_backward_match_transformers(hf_mixer):
    m = hf_mixer
    p = _params(m)
    x = torch.randn(2, 6, 8, dtype=torch.float64, requires_grad=True)  # 6 tokens: a partial second chunk of 4
    out = m(x)
    shape = Mamba2Shape(heads=H, head_dim=4, groups=2, state=3, gated_norm=True, eps=1e-5)
    y, cache = mamba2_forward(x.detach().numpy(), p, shape)
    np.testing.assert_allclose(y + m.out_proj.bias.detach().numpy(), out.detach().numpy(), rtol=0, atol=1e-10)
    dout = np.random.default_rng(1).standard_normal(y.shape)
    (out * torch.from_numpy(dout)).sum().backward()
    dx, g = mamba2_backward(cache, p, shape, dout)
    np.testing.assert_allclose(dx, x.grad.numpy(), rtol=0, atol=1e-10)
    ours = {
        "in_proj.weight": np.concatenate([g[f"in_{k}/weight"] for k in IN_PARTS], axis=1).T,
        "in_proj.bias": np.concatenate([g[f"in_{k}/bias"] for k in IN_PARTS]),
        "conv1d.weight": np.concatenate([g[f"conv_{k}/weight"] for k in "xBC"])[:, None],
        "conv1d.bias": np.concatenate([g[f"conv_{k}/bias"] for k in "xBC"]),
        "dt_bias": g["dt_bias"], "A_log": g["A_log"], "D": g["D"], "norm.weight": g["gate_norm/weight"],
        "out_proj.weight": g["out/weight"].T,
    }
    for name, prm in m.named_parameters():
        if name == "out_proj.bias":
            continue
        np.testing.assert_allclose(ours[name], prm.grad.numpy(), rtol=0, atol=1e-10, err_msg=name)



qn = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")


def test_gated_deltanet_forward_and_backward_match_transformers(monkeypatch):
    """layers/deltanet.py against transformers' Qwen3NextGatedDeltaNet (its torch chunked path,
    float64, the same random weights; 2 key heads repeated to 4 value heads)."""
    from transformers import Qwen3NextConfig
    from modelplan.execute.layers.deltanet import DeltaNetShape, deltanet_backward, deltanet_forward
    torch.manual_seed(0)
    hk, hv, dk, dv, h = 2, 4, 3, 2, 8
    r = hv // hk
    cfg = Qwen3NextConfig(hidden_size=h, linear_num_key_heads=hk, linear_num_value_heads=hv, linear_key_head_dim=dk,
                          linear_value_head_dim=dv, linear_conv_kernel_dim=4, rms_norm_eps=1e-6, num_hidden_layers=1,
                          layer_types=["linear_attention"], num_attention_heads=2, num_key_value_heads=1, vocab_size=16)
    m = qn.Qwen3NextGatedDeltaNet(cfg, 0).double().eval()
    with torch.no_grad():
        for prm in m.parameters():
            prm.copy_(torch.randn_like(prm) * 0.5)
    # HF interleaves in_proj_qkvz per key head: [q (dk), k (dk), v (r dv), z (r dv)]; in_proj_ba: [b (r), a (r)]
    cuts = {"q": slice(0, dk), "k": slice(dk, 2 * dk), "v": slice(2 * dk, 2 * dk + r * dv), "z": slice(2 * dk + r * dv, None)}
    w = m.in_proj_qkvz.weight.detach().numpy().reshape(hk, -1, h)
    p = {f"in_{k}/weight": w[:, sl].reshape(-1, h).T for k, sl in cuts.items()}
    ba = m.in_proj_ba.weight.detach().numpy().reshape(hk, 2 * r, h)
    p["in_b/weight"], p["in_a/weight"] = ba[:, :r].reshape(-1, h).T, ba[:, r:].reshape(-1, h).T
    cw = m.conv1d.weight.detach().numpy()[:, 0]
    p["conv_q/weight"], p["conv_k/weight"], p["conv_v/weight"] = cw[:hk * dk], cw[hk * dk:2 * hk * dk], cw[2 * hk * dk:]
    p["dt_bias"], p["A_log"] = m.dt_bias.detach().numpy(), m.A_log.detach().numpy()
    p["gate_norm/weight"], p["out/weight"] = m.norm.weight.detach().numpy(), m.out_proj.weight.detach().numpy().T
    orig = torch.Tensor.float
    monkeypatch.setattr(torch.Tensor, "float",
                        lambda self, *a, **k: self.double() if self.dtype == torch.float64 else orig(self, *a, **k))
    monkeypatch.setattr(qn, "torch", _Float64Torch())
    x = torch.randn(2, 6, h, dtype=torch.float64, requires_grad=True)
    out = m(x)
    shape = DeltaNetShape(hk, hv, dk, dv, 1e-6)
    y, cache = deltanet_forward(x.detach().numpy(), p, shape)
    np.testing.assert_allclose(y, out.detach().numpy(), rtol=0, atol=1e-10)
    dout = np.random.default_rng(1).standard_normal(y.shape)
    (out * torch.from_numpy(dout)).sum().backward()
    dx, g = deltanet_backward(cache, p, shape, dout)
    np.testing.assert_allclose(dx, x.grad.numpy(), rtol=0, atol=1e-10)
    gw = m.in_proj_qkvz.weight.grad.numpy().reshape(hk, -1, h)
    gba = m.in_proj_ba.weight.grad.numpy().reshape(hk, 2 * r, h)
    expected = {**{f"in_{k}/weight": gw[:, sl].reshape(-1, h).T for k, sl in cuts.items()},
                "in_b/weight": gba[:, :r].reshape(-1, h).T, "in_a/weight": gba[:, r:].reshape(-1, h).T,
                "dt_bias": m.dt_bias.grad.numpy(), "A_log": m.A_log.grad.numpy(),
                "gate_norm/weight": m.norm.weight.grad.numpy(), "out/weight": m.out_proj.weight.grad.numpy().T}
    cg = m.conv1d.weight.grad.numpy()[:, 0]
    expected.update({"conv_q/weight": cg[:hk * dk], "conv_k/weight": cg[hk * dk:2 * hk * dk],
                     "conv_v/weight": cg[2 * hk * dk:]})
    assert set(g) == set(expected)
    for name, want in expected.items():
        np.testing.assert_allclose(g[name], want, rtol=0, atol=1e-10, err_msg=name)

# --- verify on Mamba-2 hybrids (scaled down), sharded over tp, against the oracles ---

import json  # noqa: E402
from pathlib import Path  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from _hf_hybrid_cases import HYBRID_VARIANTS  # noqa: E402
from modelplan.cli import app  # noqa: E402
from modelplan.comm.regions import Region  # noqa: E402
from modelplan.execute import mappings  # noqa: E402
from modelplan.execute.verify import verify  # noqa: E402
from modelplan.specs.hf import from_hf_config  # noqa: E402
from modelplan.specs.plan import Plan  # noqa: E402
from modelplan.specs.training import TrainingSpec  # noqa: E402

HF = Path(__file__).parent / "data" / "hf"
NEMOTRON = from_hf_config(json.loads((HF / "nvidia-nemotron-nano-9b-v2.json").read_text()))  # 8 groups: tp 2 splits them
QWEN3_NEXT = from_hf_config(json.loads((HF / "qwen3-next-80b-a3b-instruct.json").read_text()))
TRAIN = TrainingSpec(global_batch=4, seq_len=64)
runner = CliRunner()


def _failed(report) -> list[str]:
    return [row.name for row in report.rows if not row.passed]


@pytest.mark.parametrize(("spec", "plan", "oracle"), [
    (NEMOTRON, Plan(tp=1), "numpy"), (NEMOTRON, Plan(tp=2), "numpy"),
    (NEMOTRON, Plan(tp=2, sequence_parallel=True), "numpy"), (NEMOTRON, Plan(tp=2, pp=2), "numpy"),
    (NEMOTRON, Plan(tp=2), "torch"),  # oracle/torch_mamba2.py: autograd, not the hand-written backward
    (QWEN3_NEXT, Plan(tp=2, pp=2), "numpy"), (QWEN3_NEXT, Plan(tp=2, pp=2, sequence_parallel=True), "numpy"),
    (QWEN3_NEXT, Plan(pp=2), "torch"),  # oracle/torch_deltanet.py and torch_blocks' output gate
], ids=["nemotron-tp1", "nemotron-tp2", "nemotron-tp2-sp", "nemotron-tp2-pp2", "nemotron-tp2-torch",
        "qwen3next-tp2-pp2", "qwen3next-tp2-pp2-sp", "qwen3next-pp2-torch"])
def test_verify_linear_mixer_hybrids_pass(spec, plan, oracle):
    """Nemotron-H (Mamba-2, attention and MLP-only blocks) and Qwen3-Next (gated DeltaNet and
    gated-attention blocks, pp 2: one of each; MoE with a gated shared expert): loss, gradients,
    comm list and memory all pass."""
    report = verify(spec, TRAIN, plan, oracle=oracle)
    assert report.passed, _failed(report)


def test_verify_refuses_a_split_of_one_group():
    """tp 2 over a one-group Mamba-2 (Bamba-9B): one line naming mamba2.groups, non-zero exit."""
    result = runner.invoke(app, ["verify", str(HF / "bamba-9b.json"), "--tp", "2"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and "mamba2.groups (1)" in lines[0]


@pytest.mark.parametrize(("model_type", "feature"), [("falcon_h1", "layer_types=parallel_mamba2"),
                                                    ("kimi_linear", "deltanet.kda")])
def test_verify_still_refuses_what_it_does_not_run(tmp_path, model_type, feature):
    """Falcon-H1's attention + Mamba-2 parallel block and Kimi Delta Attention are not executed:
    refused by name in one line."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(next(d for d in HYBRID_VARIANTS if d["model_type"] == model_type)))
    result = runner.invoke(app, ["verify", str(path)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and feature in lines[0]


def test_verify_nemotron_h_moe_runs_every_kind_of_block():
    """Nemotron-H with E (MoE) blocks: the scaled copy keeps a Mamba-2, an MLP-only MoE and an
    attention block, and passes at tp 2 with experts split over ep 2."""
    from modelplan.count.blocks import block_of
    from modelplan.execute.scale import scale_down
    spec = from_hf_config(next(d for d in HYBRID_VARIANTS if d.get("hybrid_override_pattern") == "MEM*EME"))
    plan = Plan(dp=2, tp=2, ep=2)
    small, _ = scale_down(spec, plan, TRAIN)
    kinds = {(block_of(small, i).mixer, block_of(small, i).moe) for i in range(small.layers)}
    assert {("mamba2", False), ("mlp", True), ("full_attention", False)} <= kinds
    report = verify(spec, TRAIN, plan)
    assert report.passed, _failed(report)



@pytest.mark.parametrize("spec", [NEMOTRON, QWEN3_NEXT], ids=["mamba2", "gated_deltanet"])
def test_verify_fails_without_the_out_proj_all_reduce(monkeypatch, spec):
    """A wrong shard: the linear mixer's out_proj partial sums left un-reduced over tp fail verify."""
    original = mappings.exit_region
    fired = []

    def exit_region(tp, x, region):
        if region == Region.TP_MAMBA_OUT:
            fired.append(region)
            return x  # each rank keeps its own heads' partial output
        return original(tp, x, region)
    monkeypatch.setattr(mappings, "exit_region", exit_region)
    report = verify(spec, TRAIN, Plan(tp=2))
    assert fired and "loss" in _failed(report)
