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
