"""Network spec: layer union, shape inference, paths and one-line validation errors.

Expected shapes come from torch's documented shape formulas, worked by hand in each test
(Conv2d: floor((L + 2p - d(k-1) - 1)/s) + 1).
"""

import pytest

from modelplan.errors import SpecError
from modelplan.specs.load import load_model, model_from_dict
from modelplan.specs.network import NetworkSpec
from modelplan.specs.network_walk import walk


def net(input_shape, *layers) -> NetworkSpec:
    """A network spec from raw layer tables, validated as a user's file would be."""
    return model_from_dict({"kind": "network", "input_shape": list(input_shape), "layers": list(layers)})


def shapes(spec: NetworkSpec) -> list[tuple[str, tuple[int, ...]]]:
    return [(leaf.path, leaf.output_shape) for leaf in walk(spec.layers, tuple(spec.input_shape))]


def spec_error(input_shape, *layers) -> str:
    """The message of the SpecError a bad stack raises; it must be one line."""
    with pytest.raises(SpecError) as info:
        net(input_shape, *layers)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_mlp_preset_shapes():
    """The 2-3-2-1 MLP: linear outputs 3, 2, 1; unnamed layers are named by position."""
    spec = load_model("mlp")
    assert isinstance(spec, NetworkSpec)
    assert shapes(spec) == [("0", (3,)), ("1", (3,)), ("2", (2,)), ("3", (2,)), ("4", (1,))]


def test_conv_and_pool_shapes_by_hand():
    """[3,32,32] conv k5 s1 p0 -> 28; maxpool 2 -> 14; conv k3 s2 p1 -> floor((14+2-2-1)/2)+1 = 7."""
    spec = net(
        [3, 32, 32],
        {"type": "conv2d", "out_channels": 8, "kernel_size": 5},
        {"type": "maxpool2d", "kernel_size": 2},
        {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1},
        {"type": "flatten"},
    )
    assert [s for _, s in shapes(spec)] == [(8, 28, 28), (8, 14, 14), (4, 7, 7), (196,)]


def test_conv_dilation_and_rectangular_kernel():
    """[2,20,30], kernel (3,5), dilation 2: 20 - 2*2 = 16, 30 - 2*4 = 22."""
    spec = net([2, 20, 30], {"type": "conv2d", "out_channels": 1, "kernel_size": [3, 5], "dilation": 2})
    assert shapes(spec)[0][1] == (1, 16, 22)


def test_conv_same_padding_keeps_size():
    """padding 'same' (stride 1) keeps the spatial size, as torch does."""
    spec = net([4, 9], {"type": "conv1d", "out_channels": 6, "kernel_size": 4, "padding": "same"})
    assert shapes(spec)[0][1] == (6, 9)


def test_maxpool_ceil_mode():
    """ceil_mode on 7 with kernel 2 stride 2: ceil(5/2)+1 = 4 (floor mode gives 3)."""
    spec = net([1, 7], {"type": "maxpool1d", "kernel_size": 2, "ceil_mode": True})
    assert shapes(spec)[0][1] == (1, 4)


def test_lstm_output_modes():
    """Bidirectional LSTM with proj: sequence [seq, 2*proj]; 'last' drops the time axis."""
    layer = {"type": "lstm", "hidden_size": 8, "proj_size": 3, "bidirectional": True}
    assert shapes(net([10, 5], layer))[0][1] == (10, 6)
    assert shapes(net([10, 5], layer | {"output": "last"}))[0][1] == (6,)


def test_embedding_appends_dim():
    """Token ids [35] through an embedding of width 16 give [35, 16]."""
    spec = net([35], {"type": "embedding", "num_embeddings": 100, "embedding_dim": 16})
    assert shapes(spec)[0][1] == (35, 16)


def test_unnamed_repeat_splices_positions():
    """An unnamed repeat of [linear, relu] x 2 after one layer takes positions 1..4."""
    spec = net(
        [4],
        {"type": "linear", "out_features": 4},
        {"type": "repeat", "times": 2, "layers": [{"type": "linear", "out_features": 4}, {"type": "relu"}]},
    )
    assert [p for p, _ in shapes(spec)] == ["0", "1", "2", "3", "4"]


def test_named_repeat_is_a_sequential_of_copies():
    """A named repeat of one block puts copy i at <name>/i (torchvision's layer1/0/conv1)."""
    block = {"type": "residual", "main": [{"type": "linear", "name": "fc", "out_features": 4}]}
    spec = net([4], {"type": "repeat", "name": "layer1", "times": 2, "layers": [block]})
    assert [p for p, _ in shapes(spec)] == ["layer1/0/fc", "layer1/0/add", "layer1/1/fc", "layer1/1/add"]


def test_resnet18_paths_follow_torchvision():
    """Downsample and block paths match torchvision's module names with '/' for '.'."""
    paths = [p for p, _ in shapes(load_model("resnet-18"))]
    for expected in ["conv1", "layer1/1/conv2", "layer2/0/downsample/0", "layer2/0/act", "fc"]:
        assert expected in paths


def test_residual_shortcut_unnamed_items_under_shortcut():
    """Unnamed shortcut items sit at <block>/shortcut/<i>."""
    block = {
        "type": "residual",
        "main": [{"type": "linear", "out_features": 6}],
        "shortcut": [{"type": "linear", "out_features": 6}],
    }
    assert [p for p, _ in shapes(net([3], block))] == ["0/0", "0/shortcut/0", "0/add"]


def test_linear_in_features_mismatch_names_layer_and_numbers():
    """A given in_features that disagrees with the inferred size names both numbers."""
    message = spec_error(
        [784], {"type": "linear", "out_features": 10}, {"type": "linear", "in_features": 100, "out_features": 2}
    )
    assert "layer '1' (linear)" in message and "in_features (100)" in message and "(10)" in message


def test_conv_on_flat_input_is_rejected():
    """conv2d after a flatten reports the expected rank and the shape it got."""
    message = spec_error([3, 8, 8], {"type": "flatten"}, {"type": "conv2d", "out_channels": 2, "kernel_size": 3})
    assert "layer '1' (conv2d)" in message and "[192]" in message


def test_groups_must_divide_in_channels():
    """groups (4) with 6 input channels: 'groups (4) must divide in_channels (6)'."""
    message = spec_error([6, 8, 8], {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "groups": 4})
    assert "groups (4) must divide in_channels (6)" in message


def test_groups_must_divide_out_channels():
    """groups (4) with 6 output channels is rejected at the field level."""
    message = spec_error([8, 8, 8], {"type": "conv2d", "out_channels": 6, "kernel_size": 3, "groups": 4})
    assert "groups (4) must divide out_channels (6)" in message


def test_kernel_larger_than_input():
    """A 5x5 kernel on 3x3 without padding gives size -1: rejected with the numbers."""
    message = spec_error([1, 3, 3], {"type": "conv2d", "out_channels": 1, "kernel_size": 5})
    assert "output size -1 < 1" in message and "kernel 5" in message


def test_residual_branch_mismatch():
    """A main branch that changes width without a shortcut names both shapes."""
    message = spec_error([4], {"type": "residual", "main": [{"type": "linear", "out_features": 5}]})
    assert "main branch output [5] != shortcut output [4]" in message


def test_duplicate_names_rejected():
    """Two siblings named 'fc' collide."""
    message = spec_error(
        [4], {"type": "linear", "name": "fc", "out_features": 4}, {"type": "linear", "name": "fc", "out_features": 4}
    )
    assert "duplicate layer path 'fc'" in message


def test_embedding_must_be_first():
    """An embedding after a linear layer cannot read token ids."""
    message = spec_error([4], {"type": "linear", "out_features": 4}, {"type": "embedding", "num_embeddings": 5, "embedding_dim": 2})
    assert "must be the first layer" in message


def test_proj_size_only_for_lstm():
    """proj_size on a GRU is rejected."""
    message = spec_error([5, 3], {"type": "gru", "hidden_size": 4, "proj_size": 2})
    assert "proj_size (2) is only valid for lstm" in message


def test_nonpositive_size_rejected():
    """out_features 0 names the field path."""
    message = spec_error([4], {"type": "linear", "out_features": 0})
    assert "out_features" in message and "greater than 0" in message


def test_unknown_layer_type_rejected():
    """An unknown type lists the accepted ones on one line."""
    message = spec_error([4], {"type": "transformer"})
    assert "'transformer'" in message and "'linear'" in message


def test_layernorm_shape_mismatch():
    """normalized_shape [5] on a [3, 4] input names both."""
    message = spec_error([3, 4], {"type": "layernorm", "normalized_shape": [5]})
    assert "normalized_shape [5]" in message and "[3, 4]" in message


def test_rnn_needs_sequence_input():
    """An LSTM on a [3, 8, 8] image is rejected."""
    message = spec_error([3, 8, 8], {"type": "lstm", "hidden_size": 4})
    assert "[seq, features]" in message and "[3, 8, 8]" in message


@pytest.mark.parametrize("preset", ["mlp", "small-cnn", "lstm-lm", "resnet-18", "resnet-50"])
def test_network_presets_cite_a_source(preset):
    """Every network preset loads as kind 'network' and states where it comes from."""
    spec = load_model(preset)
    assert isinstance(spec, NetworkSpec) and spec.name == preset and len(spec.source) > 20


def test_lstm_lm_output_is_per_step_logits():
    """lstm-lm: 35 token ids -> [35, 650] embeddings -> LSTM [35, 650] -> logits [35, 10000]."""
    spec = load_model("lstm-lm")
    assert [s for _, s in shapes(spec)] == [(35, 650), (35, 650), (35, 650), (35, 650), (35, 10_000)]


def test_units_residual_block_is_one_unit_groups_are_transparent():
    """Units: a leaf outside blocks is one; a whole residual block is one; repeat copies are separate."""
    block = {"type": "residual", "main": [{"type": "linear", "out_features": 4}, {"type": "relu"}]}
    spec = net([4], {"type": "linear", "out_features": 4}, {"type": "repeat", "name": "blocks", "times": 2, "layers": [block]})
    leaves = walk(spec.layers, tuple(spec.input_shape))
    assert [(leaf.path, leaf.unit) for leaf in leaves] == [
        ("0", 0),
        ("blocks/0/0", 1), ("blocks/0/1", 1), ("blocks/0/add", 1),
        ("blocks/1/0", 2), ("blocks/1/1", 2), ("blocks/1/add", 2),
    ]
