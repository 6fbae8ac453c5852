"""The network stack's context-vector attention leaves (specs/context_attention.py: MobileViT V2's
separable self-attention, SwiftFormer's additive attention): counts worked by hand from the
transformers 5.24 forward they follow, one-line errors on bad inputs, and the executor's forward and
gradients equal torch's autograd on transformers' own formulation (execute/oracle/torch_context_attention.py:
F.unfold / F.fold patches, F.normalize, the softmax over w_g's size-1 axis)."""

from __future__ import annotations

import pytest

from modelplan.count.network import network_layers
from modelplan.errors import SpecError
from modelplan.specs.network import NetworkSpec

SEPARABLE = NetworkSpec(input_shape=[3, 4, 6], layers=[
    {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1},
    {"type": "residual", "name": "attention", "main": [
        {"type": "groupnorm", "num_groups": 1},
        {"type": "conv2d", "name": "qkv_proj", "out_channels": 9, "kernel_size": 1},
        {"type": "separableattention", "name": "mix", "patch": 2},
        {"type": "conv2d", "name": "out_proj", "out_channels": 4, "kernel_size": 1}]},
    {"type": "conv2d", "out_channels": 5, "kernel_size": 1}, {"type": "separableattention", "name": "whole"},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""MobileViT V2's attention on a 4 x 6 map over 2 x 2 patches (4 sequences of 6, q k v from 1 + 2 x 4 = 9
channels) in its pre-norm residual, then one over the whole map (1 + 2 x 2 channels)."""

ADDITIVE = NetworkSpec(input_shape=[3, 4, 4], layers=[
    {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1},
    {"type": "residual", "name": "block", "main": [
        {"type": "conv2d", "name": "to_query_key", "out_channels": 8, "kernel_size": 1},
        {"type": "additiveattention", "name": "attn"},
        {"type": "conv2d", "name": "final", "out_channels": 4, "kernel_size": 1}]},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""SwiftFormer's attention on a 4 x 4 map of 4 channels (q and k stacked: 8)."""


def test_separable_counts_by_hand():
    """24 positions, C = 4: softmax 5 x 24, then 4 x 4 x 24 (k s, the sum, relu, the product); keeps the
    9 x 24 input and the 24 scores; no parameters; output [4, 4, 6]."""
    mix = {row.path: row for row in network_layers(SEPARABLE)}["attention/mix"]
    assert mix.output_shape == (4, 4, 6) and mix.params == 0 and mix.matmul_flops == 0
    assert mix.forward_flops == 5 * 24 + 4 * 4 * 24 and mix.saved_elements == 9 * 24 + 24


def test_additive_counts_by_hand():
    """C = 4 over 16 positions: w_g 4 x 1, proj 4 x 4 + 4 (24 parameters); q^ @ w_g 2 x 4 x 16 and proj
    2 x 16 x 16 matmul FLOPs; 11 x 4 x 16 + 6 x 16 others; keeps the 8 x 16 input and proj's 4 x 16 input."""
    attn = {row.path: row for row in network_layers(ADDITIVE)}["block/attn"]
    assert attn.param_shapes == {"w_g": (4, 1), "proj_weight": (4, 4), "proj_bias": (4,)} and attn.params == 24
    assert attn.matmul_flops == 2 * 4 * 16 + 2 * 16 * 16
    assert attn.forward_flops - attn.matmul_flops == 11 * 4 * 16 + 6 * 16
    assert attn.saved_elements == 8 * 16 + 4 * 16


@pytest.mark.parametrize("layer, shape, message", [
    ({"type": "separableattention"}, [8, 4, 4], r"needs a \[1 \+ 2 C, H, W\] input"),
    ({"type": "separableattention", "patch": 3}, [9, 4, 4], r"patch \(3\) divides"),
    ({"type": "additiveattention"}, [7, 4, 4], r"needs a \[2 C, H, W\] input"),
])
def test_bad_inputs_are_one_line_errors(layer, shape, message):
    """An input the leaf cannot split is a one-line error naming the layer and its shape."""
    with pytest.raises((SpecError, ValueError), match=message):
        NetworkSpec(input_shape=shape, layers=[layer])


@pytest.mark.torch
@pytest.mark.parametrize("spec", [SEPARABLE, ADDITIVE], ids=["separable", "additive"])
def test_forward_and_gradients_equal_torch(spec):
    """Outputs, loss and every parameter gradient equal torch's forward and autograd."""
    from test_net_torch import assert_step_equals_torch

    assert_step_equals_torch(spec)


FOCAL = NetworkSpec(input_shape=[3, 6, 6], layers=[
    {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1},
    {"type": "residual", "name": "block", "main": [
        {"type": "conv2d", "name": "projection_in", "out_channels": 2 * 4 + 3, "kernel_size": 1},
        {"type": "focalmodulation", "name": "modulation", "focal_level": 2, "focal_window": 3},
        {"type": "conv2d", "name": "projection_out", "out_channels": 4, "kernel_size": 1}]},
    {"type": "conv2d", "out_channels": 2 * 4 + 2, "kernel_size": 1},
    {"type": "focalmodulation", "name": "normalized", "focal_level": 1, "focal_window": 1, "normalize_modulator": True},
    {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"}, {"type": "linear", "out_features": 3},
])
"""FocalNet's modulation on a 6 x 6 map of 4 channels: two levels of 3 x 3 and 5 x 5 depthwise kernels
(q, context and 3 gates: 11 channels); then one level of a 1 x 1 kernel, normalised."""


def test_focal_modulation_counts_by_hand():
    """C = 4, P = 36, kernels 3 and 5: weights 4 x 9 + 4 x 25, projection_context 16 + 4; matmul FLOPs
    2 x 4 x 36 x (9 + 25) + 2 x 16 x 36; other (3 x 2 + 5) x 4 x 36 + 4; keeps the 11 x 36 input, two
    pre-GELU maps and the aggregate (3 x 4 x 36)."""
    row = {row.path: row for row in network_layers(FOCAL)}["block/modulation"]
    assert row.param_shapes == {"focal_weight_0": (4, 1, 3, 3), "focal_weight_1": (4, 1, 5, 5),
                                "context_weight": (4, 4, 1, 1), "context_bias": (4,)}
    assert row.params == 36 + 100 + 20 and row.output_shape == (4, 6, 6)
    assert row.matmul_flops == 2 * 4 * 36 * (9 + 25) + 2 * 16 * 36
    assert row.forward_flops - row.matmul_flops == 11 * 4 * 36 + 4
    assert row.saved_elements == 11 * 36 + 3 * 4 * 36


def test_focal_modulation_needs_its_gates():
    """An input without 2 C + focal_level + 1 channels is a one-line error naming the layer."""
    with pytest.raises((SpecError, ValueError), match=r"needs a \[2 C \+ focal_level \+ 1, H, W\] input"):
        NetworkSpec(input_shape=[10, 4, 4], layers=[{"type": "focalmodulation", "focal_level": 2, "focal_window": 3}])
    with pytest.raises((SpecError, ValueError), match=r"kernels \[2\] .* must be odd"):
        NetworkSpec(input_shape=[10, 4, 4], layers=[{"type": "focalmodulation", "focal_level": 1, "focal_window": 2}])


@pytest.mark.torch
def test_focal_modulation_equals_torch():
    """Outputs, loss and every parameter gradient equal torch's forward and autograd (FocalNetModulation's ops)."""
    from test_net_torch import assert_step_equals_torch

    assert_step_equals_torch(FOCAL)
