"""HF Hiera (Ryali et al. 2023, "Hiera: A Hierarchical Vision Transformer without the Bells-and-
Whistles"; transformers 5.24 modeling_hiera.py HieraModel / HieraForImageClassification) as a network
spec (`specs.network`) on the spatial [C, H, W] map.

transformers runs Hiera on tokens "unrolled" so that each mask unit and each query_stride group is
contiguous; attention and pooling are over those groups and every other op is per token, so on the
map they are: the query pooling (the first layer of stages 1 .. num_query_pool) a query_stride max
pool of q and of the widened residual (proj), the mask-unit attention an `attend` within the
keys' mask-unit blocks (`Residual.window`, the unit's side at the current resolution), global
attention a plain `attend`. The embedding: the patch conv and the learned position table; per layer
x' = pool(proj(LN(x))) (or x) + proj(attend(q, k, v of LN(x))) and x' + fc2(act(fc1(LN(x')))), qkv
one Linear (here a 1x1 conv for q, max-pooled, and one for k, v: the same parameters). The head: the
mean over the tokens, LayerNorm, the classifier Linear.

Refused (one line): mask units other than query_stride ^ (stages - 1) (the unrolled order then groups
tokens that are no spatial block), non-square strides or units, grids the units or strides do not
divide; stochastic depth is the identity at inference and not modelled.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, network
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_swin import image_sides
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"hiera": ("HieraModel", "HieraForImageClassification")}
"""model_type -> the classes modelled (HieraForPreTraining's MAE decoder: refused)."""

DEFAULTS = {"hiera": {"embed_dim": 96, "image_size": [224, 224], "patch_size": [7, 7], "patch_stride": [4, 4],
                      "patch_padding": [3, 3], "mlp_ratio": 4.0, "depths": [2, 3, 16, 3], "num_heads": [1, 2, 4, 8],
                      "embed_dim_multiplier": 2.0, "num_query_pool": 3, "query_stride": [2, 2],
                      "masked_unit_size": [8, 8], "masked_unit_attention": [True, True, False, False],
                      "num_channels": 3, "hidden_act": "gelu", "layer_norm_eps": 1e-6}}
"""HieraConfig defaults (transformers 5.24 configuration_hiera.py)."""


def _conv(name: str, out: int) -> dict:
    return {"type": "conv2d", "name": name, "out_channels": out, "kernel_size": 1}


def layer(c: HFConfig, dim_in: int, dim: int, heads: int, stride: int, window: int) -> list[dict]:
    """HieraLayer on the map: the attention residual (query pooling by `stride`, `window` the key
    blocks' side, 0 global) and the MLP residual."""
    eps = c.number("layer_norm_eps", positive=True)
    norm = lambda name: {"type": "layernorm2d", "name": name, "eps": eps}  # noqa: E731
    pool = [{"type": "maxpool2d", "name": "query_pool", "kernel_size": stride}] if stride > 1 else []
    attend = {"type": "residual", "name": "attention", "combine": "attend", "heads": heads, "window": window,
              "main": [_conv("query", dim), *pool], "shortcut": [_conv("key_value", 2 * dim)]}
    attn = _seq([attend, _conv("output", dim)], "attn")  # attn.proj (named apart from the residual proj)
    if dim_in != dim:  # the widened residual: proj of the normed input, pooled
        first = [norm("layernorm_before"), {"type": "residual", "main": [attn], "shortcut": [
            _conv("proj", dim), *[{**p, "name": "residual_pool"} for p in pool]]}]
    else:
        first = [{"type": "residual", "main": [norm("layernorm_before"), attn]}]
    mlp = _seq([_conv("fc1", int(dim * c.number("mlp_ratio", positive=True))), {"type": activation(c), "name": "act"},
                _conv("fc2", dim)], "mlp")
    return [*first, {"type": "residual", "main": [norm("layernorm_after"), mlp]}]


def _pairs(c: HFConfig, key: str) -> int:
    """A square [n, n] field's n."""
    values = c.ints(key)
    if len(values) != 2 or values[0] != values[1] or values[0] < 1:
        raise SpecError(f"{c.source}: {key}: {values} (only square 2-d values are modelled)")
    return values[0]


def hiera(c: HFConfig) -> dict:
    """HieraModel (pooled, normed) or HieraForImageClassification, as a network spec."""
    name = architecture(c, "hiera", HEADS)
    c = with_defaults(c, "hiera", DEFAULTS)
    depths, heads, flags = c.ints("depths"), c.ints("num_heads"), c.data.get("masked_unit_attention")
    if len(heads) != len(depths) or not isinstance(flags, list) or len(flags) != len(depths) or min(depths) < 1:
        raise SpecError(f"{c.source}: num_heads: {heads} and masked_unit_attention {flags} need one entry per stage "
                        f"of depths {depths} (each >= 1)")
    stride, unit = _pairs(c, "query_stride"), _pairs(c, "masked_unit_size")
    k, s, pad = _pairs(c, "patch_size"), _pairs(c, "patch_stride"), _pairs(c, "patch_padding")
    grid = [(x + 2 * pad - k) // s + 1 for x in image_sides(c)]
    unrolled = stride ** (len(depths) - 1)  # HieraModel unrolls by query_stride once per stage but the last
    if any(flags) and unit != unrolled or any(g % unrolled or g % unit for g in grid):
        raise SpecError(f"{c.source}: masked_unit_size: {unit} x {unit} units need to equal query_stride ^ (stages "
                        f"- 1) = {unrolled} and divide the {grid[0]} x {grid[1]} token grid (with it the unrolled "
                        f"order); other layouts not modelled")
    pools = min(c.integer("num_query_pool"), len(depths) - 1)
    multiplier = c.number("embed_dim_multiplier", positive=True)
    dim, done, stages = c.size("embed_dim"), 0, []
    for i, depth in enumerate(depths):
        out = int(c.size("embed_dim") * multiplier ** i)
        blocks = []
        for j in range(depth):
            pooled = stride if j == 0 and 0 < i <= pools else 1
            if pooled > 1 and dim == out:
                raise SpecError(f"{c.source}: embed_dim_multiplier: stage {i} pools its queries without widening "
                                f"(transformers fails on that)")
            if out % heads[i]:
                raise SpecError(f"{c.source}: num_heads: {heads[i]} must divide stage {i}'s width {out}")
            masked = flags[i] or (j == 0 and flags[max(i - 1, 0)])
            window = unit // stride ** done if masked else 0
            blocks.append(_seq(layer(c, dim, out, heads[i], pooled, window)))
            done += pooled > 1
            dim = out
        stages.append(_seq([_seq(blocks, "layers")]))
    embeddings = [_seq([{"type": "conv2d", "name": "projection", "out_channels": c.size("embed_dim"), "kernel_size": k,
                         "stride": s, "padding": pad}], "patch_embeddings"),
                  {"type": "positionembedding", "name": "position_embeddings"}]
    layers = [_seq(embeddings, "embeddings"), _seq([_seq(stages, "stages")], "encoder"),
              {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"},
              {"type": "layernorm", "name": "layernorm", "eps": c.number("layer_norm_eps", positive=True)}]
    if name.endswith("ForImageClassification"):
        layers.append({"type": "linear", "name": "classifier", "out_features": labels(c)})
    return network(c, layers)


HIERA_MAPPERS = {"hiera": hiera}
