"""The network stack's attention and concatenation combines (specs/network.py Residual combine =
"attend", PVT / SegFormer spatial-reduction attention; combine = "concat", HGNetV2's aggregation)
and nn.ZeroPad2d, ViT's position table and class token (specs/layers.py zeropad2d, positionembedding,
clstoken, select), CvT's class-token stage (select runs, unflatten, concat along the positions, the
attend scale): counts worked by hand, one-line errors on mismatched
branches, and the executor's forward and gradients equal torch's autograd
(torch.nn.functional.scaled_dot_product_attention, torch.cat, nn.ZeroPad2d on the same weights)."""

from __future__ import annotations

import pytest

from modelplan.count.network import network_layers
from modelplan.errors import SpecError
from modelplan.specs.network import NetworkSpec

REDUCED = NetworkSpec(input_shape=[3, 8, 8], layers=[
    {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "stride": 2, "padding": 1},
    {"type": "layernorm2d"},
    {"type": "residual", "name": "block", "main": [
        {"type": "layernorm2d", "name": "norm"},
        {"type": "residual", "name": "attention", "combine": "attend", "heads": 2,
         "main": [{"type": "conv2d", "name": "query", "out_channels": 8, "kernel_size": 1}],
         "shortcut": [{"type": "conv2d", "out_channels": 8, "kernel_size": 2, "stride": 2}, {"type": "layernorm2d"},
                      {"type": "conv2d", "out_channels": 16, "kernel_size": 1}]},
        {"type": "conv2d", "name": "proj", "out_channels": 8, "kernel_size": 1}]},
    {"type": "residual", "name": "full", "combine": "attend", "heads": 4,
     "main": [{"type": "conv2d", "out_channels": 8, "kernel_size": 1}],
     "shortcut": [{"type": "adaptiveavgpool2d", "output_size": 3}, {"type": "conv2d", "out_channels": 16,
                                                                      "kernel_size": 1}, {"type": "gelu"}]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""A 4 x 4 grid of 8 channels: the first attention's keys and values come from a 2 x 2 strided conv
(a 2 x 2 grid), the second's from a pooled 3 x 3 grid."""


STACKED = NetworkSpec(input_shape=[3, 7, 7], layers=[
    {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1, "bias": False},
    {"type": "batchnorm2d"},
    {"type": "zeropad2d", "name": "pad", "padding": [0, 1, 0, 1]},
    {"type": "residual", "name": "stem", "combine": "concat",
     "main": [{"type": "conv2d", "out_channels": 2, "kernel_size": 2}, {"type": "relu"},
              {"type": "zeropad2d", "padding": [0, 1, 0, 1]}, {"type": "conv2d", "out_channels": 4, "kernel_size": 2}],
     "shortcut": [{"type": "maxpool2d", "kernel_size": 2, "stride": 1, "ceil_mode": True}]},
    {"type": "residual", "name": "dense", "combine": "concat", "main": [
        {"type": "conv2d", "out_channels": 3, "kernel_size": 3, "padding": 1}, {"type": "hardsigmoid"},
        {"type": "residual", "combine": "concat", "main": [{"type": "conv2d", "out_channels": 3, "kernel_size": 1}]}]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""HGNetV2's stem (a bottom / right pad, a 2x2 conv branch beside a 2x2 stride-1 max pool, stacked) on
a 4 x 4 map, then a nested [x, f1(x), f2(f1(x))] aggregation: 8 + 3 + 3 = 14 channels."""


TOKENS = NetworkSpec(input_shape=[3, 4, 4], layers=[
    {"type": "conv2d", "out_channels": 8, "kernel_size": 2, "stride": 2}, {"type": "positionembedding", "name": "pos"},
    {"type": "flatten", "start_dim": 1}, {"type": "clstoken", "name": "cls"}, {"type": "positionembedding"},
    {"type": "residual", "main": [{"type": "layernorm2d"}, {"type": "residual", "combine": "attend", "heads": 2,
                                   "main": [{"type": "conv1d", "out_channels": 8, "kernel_size": 1}],
                                   "shortcut": [{"type": "conv1d", "out_channels": 16, "kernel_size": 1}]}]},
    {"type": "select", "name": "first", "index": 0}, {"type": "linear", "out_features": 3},
])
"""PVT's last stage: a 2 x 2 map with its position table, flattened to 4 tokens, the class token put
first (5 tokens), a 5-position table, attention over the tokens, the class token's output."""


CLASS_TOKEN_CONV = NetworkSpec(input_shape=[3, 8, 8], layers=[
    {"type": "conv2d", "out_channels": 4, "kernel_size": 2, "stride": 2}, {"type": "flatten", "start_dim": 1},
    {"type": "clstoken", "name": "cls"},
    {"type": "residual", "name": "attn", "combine": "attend", "heads": 2, "scale": 0.5,
     "main": [{"type": "conv1d", "out_channels": 4, "kernel_size": 1}],
     "shortcut": [{"type": "residual", "name": "proj", "combine": "concat", "axis": -1,
                   "shortcut": [{"type": "select", "length": 1}],
                   "main": [{"type": "select", "name": "map", "index": 1, "length": 0}, {"type": "unflatten", "name": "grid"},
                            {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1, "groups": 4},
                            {"type": "flatten", "start_dim": 1}]},
                  {"type": "conv1d", "out_channels": 8, "kernel_size": 1}]},
    {"type": "select", "index": 1, "length": 0}, {"type": "unflatten", "name": "back", "sizes": [2, 8]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""CvT's class-token stage: a 4 x 4 map as 16 tokens behind the class token; the keys' and values'
depthwise conv takes the 16 map positions (as a square grid), strides them to 2 x 2 and puts the class
token back first (5 positions); the attention scores scaled by 0.5, not 1 / sqrt(2); the map handed on
as a 2 x 8 grid."""


def test_class_token_conv_by_hand():
    """Selecting from 1 to the end keeps 16 of 17 positions, the square grid is 4 x 4, the conv's 2 x 2
    stacks after the token's 1 along the positions (5); 2 heads x 17 queries x 5 keys = 170 scores;
    slicing, reshaping and stacking cost no FLOPs."""
    rows = {row.path: row for row in network_layers(CLASS_TOKEN_CONV)}
    assert rows["attn/proj/map"].output_shape == (4, 16) and rows["attn/proj/grid"].output_shape == (4, 4, 4)
    assert rows["attn/proj/concat"].output_shape == (4, 5) and rows["attn/proj/shortcut/0"].output_shape == (4, 1)
    assert rows["attn/attend"].input_shape == (8, 5) and rows["attn/attend"].matmul_flops == 2 * 170 * (2 + 2)
    assert rows["back"].output_shape == (4, 2, 8)
    for path in ("attn/proj/map", "attn/proj/grid", "attn/proj/concat", "back"):
        assert rows[path].forward_flops == 0 and rows[path].params == 0


@pytest.mark.parametrize("layers, message", [
    ([{"type": "flatten", "start_dim": 1}, {"type": "unflatten", "sizes": [3, 3]}], r"sizes \[3, 3\] must multiply"),
    ([{"type": "flatten", "start_dim": 1}, {"type": "select", "index": 10, "length": 8}], "8 positions from index 10"),
    ([{"type": "residual", "combine": "concat", "axis": -1, "main": [{"type": "conv2d", "out_channels": 2,
                                                                         "kernel_size": 1}]}], "but axis -1"),
])
def test_positions_errors(layers, message):
    """A grid that is not the sequence's length, a run past its end, stacks that differ off the axis:
    one-line errors naming the numbers."""
    with pytest.raises((SpecError, ValueError), match=message):
        NetworkSpec(input_shape=[4, 4, 4], layers=layers)


WINDOWED = NetworkSpec(input_shape=[3, 8, 8], layers=[
    {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1},
    {"type": "residual", "name": "pooled", "combine": "attend", "heads": 2, "window": 2,
     "main": [{"type": "conv2d", "out_channels": 4, "kernel_size": 1}, {"type": "maxpool2d", "kernel_size": 2}],
     "shortcut": [{"type": "conv2d", "out_channels": 8, "kernel_size": 1}]},
    {"type": "residual", "name": "units", "main": [{"type": "residual", "name": "mix", "combine": "attend", "heads": 1,
                                                    "window": 1, "main": [{"type": "conv2d", "out_channels": 4,
                                                                            "kernel_size": 1}],
                                                    "shortcut": [{"type": "conv2d", "out_channels": 8, "kernel_size": 1}]}]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""Hiera's mask-unit attention on a 4 x 4 map: 2 x 2 blocks of keys, the queries max-pooled to a 2 x 2
grid (one query per block); then blocks of one key each on the 2 x 2 grid."""


def test_windowed_attend_by_hand():
    """4 blocks of 4 keys, one pooled query each: 2 heads x 4 x 4 = 32 scores of head dim 2; the 1 x 1
    blocks: 1 head x 4 queries x 1 key = 4 scores."""
    rows = {row.path: row for row in network_layers(WINDOWED)}
    assert rows["pooled/attend"].output_shape == (4, 2, 2)
    assert rows["pooled/attend"].matmul_flops == 2 * 32 * (2 + 2) and rows["units/mix/attend"].matmul_flops == 2 * 4 * 8


def test_windowed_attend_needs_whole_blocks():
    """A key grid the window does not divide is a one-line error naming both shapes."""
    with pytest.raises((SpecError, ValueError), match=r"window \(3\) needs"):
        NetworkSpec(input_shape=[8, 4, 4], layers=[{"type": "residual", "combine": "attend", "heads": 2, "window": 3,
                                                    "main": [{"type": "conv2d", "out_channels": 8, "kernel_size": 1}],
                                                    "shortcut": [{"type": "conv2d", "out_channels": 16,
                                                                  "kernel_size": 1}]}])


def test_tokens_by_hand():
    """The map's table holds 8 x 2 x 2 = 32, the class token 8, the sequence's table 8 x 5 = 40; each
    table adds 1 FLOP per element; the head reads the class token's 8 features."""
    rows = {row.path: row for row in network_layers(TOKENS)}
    assert rows["pos"].params == 32 and rows["pos"].forward_flops == 32 and rows["pos"].saved_elements == 0
    assert rows["cls"].params == 8 and rows["cls"].output_shape == (8, 5) and rows["cls"].forward_flops == 0
    assert rows["4"].params == 40 and rows["first"].output_shape == (8,)


def test_concat_and_pad_by_hand():
    """The pad makes 4 x 4 a 5 x 5 map; both stem branches return to 4 x 4 (2x2 kernels, stride 1),
    stacked 4 + 4 = 8 channels; the nested aggregation 8 + 3 + 3 = 14; pads and stacks cost no FLOPs
    and keep nothing for backward."""
    rows = {row.path: row for row in network_layers(STACKED)}
    assert rows["pad"].output_shape == (4, 5, 5)
    assert rows["stem/concat"].output_shape == (8, 4, 4)
    assert rows["dense/concat"].output_shape == (14, 4, 4) and rows["dense/2/concat"].output_shape == (6, 4, 4)
    for path in ("pad", "stem/concat", "dense/concat"):
        assert rows[path].forward_flops == 0 and rows[path].saved_elements == 0 and rows[path].params == 0


def test_concat_needs_one_grid():
    """Branches on different grids cannot be stacked: a one-line error naming both shapes."""
    with pytest.raises((SpecError, ValueError), match=r"residual, concat.*\[4, 2, 2\].*\[4, 4, 4\]"):
        NetworkSpec(input_shape=[4, 4, 4], layers=[{"type": "residual", "combine": "concat",
                                                    "main": [{"type": "maxpool2d", "kernel_size": 2}]}])


def test_attend_counts_by_hand():
    """heads 2, 16 query positions, 4 key positions, 8 channels: 2 x 16 x 4 = 128 scores; q k^T and
    p v 2 x 2 x 128 x 4 (head dim) FLOPs; the scale and softmax 6 per score; backward keeps q (8 x 16),
    k / v (16 x 4) and the probabilities (128); no parameters of its own."""
    rows = {row.path: row for row in network_layers(REDUCED)}
    attend = rows["block/attention/attend"]
    assert attend.input_shape == (16, 2, 2) and attend.output_shape == (8, 4, 4)
    assert attend.params == 0 and attend.matmul_flops == 2 * 2 * 128 * 4
    assert attend.forward_flops - attend.matmul_flops == 6 * 128
    assert attend.saved_elements == 8 * 16 + 16 * 4 + 128
    full = rows["full/attend"]  # 4 heads of 2 channels, 16 x 9 scores each
    assert full.matmul_flops == 2 * 2 * (4 * 16 * 9) * 2


PATCHED = NetworkSpec(input_shape=[3, 4, 6], layers=[
    {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "padding": 1},
    {"type": "residual", "name": "unfolded", "combine": "attend", "heads": 2, "patch": 2,
     "main": [{"type": "conv2d", "out_channels": 8, "kernel_size": 1}],
     "shortcut": [{"type": "conv2d", "out_channels": 16, "kernel_size": 1}]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""MobileViT's attention over unfolded 2 x 2 patches of a 4 x 6 map: the 4 offsets are 4 sequences of 6."""


def test_patched_attend_by_hand():
    """24 positions, each attends the 6 at its own offset of the 2 x 2 patches: 2 heads x 24 x 6 = 288
    scores of head dim 4."""
    attend = {row.path: row for row in network_layers(PATCHED)}["unfolded/attend"]
    assert attend.matmul_flops == 2 * 2 * 288 * 4 and attend.saved_elements == 8 * 24 + 16 * 24 + 288


BIASED = NetworkSpec(input_shape=[3, 8, 8], layers=[
    {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "stride": 2, "padding": 1, "bias": False},
    {"type": "batchnorm2d"}, {"type": "hardswish"},
    {"type": "residual", "name": "attn", "main": [{"type": "residual", "name": "mix", "combine": "attend", "heads": 2,
                                                   "offset_bias": 1,
                                                   "main": [{"type": "conv2d", "out_channels": 4, "kernel_size": 1}],
                                                   "shortcut": [{"type": "conv2d", "out_channels": 12, "kernel_size": 1}]},
                                                  {"type": "hardswish"}, {"type": "conv2d", "out_channels": 8,
                                                                          "kernel_size": 1}]},
    {"type": "residual", "name": "down", "combine": "attend", "heads": 2, "offset_bias": 2,
     "main": [{"type": "conv2d", "out_channels": 4, "kernel_size": 1, "stride": 2}],
     "shortcut": [{"type": "conv2d", "out_channels": 20, "kernel_size": 1}]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""LeViT's attention on a 4 x 4 grid: keys of 2 channels a head, values of 4 (C_v = 2 C), a bias per
head and (|row offset|, |column offset|); then the subsampling attention, queries on every second
position (a 2 x 2 grid), values of 8 a head."""


def test_levit_attention_by_hand():
    """Same grid: offsets 0..3 on each axis, 16 per head; subsampled queries at rows 0 and 2 of 4 keys:
    |0 - k| and |2 - k| give 0..3, 16 per head again. The first attend: 2 heads x 16 x 16 = 512 scores,
    q k^T over 2 channels and p v over 4 a head: 2 x 512 x (2 + 4) FLOPs; its output 8 value channels."""
    rows = {row.path: row for row in network_layers(BIASED)}
    mix, down = rows["attn/mix/attend"], rows["down/attend"]
    assert mix.param_shapes == {"attention_biases": (2, 16)} and mix.output_shape == (8, 4, 4)
    assert mix.matmul_flops == 2 * 512 * (2 + 4) and mix.forward_flops - mix.matmul_flops == 7 * 512
    assert down.param_shapes == {"attention_biases": (2, 16)} and down.output_shape == (16, 2, 2)
    assert rows["2"].forward_flops == 8 * 16 and rows["2"].saved_elements == 8 * 16  # hardswish keeps its input


def test_attend_needs_stacked_keys_and_values():
    """A shortcut that does not give 2 C channels is a one-line error naming both shapes."""
    with pytest.raises((SpecError, ValueError), match=r"residual, attend.*\[8, 4, 4\].*\[8, 4, 4\]"):
        NetworkSpec(input_shape=[8, 4, 4], layers=[{"type": "residual", "combine": "attend", "heads": 2,
                                                    "main": [{"type": "conv2d", "out_channels": 8, "kernel_size": 1}]}])


def test_heads_only_with_attend():
    """heads is set exactly when combine is 'attend', patch only then; patch must divide the grid."""
    with pytest.raises(ValueError, match="heads"):
        NetworkSpec(input_shape=[8, 4, 4], layers=[{"type": "residual", "heads": 2, "main": [{"type": "relu"}]}])
    with pytest.raises(ValueError, match="patch"):
        NetworkSpec(input_shape=[8, 4, 4], layers=[{"type": "residual", "patch": 2, "main": [{"type": "relu"}]}])
    with pytest.raises((SpecError, ValueError), match="patch \\(3\\) needs"):
        NetworkSpec(input_shape=[8, 4, 4], layers=[{"type": "residual", "combine": "attend", "heads": 2, "patch": 3,
                                                    "main": [{"type": "conv2d", "out_channels": 8, "kernel_size": 1}],
                                                    "shortcut": [{"type": "conv2d", "out_channels": 16,
                                                                  "kernel_size": 1}]}])


@pytest.mark.torch
@pytest.mark.parametrize("spec", [REDUCED, PATCHED, BIASED, STACKED, TOKENS, CLASS_TOKEN_CONV, WINDOWED],
                         ids=["attend", "patched", "levit", "concat", "tokens", "class-token-conv", "windowed"])
def test_forward_and_gradients_equal_torch(spec):
    """Outputs, loss and every parameter gradient equal torch's forward and autograd."""
    from test_net_torch import assert_step_equals_torch

    assert_step_equals_torch(spec)
