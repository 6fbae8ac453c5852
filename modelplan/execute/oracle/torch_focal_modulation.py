"""torch module of the focal modulation leaf (`specs.focal_modulation`) for the network oracle,
written as transformers 5.24 modeling_focalnet.py FocalNetModulation.forward writes it (after
projection_in), in float64; its parameters flat, under the executor's names."""

from __future__ import annotations


def focal_modulation(torch, layer, shape: tuple[int, ...]):
    """The module of a focalmodulation leaf on [2 C + L + 1, H, W] samples."""
    nn, F = torch.nn, torch.nn.functional
    levels = layer.focal_level
    c = (shape[0] - levels - 1) // 2

    class FocalModulation(nn.Module):
        def __init__(self):
            super().__init__()
            for level, k in enumerate(layer.kernels()):
                self.register_parameter(f"focal_weight_{level}", nn.Parameter(torch.zeros(c, 1, k, k, dtype=torch.float64)))
            self.context_weight = nn.Parameter(torch.zeros(c, c, 1, 1, dtype=torch.float64))
            self.context_bias = nn.Parameter(torch.zeros(c, dtype=torch.float64))

        def forward(self, x):
            q, ctx, gates = torch.split(x, (c, c, levels + 1), 1)
            ctx_all = 0
            for level, k in enumerate(layer.kernels()):
                ctx = F.gelu(F.conv2d(ctx, getattr(self, f"focal_weight_{level}"), padding=k // 2, groups=c))
                ctx_all = ctx_all + ctx * gates[:, level:level + 1]
            ctx_global = F.gelu(ctx.mean(2, keepdim=True).mean(3, keepdim=True))
            ctx_all = ctx_all + ctx_global * gates[:, levels:]
            if layer.normalize_modulator:
                ctx_all = ctx_all / (levels + 1)
            return q * F.conv2d(ctx_all, self.context_weight, self.context_bias)

    return FocalModulation()
