"""A transformer spec rebuilt in PyTorch float64 from the spec alone: the torch oracle's model.

Nothing here calls the executor's layers. Each piece is torch's own function, or written from
its paper: token/position/type embeddings (F.embedding), pre-norm blocks with F.layer_norm or
F.rms_norm, attention through F.scaled_dot_product_attention (its 1/sqrt(head_dim) scale, causal
mask and grouped-query heads, `enable_gqa`), rotary positions in RoFormer's complex form
(Su et al. 2021, sec. 3.4.2: pairs rotated by e^{i m theta_j}, theta_j = 10000^(-2j/d); channel j
paired with j + d/2, the layout of GPT-NeoX and HF Llama checkpoints), MLPs with F.gelu / F.silu
/ F.relu (gated: Shazeer 2020), top-k routing with the softmax over the k chosen logits
(Mixtral, Jiang et al. 2024, eq. 1-2) plus shared experts, a parallel block (GPT-J), a tied or
separate output head, and F.cross_entropy (mean over tokens).

Weights arrive as the executor's tensors (names and `(in, out)` layout), are copied into leaf
tensors and used as `x @ w`; a spec feature the executor has no parameters for is refused with
one line instead of being guessed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle.result import OracleRun, OracleUnavailable, require_torch
from modelplan.execute.oracle.torch_train import train_torch
from modelplan.execute.params import Batch
from modelplan.specs.transformer import TransformerSpec

ROPE_BASE = 10000.0  # Su et al. 2021, sec. 3.4.2


def unsupported(spec: TransformerSpec) -> list[str]:
    """Spec features this oracle does not build (the executor has no parameters for them)."""
    out = []
    if spec.qk_norm:
        out.append("qk_norm")
    if spec.embed_dim != spec.hidden:
        out.append(f"embedding_dim ({spec.embed_dim}) != hidden ({spec.hidden})")
    if spec.moe is not None and spec.moe.shared_expert_gate:
        out.append("moe.shared_expert_gate")
    for flag in ("pooler", "mlm_transform"):
        if getattr(spec, flag):
            out.append(flag)
    if not spec.lm_head:
        out.append("lm_head = false")
    if spec.position == "alibi":
        out.append("position 'alibi'")
    return out


class _Model:
    """The forward pass of `spec` over a dict of leaf tensors named as the executor names them."""

    def __init__(self, torch, spec: TransformerSpec, w: dict) -> None:
        self.torch, self.F, self.spec, self.w = torch, torch.nn.functional, spec, w

    def linear(self, x, prefix: str):
        """x @ weight + bias, weight stored (in, out)."""
        b = self.w.get(f"{prefix}/bias")
        return self.F.linear(x, self.w[f"{prefix}/weight"].t(), b)

    def norm(self, x, prefix: str):
        s, F = self.spec, self.F
        weight, bias = self.w[f"{prefix}/weight"], self.w.get(f"{prefix}/bias")
        if s.norm == "layernorm":
            return F.layer_norm(x, (s.hidden,), weight, bias, s.norm_eps)
        y = F.rms_norm(x, (s.hidden,), weight, s.norm_eps)  # Zhang & Sennrich 2019
        return y if bias is None else y + bias

    def act(self, x):
        a, F = self.spec.activation, self.F
        if a == "gelu":
            return F.gelu(x)
        if a == "gelu_tanh":
            return F.gelu(x, approximate="tanh")
        return F.relu(x) if a == "relu" else F.silu(x)

    def rotary(self, x):
        """RoFormer rotation of x (b, heads, s, d): (x_j + i x_{j+d/2}) e^{i m theta_j}."""
        torch = self.torch
        b, n, seq, d = x.shape
        half = d // 2
        theta = ROPE_BASE ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)  # (d/2,)
        angle = torch.outer(torch.arange(seq, dtype=torch.float64), theta)  # (s, d/2): m * theta_j
        z = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones_like(angle), angle)
        return torch.cat([z.real, z.imag], dim=-1)

    def attention(self, x, prefix: str):
        s = self.spec
        b, seq, _ = x.shape
        d, heads, kv = s.dim_head, s.heads, s.num_kv_heads
        q = self.linear(x, f"{prefix}/q").view(b, seq, heads, d).transpose(1, 2)  # (b, H, s, d)
        k = self.linear(x, f"{prefix}/k").view(b, seq, kv, d).transpose(1, 2)  # (b, KV, s, d)
        v = self.linear(x, f"{prefix}/v").view(b, seq, kv, d).transpose(1, 2)
        if s.position == "rotary":
            q, k = self.rotary(q), self.rotary(k)
        ctx = self.F.scaled_dot_product_attention(q, k, v, is_causal=s.causal, enable_gqa=kv != heads)
        return self.linear(ctx.transpose(1, 2).reshape(b, seq, heads * d), f"{prefix}/out")  # (b, s, H*d) -> (b, s, h)

    def mlp(self, x, prefix: str, expert: int | None = None):
        """Plain act(x W_in) W_out or gated (act(x W_gate) * x W_in) W_out (+ biases)."""
        def lin(y, name):
            w = self.w[f"{prefix}/{name}/weight"]
            bias = self.w.get(f"{prefix}/{name}/bias")
            if expert is not None:
                w, bias = w[expert], (None if bias is None or name == "out" else bias[expert])
            return self.F.linear(y, w.t(), bias)

        up = lin(x, "in")
        hidden = self.act(lin(x, "gate")) * up if self.spec.gated_mlp else self.act(up)
        return lin(hidden, "out")

    def moe(self, x, prefix: str):
        torch, moe = self.torch, self.spec.moe
        tokens = x.reshape(-1, x.shape[-1])  # (T, h)
        logits = self.linear(tokens, f"{prefix}/router")  # (T, E)
        chosen, experts = torch.topk(logits, moe.top_k, dim=-1)  # Mixtral: softmax over the top-k logits
        gates = torch.softmax(chosen, dim=-1)  # (T, k)
        out = torch.zeros_like(tokens)
        bias = self.w.get(f"{prefix}/experts/out/bias")
        for e in range(moe.num_experts):
            rows, slot = torch.where(experts == e)
            y = self.mlp(tokens[rows], f"{prefix}/experts", expert=e)
            if bias is not None:
                y = y + bias[e]
            out = out.index_add(0, rows, gates[rows, slot].unsqueeze(-1) * y)
        if moe.shared_experts:
            out = out + self.mlp(tokens, f"{prefix}/shared")
        return out.reshape(x.shape)

    def block(self, x, i: int):
        s, p = self.spec, f"layers/{i}"
        h1 = self.norm(x, f"{p}/attention/norm")
        a = self.attention(h1, f"{p}/attention")
        mid = x if s.parallel_block else x + a
        if s.num_norms_per_layer == 2:
            h2 = self.norm(mid, f"{p}/mlp/norm")
        else:
            h2 = h1 if s.parallel_block else mid
        m = self.moe(h2, f"{p}/mlp") if s.is_moe_layer(i) else self.mlp(h2, f"{p}/mlp")
        return mid + m + (a if s.parallel_block else 0.0)

    def loss(self, batch: Batch):
        torch, F, s, w = self.torch, self.F, self.spec, self.w
        tokens = torch.from_numpy(batch.tokens)
        seq = tokens.shape[1]
        x = F.embedding(tokens, w["embedding/word/weight"])  # (B, s) -> (B, s, h)
        if s.position == "learned":
            x = x + F.embedding(torch.arange(seq), w["embedding/position/weight"])
        if batch.types is not None:
            x = x + F.embedding(torch.from_numpy(batch.types), w["embedding/type/weight"])
        if s.embedding_norm:
            x = self.norm(x, "embedding/norm")
        for i in range(s.layers):
            x = self.block(x, i)
        if s.final_norm:
            x = self.norm(x, "head/norm")
        head = w["embedding/word/weight"] if s.tied_embeddings else w["head/lm/weight"].t()  # (V, h)
        logits = F.linear(x, head, w.get("head/lm/bias"))  # (B, s, h) -> (B, s, V)
        return F.cross_entropy(logits.reshape(-1, s.vocab), torch.from_numpy(batch.labels).reshape(-1))


def torch_transformer_run(spec: TransformerSpec, params: dict[str, np.ndarray], batches: Sequence[Batch],
                          optimizer: OptimizerConfig) -> OracleRun:
    """One torch optimizer step per batch from the executor's initial weights `params`."""
    torch = require_torch()
    missing = unsupported(spec)
    if missing:
        raise OracleUnavailable(f"the torch oracle does not build {', '.join(missing)}: the executor has no "
                                "parameters for it (verify with --oracle numpy proves the sharding only)")
    named = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params.items()}
    model = _Model(torch, spec, named)
    return train_torch(torch, named, model.loss, batches, optimizer, lambda _name, a: a)
