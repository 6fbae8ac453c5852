"""A transformer spec rebuilt in PyTorch float64 from the spec alone: the torch oracle's model.

Nothing here calls the executor's layers. Each piece is torch's own function, or written from
its paper: token/position/type embeddings (F.embedding), pre-norm blocks with F.layer_norm or
F.rms_norm, attention through F.scaled_dot_product_attention (its 1/sqrt(head_dim) scale, causal
mask and grouped-query heads, `enable_gqa`), rotary positions in RoFormer's complex form
(Su et al. 2021, sec. 3.4.2: pairs rotated by e^{i m theta_j}, theta_j = 10000^(-2j/d); channel j
paired with j + d/2, the layout of GPT-NeoX and HF Llama checkpoints), MLPs with F.gelu / F.silu
/ F.relu (gated: Shazeer 2020), top-k routing with the softmax over the k chosen logits
(Mixtral, Jiang et al. 2024, eq. 1-2) plus shared experts, a parallel block (GPT-J), a tied or
separate output head, and F.cross_entropy (mean over tokens). Today's families' attention, MLA
and routers are `torch_blocks.py`'s, Mamba mixers `torch_mamba.py`'s, Mamba-2 `torch_mamba2.py`'s, gated DeltaNet `torch_deltanet.py`'s; norm placements (pre, post, sandwich, output), Granite's
scales, Gemma's embedding scale and soft-caps and DeepSeek-V3's MTP modules are here.

Weights arrive as the executor's tensors (names and `(in, out)` layout), are copied into leaf
tensors and used as `x @ w`; a spec feature the executor has no parameters for is refused with
one line instead of being guessed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle import torch_blocks, torch_deltanet, torch_mamba, torch_mamba2
from modelplan.execute.oracle.result import OracleRun, OracleUnavailable, Starts, require_torch
from modelplan.execute.oracle.torch_train import train_torch
from modelplan.execute.params import Batch
from modelplan.execute.shapes import score_correction_bias
from modelplan.specs.transformer import TransformerSpec

ROPE_BASE = torch_blocks.ROPE_BASE


def unsupported(spec: TransformerSpec) -> list[str]:
    """Spec features this oracle does not build (the executor has no parameters for them)."""
    out = []
    if spec.embed_dim != spec.hidden:
        out.append(f"embedding_dim ({spec.embed_dim}) != hidden ({spec.hidden})")
    if spec.arch == "encoder_decoder":
        out.append("encoder_decoder blocks")
    if spec.moe is not None and spec.moe.router == "sparsemixer":
        out.append("moe.router sparsemixer")
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
        weight, bias = self.w.get(f"{prefix}/weight"), self.w.get(f"{prefix}/bias")  # none: non-affine
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

    def attention(self, x, prefix: str, mixer: str = "full_attention"):
        if self.spec.mla is not None:
            return torch_blocks.latent_attention(self, x, prefix, mixer)
        return torch_blocks.attention(self, x, prefix, mixer)

    def mlp(self, x, prefix: str, expert: int | None = None):
        """Plain act(x W_in) W_out or gated (act(x W_gate) * x W_in) W_out (+ biases)."""
        def lin(y, name):
            w = self.w[f"{prefix}/{name}/weight"]
            bias = self.w.get(f"{prefix}/{name}/bias")
            if expert is not None:
                w, bias = w[expert], (None if bias is None or name == "out" else bias[expert])
            return self.F.linear(y, w.t(), bias)

        up = lin(x, "in")
        if self.spec.activation == "swiglu_clamp":
            hidden = torch_blocks.clamped_swiglu(self.torch, lin(x, "gate"), up)
        else:
            hidden = self.act(lin(x, "gate")) * up if self.spec.gated_mlp else self.act(up)
        return lin(hidden, "out")

    def moe(self, x, prefix: str):
        torch, moe = self.torch, self.spec.moe
        tokens = x.reshape(-1, x.shape[-1])  # (T, h)
        logits = self.linear(tokens, f"{prefix}/router")  # (T, E)
        bias = torch.from_numpy(score_correction_bias(moe.num_experts)) if moe.router_score_correction else None
        gates, experts = torch_blocks.route(torch, self.spec, logits, bias)  # (T, k)
        out = torch.zeros_like(tokens)
        bias = self.w.get(f"{prefix}/experts/out/bias")
        for e in range(moe.num_experts):
            rows, slot = torch.where(experts == e)
            gate = gates[rows, slot].unsqueeze(-1)  # (n_e, 1)
            if moe.weights_on_input:  # Llama 4: routed_in = hidden * score, summed unweighted
                y = self.mlp(gate * tokens[rows], f"{prefix}/experts", expert=e)
                gate = 1.0
            else:
                y = self.mlp(tokens[rows], f"{prefix}/experts", expert=e)
            if bias is not None:
                y = y + bias[e]
            out = out.index_add(0, rows, gate * y)
        if moe.shared_experts:
            shared = self.mlp(tokens, f"{prefix}/shared")
            if moe.shared_expert_gate:  # Qwen2-MoE: sigmoid(x W_g) * shared_expert(x)
                shared = torch.sigmoid(tokens @ self.w[f"{prefix}/shared_gate/weight"]) * shared
            out = out + shared
        return out.reshape(x.shape)

    def sublayer(self, name: str, x, prefix: str, mixer: str, moe: bool):
        if name == "mamba":
            return torch_mamba.mamba(self, x, f"{prefix}/mamba")
        if name == "mamba2":
            return torch_mamba2.mamba2(self, x, f"{prefix}/mamba2")
        if name == "gated_deltanet":
            return torch_deltanet.deltanet(self, x, f"{prefix}/gated_deltanet")
        if name == "attention":
            return self.attention(x, f"{prefix}/attention", mixer)
        return self.moe(x, f"{prefix}/mlp") if moe else self.mlp(x, f"{prefix}/mlp")

    def block(self, x, prefix: str, mixer: str, moe: bool):
        """pre: x + r f(norm x); sandwich: x + r post(f(norm x)); output: x + r post(f(x));
        post: norm(x + r f(x)); parallel: x + r (f_attn(norm x) + f_mlp(norm' x or norm x))."""
        s, r = self.spec, self.spec.residual_scale
        if s.parallel_block:
            h1 = self.norm(x, f"{prefix}/attention/norm")
            h2 = self.norm(x, f"{prefix}/mlp/norm") if s.num_norms_per_layer == 2 else h1
            return x + r * (self.sublayer("attention", h1, prefix, mixer, moe) + self.sublayer("mlp", h2, prefix, mixer, moe))
        names = [] if mixer == "mlp" else [mixer if mixer in ("mamba", "mamba2", "gated_deltanet") else "attention"]  # mixer, then MLP
        names += ["mlp"] if s.mlp or mixer == "mlp" else []  # Nemotron-H: MLP-only blocks (spec.has_mlp)
        for i, name in enumerate(names):
            pre = s.placement == "sandwich" or (s.placement == "pre" and (i == 0 or s.num_norms_per_layer == 2))
            h = self.norm(x, f"{prefix}/{name}/norm") if pre else x
            y = self.sublayer(name, h, prefix, mixer, moe)
            if s.placement in ("sandwich", "output"):
                y = self.norm(y, f"{prefix}/{name}/post_norm")
            x = x + r * y
            if s.placement == "post":
                x = self.norm(x, f"{prefix}/{name}/norm")
        return x

    def head_loss(self, x, labels, norm: str | None, mask=None):
        """Norm, output head, logit scale and soft-cap, mean cross-entropy (over `mask`)."""
        torch, F, s, w = self.torch, self.F, self.spec, self.w
        if norm:
            x = self.norm(x, norm)
        head = w["embedding/word/weight"] if s.tied_embeddings else w["head/lm/weight"].t()  # (V, h)
        logits = F.linear(x, head, w.get("head/lm/bias")) * s.logit_scale  # (B, s, h) -> (B, s, V)
        if s.final_logit_softcap is not None:
            logits = s.final_logit_softcap * torch.tanh(logits / s.final_logit_softcap)
        per_token = F.cross_entropy(logits.reshape(-1, s.vocab), torch.from_numpy(labels).reshape(-1), reduction="none")
        if mask is None:
            return per_token.mean()
        m = torch.from_numpy(mask.reshape(-1)).to(per_token.dtype)
        return (per_token * m).sum() / m.sum()

    def embed(self, ids):
        x = self.F.embedding(self.torch.from_numpy(ids), self.w["embedding/word/weight"])  # (B, s) -> (B, s, h)
        return x if self.spec.embedding_scale is None else x * self.spec.embedding_scale

    def mtp_loss(self, h, batch: Batch):
        """DeepSeek-V3 sec. 2.2: module k reads token i+k and h^{k-1}_i, predicts token i+k+1;
        positions without that target are masked; lambda / D times the sum of the modules' losses."""
        torch, s, D = self.torch, self.spec, self.spec.mtp_layers
        total = 0.0
        for k in range(D):
            depth, p = k + 1, f"mtp/{k}"
            ids, labels = np.roll(batch.tokens, -depth, axis=1), np.roll(batch.labels, -depth, axis=1)
            mask = np.arange(ids.shape[1])[None, :].repeat(ids.shape[0], 0) < ids.shape[1] - depth
            z = torch.cat([self.norm(self.embed(ids), f"{p}/embed_norm"), self.norm(h, f"{p}/hidden_norm")], dim=-1)
            h = self.block(z @ self.w[f"{p}/proj/weight"], f"{p}/block", "full_attention", s.moe is not None)
            total = total + self.head_loss(h, labels, f"{p}/head_norm", mask)
        return s.mtp_loss_weight / D * total

    def loss(self, batch: Batch):
        torch, F, s, w = self.torch, self.F, self.spec, self.w
        seq = batch.tokens.shape[1]
        x = self.embed(batch.tokens)
        if s.position == "learned":
            x = x + F.embedding(torch.arange(seq), w["embedding/position/weight"])
        if batch.types is not None:
            x = x + F.embedding(torch.from_numpy(batch.types), w["embedding/type/weight"])
        if s.embedding_norm:
            x = self.norm(x, "embedding/norm")
        for i in range(s.layers):
            x = self.block(x, f"layers/{i}", s.layer_type(i), s.is_moe_layer(i))
        loss = self.head_loss(x, batch.labels, "head/norm" if s.final_norm else None)
        return loss + self.mtp_loss(x, batch) if s.mtp_layers else loss


def torch_transformer_run(spec: TransformerSpec, params: dict[str, np.ndarray], batches: Sequence[Batch],
                          optimizer: OptimizerConfig, micro_batch: int = 1, seed: int = 0, starts: Starts = None
                          ) -> OracleRun:
    """One torch optimizer step per batch from the executor's initial weights `params` (`starts`:
    `result.Starts`)."""
    torch = require_torch()
    missing = unsupported(spec)
    if missing:
        raise OracleUnavailable(f"the torch oracle does not build {', '.join(missing)}: the executor has no "
                                "parameters for it (verify with --oracle numpy proves the sharding only)")
    named = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params.items()}
    model = _Model(torch, spec, named)
    return train_torch(torch, named, model.loss, batches, optimizer, lambda _name, a: a, starts)
