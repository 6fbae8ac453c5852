"""The network stack's ConvNeXt / MobileNet / squeeze-and-excitation pieces (specs/layers.py
layernorm2d, layerscale, relu6; specs/network.py Residual combine = "mul"): counts worked by hand,
and the executor's forward and gradients equal torch's autograd on the same modules."""

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
def test_forward_and_gradients_equal_torch():
    """Outputs, loss and every parameter gradient equal torch's forward and autograd (nn.ReLU6,
    nn.LayerNorm on channels-last data, x * gamma, x * gate)."""
    from test_net_torch import _close, to_torch, torch_step

    layers, ref, out, loss, grads, _ = torch_step(GATED)
    _close(ref.outputs, out, "outputs")
    assert ref.loss == pytest.approx(loss, rel=1e-12)
    kinds = {info.path: info.type for info in layers}
    for name, g in ref.grads.items():
        path, attr = name.rsplit("/", 1)
        _close(to_torch(kinds[path], attr, g), grads[name], name)
