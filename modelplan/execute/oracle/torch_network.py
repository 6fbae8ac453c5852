"""A network spec rebuilt from torch.nn modules: the torch oracle for MLP / CNN / RNN models.

Every leaf is the torch module of its spec type (nn.Linear, nn.Conv1d/2d, nn.BatchNorm1d/2d,
nn.LayerNorm, nn.Embedding, pools, activations, nn.Softmax, nn.Flatten, nn.RNN / nn.LSTM /
nn.GRU), residual blocks add their shortcut, and modules are nested under the spec's paths so
`named_parameters()` gives the executor's names. The executor's initial weights are copied in
(`to_torch` layout). The step's loss is the mean over the global batch's micro-batches of
F.cross_entropy or F.mse_loss on each, as the numpy reference computes it, because BatchNorm
normalises each micro-batch by its own statistics (training mode, as on each DDP replica).

Dropout draws its keep-mask from the executor's `dropout_keep` (seeded by layer path and
sample index): the masks are data both runs must share; the arithmetic on them is torch's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from modelplan.count.cross_attention import offset_index
from modelplan.count.network import network_layers
from modelplan.count.network_tree import network_tree
from modelplan.execute.net.model import concat_axis
from modelplan.execute.net.params import NetBatch, to_executor, to_torch
from modelplan.execute.net.saved import RunContext, dropout_keep
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle.torch_context_attention import context_attention
from modelplan.execute.oracle.torch_focal_modulation import focal_modulation
from modelplan.execute.oracle.result import OracleRun, OracleUnavailable, Starts, require_torch
from modelplan.execute.oracle.torch_train import load_weights, train_torch
from modelplan.specs.network import NetworkSpec


def _Hardsigmoid():
    """relu6(x + 3) / 6 from torch ops: nn.Hardsigmoid's backward multiplies by a float32 1 / 6 even in
    float64 (0.1666666716), 3e-8 off the exact gradient."""
    import torch

    class Hardsigmoid(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.relu6(x + 3.0) / 6.0

    return Hardsigmoid()


def _activation(nn, kind: str):
    return {"relu": nn.ReLU, "relu6": nn.ReLU6, "hardswish": nn.Hardswish, "hardsigmoid": _Hardsigmoid, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid,
            "silu": nn.SiLU}[kind]()


class _Builder:
    """torch modules for network-tree nodes; `ctx` is the current micro-batch's RunContext."""

    def __init__(self, torch) -> None:
        self.torch, self.nn = torch, torch.nn
        self.ctx = RunContext()

    def recurrent(self, layer, input_size: int):
        nn = self.nn
        if layer.dropout:
            raise OracleUnavailable(f"the torch oracle does not build {layer.type} dropout between layers "
                                    f"({layer.dropout}): nn.{layer.type.upper()} draws its own masks")
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[layer.type]
        kwargs = dict(num_layers=layer.num_layers, bidirectional=layer.bidirectional, bias=layer.bias,
                      batch_first=True)
        if layer.type == "lstm":
            kwargs["proj_size"] = layer.proj_size
        if layer.type == "rnn":
            kwargs["nonlinearity"] = layer.nonlinearity
        last = layer.output == "last"

        class Out(cls):
            def forward(self, x):
                y = super().forward(x)[0]  # (N, seq, directions * out)
                return y[:, -1] if last else y

        return Out(input_size, layer.hidden_size, **kwargs)

    def dropout(self, node):
        builder, torch, p = self, self.torch, node.layer.p

        class Dropout(self.nn.Module):
            def forward(self, x):
                if p == 0:
                    return x
                keep = dropout_keep(builder.ctx, node.path, node.info.input_shape, x.shape[0], p)
                return x * torch.from_numpy(keep) / (1.0 - p)  # inverted dropout (nn.Dropout)

        return Dropout()

    def channels_last(self, norm):
        """`norm` over the channel axis 1 (ConvNeXt's channels_first LayerNorm), as permutes around it."""
        nn = self.nn

        class ChannelNorm(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight, self.bias = norm.weight, norm.bias

            def forward(self, x):
                return norm(x.movedim(1, -1)).movedim(-1, 1)

        return ChannelNorm()

    def layer_scale(self, channels: int):
        """x * gamma per channel (axis 1)."""
        torch, nn = self.torch, self.nn

        class LayerScale(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(channels))

            def forward(self, x):
                return x * self.weight.reshape((1, -1) + (1,) * (x.ndim - 2))

        return LayerScale()

    def grn(self, channels: int):
        """ConvNextV2GRN on channels-first data: torch.linalg.vector_norm over the positions."""
        torch, nn = self.torch, self.nn

        class GRN(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight, self.bias = nn.Parameter(torch.zeros(channels)), nn.Parameter(torch.zeros(channels))

            def forward(self, x):
                g = torch.linalg.vector_norm(x, ord=2, dim=tuple(range(2, x.ndim)), keepdim=True)
                n = g / (g.mean(dim=1, keepdim=True) + 1e-6)
                shape = (1, -1) + (1,) * (x.ndim - 2)
                return self.weight.reshape(shape) * (x * n) + self.bias.reshape(shape) + x

        return GRN()

    def window_attention(self, layer, channels: int):
        """Swin's pad / shift / partition / biased, masked softmax attention / reverse / crop in torch ops."""
        torch, nn, w, shift, heads = self.torch, self.nn, layer.window_size, layer.shift, layer.heads
        from modelplan.execute.net.window_attention import log_coordinates, relative_index, shift_mask

        class WindowAttention(nn.Module):
            def __init__(self):
                super().__init__()
                m = layer.bias_mlp
                if layer.relative_bias and m:
                    self.cpb_fc1_weight, self.cpb_fc1_bias = nn.Parameter(torch.zeros(m, 2)), nn.Parameter(torch.zeros(m))
                    self.cpb_fc2_weight = nn.Parameter(torch.zeros(heads, m))
                elif layer.relative_bias:
                    self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * w - 1) ** 2, heads))
                if layer.cosine:
                    self.logit_scale = nn.Parameter(torch.zeros(heads, 1, 1))
                if layer.qv_bias:
                    self.q_bias, self.v_bias = nn.Parameter(torch.zeros(channels)), nn.Parameter(torch.zeros(channels))

            def table(self):
                if not layer.bias_mlp:
                    return self.relative_position_bias_table
                coords = torch.from_numpy(log_coordinates(w, layer.pretrained_window))
                hidden = torch.relu(coords @ self.cpb_fc1_weight.T + self.cpb_fc1_bias)
                return 16 * torch.sigmoid(hidden @ self.cpb_fc2_weight.T)

            def windows(self, t, hp, wp):  # (N, C, Hp, Wp) -> (N, nW, heads, T, d)
                t = torch.roll(t, (-shift, -shift), (2, 3)) if shift else t
                n, c = t.shape[:2]
                t = t.reshape(n, c, hp // w, w, wp // w, w).permute(0, 2, 4, 3, 5, 1).reshape(n, -1, w * w, c)
                return t.reshape(n, t.shape[1], w * w, heads, c // heads).transpose(2, 3)

            def forward(self, x):
                n, _, h, width = x.shape
                hp, wp = -(-h // w) * w, -(-width // w) * w
                q, k, v = x.chunk(3, dim=1)
                if layer.qv_bias:
                    q, v = q + self.q_bias.reshape(1, -1, 1, 1), v + self.v_bias.reshape(1, -1, 1, 1)
                x = torch.cat([q, k, v], dim=1)
                x = nn.functional.pad(x, (0, wp - width, 0, hp - h))
                q, k, v = (self.windows(t, hp, wp) for t in x.chunk(3, dim=1))
                if layer.cosine:  # Swinv2SelfAttention
                    q, k = nn.functional.normalize(q, dim=-1), nn.functional.normalize(k, dim=-1)
                    s = q @ k.transpose(-1, -2) * torch.clamp(self.logit_scale, max=math.log(100.0)).exp()
                else:
                    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
                if layer.relative_bias:
                    s = s + self.table()[torch.from_numpy(relative_index(w))].permute(2, 0, 1)
                if shift:
                    s = s + torch.from_numpy(shift_mask(w, shift, hp, wp))[:, None]
                o = (s.softmax(-1) @ v).transpose(2, 3).reshape(n, -1, w, w, x.shape[1] // 3)
                o = o.reshape(n, hp // w, wp // w, w, w, -1).permute(0, 5, 1, 3, 2, 4).reshape(n, -1, hp, wp)
                o = torch.roll(o, (shift, shift), (2, 3)) if shift else o
                return o[:, :, :h, :width]

        return WindowAttention()

    def token_layer(self, layer, shape):
        """ViT-style pieces: x + a learned table, a learned first token, the token at `index`."""
        nn, torch, t = self.nn, self.torch, layer.type

        class Token(nn.Module):
            def __init__(self):
                super().__init__()
                if t != "select":
                    size = tuple(shape) if t == "positionembedding" else (shape[0],)
                    self.weight = nn.Parameter(torch.zeros(size, dtype=torch.float64))

            def forward(self, x):
                if t == "positionembedding":
                    return x + self.weight
                if t == "clstoken":
                    return torch.cat([self.weight.expand(x.shape[0], -1)[:, :, None], x], dim=2)
                if layer.length is not None:  # a run of positions: torch.split's piece
                    start = layer.index % x.shape[-1]
                    return x[..., start:start + layer.length if layer.length else x.shape[-1]]
                return x[..., layer.index]

        return Token()

    def space_to_depth(self, block: int):
        """Zero-pad to multiples of block, then nn.PixelUnshuffle(block)."""
        nn = self.nn

        class SpaceToDepth(nn.Module):
            def forward(self, x):
                h, w = x.shape[2], x.shape[3]
                x = nn.functional.pad(x, (0, -w % block, 0, -h % block))
                return nn.functional.pixel_unshuffle(x, block)

        return SpaceToDepth()

    def leaf(self, node):
        nn, layer, shape = self.nn, node.layer, node.info.input_shape
        t = layer.type
        if t == "linear":
            return nn.Linear(shape[-1], layer.out_features, bias=layer.bias)
        if t in ("conv1d", "conv2d"):
            cls = nn.Conv1d if t == "conv1d" else nn.Conv2d
            return cls(shape[0], layer.out_channels, layer.kernel_size, stride=layer.stride, padding=layer.padding,
                       dilation=layer.dilation, groups=layer.groups, bias=layer.bias)
        if t.startswith("batchnorm"):
            return (nn.BatchNorm1d if t == "batchnorm1d" else nn.BatchNorm2d)(shape[0], eps=layer.eps,
                                                                               affine=layer.affine)
        if t == "layernorm":
            return nn.LayerNorm(layer.normalized_shape or shape[-1:], eps=layer.eps)
        if t == "layernorm2d":
            return self.channels_last(nn.LayerNorm(shape[0], eps=layer.eps))
        if t == "grn":
            return self.grn(shape[0])
        if t == "groupnorm":
            return nn.GroupNorm(layer.num_groups, shape[0], eps=layer.eps, affine=layer.affine)
        if t == "layerscale":
            return self.layer_scale(shape[0])
        if t == "windowattention":
            return self.window_attention(layer, shape[0] // 3)
        if t == "focalmodulation":
            return focal_modulation(self.torch, layer, shape)
        if t in ("separableattention", "additiveattention"):
            return context_attention(self.torch, layer, shape)
        if t == "spacetodepth":
            return self.space_to_depth(layer.block)
        if t == "unflatten":
            return nn.Unflatten(-1, tuple(node.info.output_shape[1:]))
        if t == "zeropad2d":
            return nn.ZeroPad2d(layer.padding)
        if t in ("positionembedding", "clstoken", "select"):
            return self.token_layer(layer, shape)
        if t == "embedding":
            return nn.Embedding(layer.num_embeddings, layer.embedding_dim)
        if t in ("maxpool1d", "maxpool2d", "avgpool1d", "avgpool2d"):
            cls = getattr(nn, {"max": "MaxPool", "avg": "AvgPool"}[layer.op] + t[-2:])
            return cls(layer.kernel_size, stride=layer.stride, padding=layer.padding, ceil_mode=layer.ceil_mode)
        if t.startswith("adaptiveavgpool"):
            return getattr(nn, "AdaptiveAvgPool" + t[-2:])(layer.output_size)
        if t == "softmax":
            return nn.Softmax(dim=layer.dim % len(shape) + 1)
        if t == "flatten":
            return nn.Flatten(layer.start_dim % len(shape) + 1, layer.end_dim % len(shape) + 1)
        if t in ("lstm", "gru", "rnn"):
            return self.recurrent(layer, shape[-1])
        if t == "dropout":
            return self.dropout(node)
        return _activation(nn, t)

    def modules(self, nodes) -> list:
        """(name, module) pairs of a node list, named like the executor's paths."""
        out = []
        for node in nodes:
            name = node.path.rsplit("/", 1)[-1]
            if hasattr(node, "main"):
                out.append((name, self.residual(node)))
            else:
                out.append((name, self.leaf(node)))
        return out

    def residual(self, node):
        """The block; its shortcut's modules sit under their own paths ('downsample/0' of
        torchvision's ResNet, 'shortcut/0' of an unnamed shortcut), as the executor names them."""
        nn = self.nn
        main = self.modules(node.main)
        shortcut = [m for _, m in self.modules(node.shortcut)]
        act = _activation(nn, node.act.layer.type) if node.act else None
        gated = node.add.info.type == "mul"  # a squeeze-and-excitation gate: y broadcast over s
        difference = node.add.info.type == "sub"
        heads = node.add.layer.heads if node.add.info.type == "attend" else 0
        patch = node.add.layer.patch if heads else 1
        stacked = node.add.info.type == "concat"
        dim = 1 + concat_axis(node.add) if stacked else 1
        scale = node.add.layer.scale if heads else None
        window = node.add.layer.window if heads else 0
        torch = self.torch
        bias_stride = node.add.layer.offset_bias if heads else 0
        if bias_stride:  # LeViT: attention_biases[:, index] added to the scores (the index is the table's layout)
            offsets, index = offset_index(node.add.info.output_shape[1:], node.add.info.input_shape[1:], bias_stride)
            bias_index = torch.tensor(index)

        def attend(q, kv, biases=None):  # per head softmax(q^T k / sqrt(d) + B) v, as torch's SDPA computes it;
            mask = None if biases is None else biases[:, bias_index]  # a float mask is added to the scores
            if patch > 1:  # a bool mask lets each position see only those at its own patch offset
                rows = torch.arange(q.shape[2]).repeat_interleave(q.shape[3]) % patch
                cols = torch.arange(q.shape[3]).repeat(q.shape[2]) % patch
                mask = (rows[:, None] == rows[None, :]) & (cols[:, None] == cols[None, :])
            if window:  # a bool mask lets each query see only the keys of its block
                nh, nw = kv.shape[2] // window, kv.shape[3] // window
                block = lambda h, w: ((torch.arange(h) // (h // nh))[:, None] * nw  # noqa: E731
                                      + torch.arange(w)[None, :] // (w // nw)).reshape(-1)
                mask = block(*q.shape[2:])[:, None] == block(*kv.shape[2:])[None, :]
            return attend_map(q, kv, mask)

        def attend_map(q, kv, mask=None):
            n, c = q.shape[:2]
            split = lambda t: t.reshape(n, heads, t.shape[1] // heads, -1).transpose(2, 3)  # noqa: E731  (N, h, pos, d)
            out = torch.nn.functional.scaled_dot_product_attention(split(q), split(kv[:, :c]), split(kv[:, c:]),
                                                                   attn_mask=mask, scale=scale)
            return out.transpose(2, 3).reshape(n, kv.shape[1] - c, *q.shape[2:])

        class Residual(nn.Module):
            def __init__(self):
                super().__init__()
                for item, (_, m) in zip(node.main, main):  # under its path in the block (nested groups too)
                    attach(nn, self, item.path[len(node.path) + 1:], m)
                for item, m in zip(node.shortcut, shortcut):
                    attach(nn, self, item.path[len(node.path) + 1:], m)
                if bias_stride:
                    self.attend = nn.Module()
                    self.attend.attention_biases = nn.Parameter(torch.zeros(heads, offsets, dtype=torch.float64))

            def forward(self, x):
                y, s = x, x
                for _, m in main:
                    y = m(y)
                for m in shortcut:
                    s = m(s)
                if heads:
                    y = attend(y, s, self.attend.attention_biases if bias_stride else None)
                elif stacked:
                    y = torch.cat([s, y], dim=dim)
                else:
                    y = y * s if gated else y - s if difference else y + s
                return act(y) if act is not None else y

        return Residual()


def attach(nn, parent, path: str, module) -> None:
    """Register `module` under `parent` at the slash path `path`, creating the modules between."""
    *between, name = path.split("/")
    for part in between:
        if not hasattr(parent, part):
            parent.add_module(part, nn.Module())
        parent = getattr(parent, part)
    parent.add_module(name, module)


def build_network(torch, nodes):
    """(root module holding every module under its path, modules in execution order)."""
    builder = _Builder(torch)
    root = torch.nn.Module()
    order = []
    for (_, module), node in zip(builder.modules(nodes), nodes):
        attach(torch.nn, root, node.path, module)
        order.append(module)
    return root, order, builder


def torch_network_run(spec: NetworkSpec, params: dict[str, np.ndarray], batches: Sequence[NetBatch],
                      optimizer: OptimizerConfig, micro_batch: int, seed: int = 0, starts: Starts = None
                      ) -> OracleRun:
    """One torch optimizer step per global batch, each the mean over its micro-batches (`starts`:
    `result.Starts`)."""
    torch = require_torch()
    F = torch.nn.functional
    layers = network_layers(spec)
    nodes = tuple(n for unit in network_tree(spec) for n in unit)
    root, order, builder = build_network(torch, nodes)
    root.double().train()
    kinds = {info.path: info.type for info in layers}
    named = {k.replace(".", "/"): v for k, v in root.named_parameters()}
    if set(named) != set(params):
        raise OracleUnavailable(f"torch modules hold {sorted(set(named) ^ set(params))[:3]} that the executor "
                                "does not (or the reverse)")

    def layout(name: str) -> tuple[str, str]:
        return kinds[name.rsplit("/", 1)[0]], name.rsplit("/", 1)[1]

    load_weights(torch, named, params, lambda n, a: to_torch(*layout(n), a))

    def loss_of(batch: NetBatch):
        total = batch.inputs.shape[0]
        chunks = total // micro_batch
        loss = 0.0
        for k in range(chunks):
            part = batch.rows(k * micro_batch, (k + 1) * micro_batch)
            builder.ctx = RunContext(seed, k * micro_batch, total)
            x = torch.from_numpy(part.inputs)
            for module in order:
                x = module(x)
            target = torch.from_numpy(part.targets)
            if batch.loss == "cross_entropy":
                part_loss = F.cross_entropy(x.reshape(-1, x.shape[-1]), target.reshape(-1))
            else:
                part_loss = F.mse_loss(x, target)
            loss = loss + part_loss / chunks
        return loss

    return train_torch(torch, named, loss_of, batches, optimizer, lambda n, a: to_executor(*layout(n), a), starts,
                       lambda n, a: to_torch(*layout(n), a))
