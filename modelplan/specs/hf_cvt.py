"""HF CvT (Wu et al. 2021, "CvT: Introducing Convolutions to Vision Transformers"; transformers 5.24
modeling_cvt.py CvtModel / CvtForImageClassification) as a network spec (`specs.network`).

Per stage: the convolutional token embedding (Conv2d(patch_sizes, patch_stride, patch_padding),
LayerNorm over the channels, dropout), then depth pre-norm layers: x + dense(attention(LayerNorm(x)))
and x + dense(GELU(dense(LayerNorm(x)))). The attention (CvtSelfAttention, Wu et al. sec. 3.2): q, k
and v each from a depthwise conv (kernel_qkv, bias-free) + BatchNorm ("dw_bn"; keys and values at
stride_kv) and a per-token Linear (a 1x1 conv), then softmax(q k^T * embed_dim ** -0.5) v over
num_heads heads (the `attend` residual with `scale`; the keys and values stacked by a `concat`).

A stage with cls_token runs on the [C, 1 + H W] sequence (Dosovitskiy et al. 2021's class token
first): its convolutional projections take the map positions (`select` from 1, `unflatten` to the
grid, the conv, flatten) and put the class token back before them (`concat` along the positions),
as CvtSelfAttention's torch.split / torch.cat do; the stage hands on the map without the token. The
classifier: LayerNorm of the last stage's class token (else of every map position, then their mean),
Linear. CvtModel's output is the last map.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import network
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_swin import image_sides
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"cvt": ("CvtModel", "CvtForImageClassification")}
"""model_type -> the classes modelled."""

DEFAULTS = {"cvt": {"num_channels": 3, "patch_sizes": [7, 3, 3], "patch_stride": [4, 2, 2], "patch_padding": [2, 1, 1],
                    "embed_dim": [64, 192, 384], "num_heads": [1, 3, 6], "depth": [1, 2, 10],
                    "mlp_ratio": [4.0, 4.0, 4.0], "attention_drop_rate": [0.0, 0.0, 0.0], "drop_rate": [0.0, 0.0, 0.0],
                    "qkv_bias": [True, True, True], "cls_token": [False, False, True],
                    "qkv_projection_method": ["dw_bn", "dw_bn", "dw_bn"], "kernel_qkv": [3, 3, 3],
                    "padding_kv": [1, 1, 1], "stride_kv": [2, 2, 2], "padding_q": [1, 1, 1], "stride_q": [1, 1, 1],
                    "image_size": 224}}
"""CvtConfig defaults (transformers 5.24 configuration_cvt.py; image_size: CvtConfig has none, the
checkpoints' preprocessors crop 224)."""

INTS = ("patch_sizes", "patch_stride", "patch_padding", "embed_dim", "num_heads", "depth", "kernel_qkv", "padding_kv",
        "stride_kv", "padding_q", "stride_q")
OTHERS = ("mlp_ratio", "attention_drop_rate", "drop_rate", "qkv_bias", "cls_token", "qkv_projection_method")
LN_EPS = 1e-5  # nn.LayerNorm(embed_dim)'s default: CvT's layer norms do not read layer_norm_eps


def _stages(c: HFConfig) -> list[dict]:
    """Per stage, every per-stage field (checked: one entry per stage of `depth`)."""
    lists = {key: c.ints(key) for key in INTS} | {key: c.data.get(key) for key in OTHERS}
    n = len(lists["depth"])
    bad = [k for k, v in lists.items() if not isinstance(v, list) or len(v) != n]
    if bad or min(lists["embed_dim"] + lists["num_heads"] + lists["patch_sizes"] + lists["kernel_qkv"]) < 1:
        raise SpecError(f"{c.source}: {(bad or ['embed_dim'])[0]}: every per-stage list needs {n} entries (one per "
                        f"depth entry), sizes and heads positive; got " + ", ".join(f"{k} {lists[k]}" for k in bad))
    stages = [{k: v[i] for k, v in lists.items()} for i in range(n)]
    for i, s in enumerate(stages):
        where = f"{c.source}: stage {i}"
        if s["qkv_projection_method"] != "dw_bn":
            raise SpecError(f"{where}: qkv_projection_method: '{s['qkv_projection_method']}' not modelled (transformers "
                            f"builds only 'dw_bn')")
        if s["stride_q"] != 1:
            raise SpecError(f"{where}: stride_q: {s['stride_q']} puts the queries on a smaller grid than the residual "
                            f"(transformers fails on that); 1 is")
        if s["embed_dim"] % s["num_heads"]:
            raise SpecError(f"{where}: num_heads: {s['num_heads']} must divide embed_dim {s['embed_dim']}")
        if 0 < s["depth"] <= i:
            raise SpecError(f"{where}: depth: {s['depth']} layers; CvtStage reads drop path rate {i} of them "
                            f"(transformers fails unless depth[{i}] is 0 or above {i})")
        if s["attention_drop_rate"]:
            raise SpecError(f"{where}: attention_drop_rate: dropout on the attention probabilities not modelled; 0 is")
        if s["cls_token"] and s["embed_dim"] != lists["embed_dim"][-1]:
            raise SpecError(f"{where}: cls_token: the token is embed_dim[-1] = {lists['embed_dim'][-1]} wide, the stage "
                            f"{s['embed_dim']} (transformers fails on that)")
        if not isinstance(s["mlp_ratio"], (int, float)) or isinstance(s["mlp_ratio"], bool) or s["mlp_ratio"] <= 0:
            raise SpecError(f"{where}: mlp_ratio: expected a positive number, got {s['mlp_ratio']!r}")
    return stages


def _unflatten(grid: tuple[int, int]) -> dict:
    """The map positions of a sequence as the grid (sizes left out where it is square)."""
    return {"type": "unflatten", **({} if grid[0] == grid[1] else {"sizes": list(grid)})}


def _drop(p: float) -> list[dict]:
    return [{"type": "dropout", "name": "dropout", "p": p}] if p else []


def projection(s: dict, which: str, stride: int, padding: int, grid: tuple[int, int] | None) -> list[dict]:
    """convolution_projection_<which> (depthwise conv + BatchNorm) and projection_<which> (a 1x1 conv);
    with `grid`, on the map positions of a [C, 1 + H W] sequence, the class token put back first."""
    dim, conv = s["embed_dim"], "conv1d" if grid else "conv2d"
    dw = [{"type": "conv2d", "name": "convolution", "out_channels": dim, "kernel_size": s["kernel_qkv"],
           "stride": stride, "padding": padding, "groups": dim, "bias": False},
          {"type": "batchnorm2d", "name": "normalization"}]
    if grid:
        dw = [{"type": "residual", "combine": "concat", "axis": -1, "shortcut": [{"type": "select", "length": 1}],
               "main": [{"type": "select", "index": 1, "length": 0}, _unflatten(grid), *dw,
                        {"type": "flatten", "start_dim": 1}]}]
    return [_seq(dw, f"convolution_projection_{which}"),
            {"type": conv, "name": f"projection_{which}", "out_channels": dim, "kernel_size": 1, "bias": s["qkv_bias"]}]


def layer(s: dict, grid: tuple[int, int] | None) -> list[dict]:
    """CvtLayer: the attention and MLP residuals (`grid`: the stage runs on the class-token sequence)."""
    dim, conv = s["embed_dim"], "conv1d" if grid else "conv2d"
    dense = lambda out: {"type": conv, "name": "dense", "out_channels": out, "kernel_size": 1}  # noqa: E731
    kv = lambda which: projection(s, which, s["stride_kv"], s["padding_kv"], grid)  # noqa: E731
    attend = {"type": "residual", "name": "attention", "combine": "attend", "heads": s["num_heads"],
              "scale": dim ** -0.5, "main": projection(s, "query", 1, s["padding_q"], grid),
              "shortcut": [{"type": "residual", "combine": "concat", "main": kv("value"), "shortcut": kv("key")}]}
    norm = lambda name: {"type": "layernorm2d", "name": name, "eps": LN_EPS}  # noqa: E731
    attention = _seq([attend, _seq([dense(dim), *_drop(s["drop_rate"])], "output")], "attention")
    return [{"type": "residual", "main": [norm("layernorm_before"), attention]},
            {"type": "residual", "main": [norm("layernorm_after"),
                                          _seq([dense(int(dim * s["mlp_ratio"])), {"type": "gelu", "name": "activation"}],
                                               "intermediate"),
                                          _seq([dense(dim), *_drop(s["drop_rate"])], "output")]}]


def cvt(c: HFConfig) -> dict:
    """CvtModel (the last map) or CvtForImageClassification, as a network spec."""
    name = architecture(c, "cvt", HEADS)
    c = with_defaults(c, "cvt", DEFAULTS)
    stages = _stages(c)
    sides, encoder = tuple(image_sides(c)), []
    for i, s in enumerate(stages):
        k, st, p = s["patch_sizes"], s["patch_stride"], s["patch_padding"]
        sides = tuple((x + 2 * p - k) // st + 1 for x in sides)
        if min(sides) < 1:
            raise SpecError(f"{c.source}: image_size: stage {i}'s embedding leaves a {sides[0]} x {sides[1]} grid")
        embed = [_seq([{"type": "conv2d", "name": "projection", "out_channels": s["embed_dim"], "kernel_size": k,
                        "stride": st, "padding": p},
                       {"type": "layernorm2d", "name": "normalization", "eps": LN_EPS}], "convolution_embeddings"),
                 *_drop(s["drop_rate"])]
        grid = sides if s["cls_token"] else None
        layers = [_seq(layer(s, grid)) for _ in range(s["depth"])]
        items = [_seq(embed, "embedding")]
        if grid:  # the tokens, the class token first; the map without it handed on
            items += [{"type": "flatten", "start_dim": 1}, {"type": "clstoken", "name": "cls_token"}]
        items.append(_seq(layers, "layers") if layers else None)
        last = i == len(stages) - 1 and name.endswith("ForImageClassification")
        if grid and not last:
            items += [{"type": "select", "index": 1, "length": 0}, _unflatten(grid)]
        encoder.append(_seq([item for item in items if item]))
    layers = [_seq([_seq(encoder, "stages")], "encoder")]
    if name.endswith("ForImageClassification"):
        head = [{"type": "select", "index": 0}, {"type": "layernorm", "name": "layernorm", "eps": LN_EPS}] \
            if stages[-1]["cls_token"] else [{"type": "layernorm2d", "name": "layernorm", "eps": LN_EPS},
                                            {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}]
        layers += [*head, {"type": "linear", "name": "classifier", "out_features": labels(c)}]
    return network(c, layers)


CVT_MAPPERS = {"cvt": cvt}
