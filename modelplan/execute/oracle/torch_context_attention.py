"""torch modules of the context-vector attention leaves (`specs.context_attention`) for the network
oracle, written as transformers 5.24 writes them (modeling_mobilevitv2.py
MobileViTV2LinearSelfAttention after its qkv_proj, on F.unfold's patches; modeling_swiftformer.py
SwiftFormerEfficientAdditiveAttention after its to_query / to_key), in float64."""

from __future__ import annotations


def context_attention(torch, layer, shape: tuple[int, ...]):
    """The module of a separableattention / additiveattention leaf on [C_in, H, W] samples."""
    nn, F = torch.nn, torch.nn.functional
    c = (shape[0] - 1) // 2 if layer.type == "separableattention" else shape[0] // 2

    class Separable(nn.Module):
        def forward(self, x):
            n, _, h, w = x.shape
            p = layer.patch
            patches = F.unfold(x, (p, p), stride=(p, p)).reshape(n, x.shape[1], p * p, -1)
            query, key, value = torch.split(patches, [1, c, c], dim=1)
            scores = F.softmax(query, dim=-1)
            context = torch.sum(key * scores, dim=-1, keepdim=True)
            out = F.relu(value) * context.expand_as(value)
            return F.fold(out.reshape(n, c * p * p, -1), (h, w), (p, p), stride=(p, p))

    class Additive(nn.Module):
        def __init__(self):
            super().__init__()
            self.w_g = nn.Parameter(torch.zeros(c, 1, dtype=torch.float64))
            self.proj_weight = nn.Parameter(torch.zeros(c, c, dtype=torch.float64))
            self.proj_bias = nn.Parameter(torch.zeros(c, dtype=torch.float64))

        def forward(self, x):
            n = x.shape[0]
            tokens = x.flatten(2).transpose(1, 2)  # (N, P, 2 C)
            query, key = F.normalize(tokens[..., :c], dim=-1), F.normalize(tokens[..., c:], dim=-1)
            weights = (query @ self.w_g * c ** -0.5).softmax(dim=-1)
            global_queries = torch.sum(weights * query, dim=1, keepdim=True)
            out = F.linear(global_queries * key, self.proj_weight, self.proj_bias) + query
            return out.transpose(1, 2).reshape(n, c, *x.shape[2:])

    return Separable() if layer.type == "separableattention" else Additive()
