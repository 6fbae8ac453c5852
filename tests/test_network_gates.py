"""The network stack's ConvNeXt / MobileNet / BiT / Swin / squeeze-and-excitation pieces
(specs/layers.py layernorm2d, layerscale, relu6, groupnorm, grn, windowattention, spacetodepth;
specs/network.py Residual combine = "mul" / "sub"): counts worked by hand, and the executor's forward and
gradients equal torch's autograd on the same modules (torch ops written from the definitions)."""

from __future__ import annotations

import pytest

from modelplan.count.network import count_network_params, network_layers
from modelplan.errors import SpecError
from modelplan.specs.network import NetworkSpec

GATED = NetworkSpec(input_shape=[3, 6, 6], layers=[
    {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1},
    {"type": "layernorm2d", "name": "norm"}, {"type": "relu6"},
    {"type": "residual", "name": "block", "main": [
        {"type": "conv2d", "name": "dw", "out_channels": 4, "kernel_size": 3, "padding": 1, "groups": 4},
        {"type": "residual", "name": "se", "combine": "mul", "main": [
            {"type": "adaptiveavgpool2d", "output_size": 1},
            {"type": "conv2d", "out_channels": 2, "kernel_size": 1}, {"type": "silu"},
            {"type": "conv2d", "out_channels": 4, "kernel_size": 1}, {"type": "sigmoid"}]},
        {"type": "layerscale", "name": "gamma"}]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])


WINDOWED = NetworkSpec(input_shape=[3, 10, 10], layers=[
    {"type": "conv2d", "out_channels": 8, "kernel_size": 2, "stride": 2}, {"type": "groupnorm", "num_groups": 2},
    {"type": "residual", "main": [{"type": "layernorm2d"}, {"type": "conv2d", "out_channels": 24, "kernel_size": 1},
                                  {"type": "windowattention", "name": "attn", "heads": 2, "window_size": 2},
                                  {"type": "conv2d", "out_channels": 8, "kernel_size": 1}]},
    {"type": "residual", "main": [{"type": "conv2d", "out_channels": 24, "kernel_size": 1},
                                  {"type": "windowattention", "heads": 2, "window_size": 3, "shift": 1},
                                  {"type": "conv2d", "out_channels": 8, "kernel_size": 1}]},
    {"type": "residual", "main": [{"type": "conv2d", "out_channels": 24, "kernel_size": 1, "bias": False},
                                  {"type": "windowattention", "heads": 2, "window_size": 3, "shift": 1, "cosine": True,
                                   "bias_mlp": 16, "qv_bias": True, "pretrained_window": 4},
                                  {"type": "layernorm2d"}]},
    {"type": "spacetodepth", "name": "merge"}, {"type": "layernorm2d"}, {"type": "grn", "name": "grn"},
    {"type": "residual", "name": "pooling", "combine": "sub",
     "main": [{"type": "avgpool2d", "kernel_size": 3, "stride": 1, "padding": 1}]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""A 5 x 5 grid: windows of 2 and 3 pad it to 6 x 6; the second attention is shifted (masked); the
third is Swin V2's (cosine, continuous position-bias MLP, q / v biases, post-norm)."""


def test_window_attention_counts_by_hand():
    """heads 2, window 2 on a 5 x 5 grid of 8 channels: padded to 6 x 6 = 36 tokens, 4 keys each:
    scores 2 x 36 x 4 = 288; q k^T and p v 2 x 2 x 288 x 4 (head dim) FLOPs; a (2 x 2 - 1)^2 x 2
    bias table; the merge of a 5 x 5 grid pads to 6 x 6: [32, 3, 3]."""
    rows = {row.path: row for row in network_layers(WINDOWED)}
    attn = rows["2/attn"]
    assert attn.params == 9 * 2 and attn.matmul_flops == 2 * 2 * 288 * 4
    assert attn.forward_flops - attn.matmul_flops == (1 + 1 + 5) * 288
    assert attn.saved_elements == 24 * 25 + 288
    assert rows["merge"].output_shape == (32, 3, 3)
    assert rows["1"].params == 16 and rows["1"].buffers == 0
    assert rows["grn"].params == 2 * 32 and rows["grn"].forward_flops == 6 * 32 * 9
    assert rows["pooling/sub"].forward_flops == 32 * 9 and rows["pooling/sub"].saved_elements == 0


def test_counts_by_hand():
    """layernorm2d holds weight and bias per channel (2 x 4), layerscale one gamma per channel (4);
    the gate product costs one FLOP per gated element (4 x 6 x 6) and keeps both factors (the
    4 x 1 x 1 gate and the 4 x 6 x 6 input), relu6 a 1-byte mask per element."""
    b = count_network_params(GATED).breakdown
    assert b["norm"] == 8 and b["block/gamma"] == 4
    rows = {row.path: row for row in network_layers(GATED)}
    assert rows["block/se/mul"].forward_flops == 144
    assert rows["block/se/mul"].saved_elements == 4 + 144
    assert rows["2"].saved_fixed_bytes == 144 and rows["2"].saved_elements == 0
    assert rows["block/gamma"].forward_flops == 144 and rows["block/gamma"].saved_elements == 144


def test_gate_must_broadcast():
    """A gate whose shape does not broadcast over the gated tensor is a one-line error."""
    with pytest.raises((SpecError, ValueError), match="does not broadcast"):
        NetworkSpec(input_shape=[4, 6, 6], layers=[{"type": "residual", "combine": "mul", "main": [
            {"type": "adaptiveavgpool2d", "output_size": 2}]}])


@pytest.mark.torch
@pytest.mark.parametrize("spec", [GATED, WINDOWED], ids=["gated", "windowed"])
def test_forward_and_gradients_equal_torch(spec):
    """Outputs, loss and every parameter gradient equal torch's forward and autograd (nn.ReLU6,
    nn.LayerNorm on channels-last data, x * gamma, x * gate, nn.GroupNorm, padded / shifted /
    masked window attention with its bias table or Swin V2's cosine / bias-MLP form, nn.PixelUnshuffle, ConvNeXt V2's GRN, PoolFormer's pool(x) - x)."""
    from test_net_torch import assert_step_equals_torch

    assert_step_equals_torch(spec)
