"""Pipeline split by FLOPs and tensor-parallel roles of networks (plan/net_layout.py, net_tp.py)."""

from __future__ import annotations

import pytest

from modelplan.count.network_tree import network_tree
from modelplan.errors import SpecError
from modelplan.plan.net_layout import network_stages, split_units
from modelplan.plan.net_tp import TpRole, assign_tp
from modelplan.specs.load import load_model
from modelplan.specs.network import NetworkSpec


def _nodes(spec):
    return tuple(n for u in network_tree(spec) for n in u)


def _roles(spec, tp):
    return {p: (r.role.value, r.gather_after) for p, r in assign_tp(_nodes(spec), tp).items()}


# Training FLOPs per sample of the 2-3-2-1 MLP's units, by hand (3x matmul + 2x elementwise):
# linear 2->3: 3*(2*2*3) + 2*3 = 42; sigmoid(3): 2*3 = 6; linear 3->2: 3*(2*3*2) + 2*2 = 40;
# sigmoid(2): 4; linear 2->1: 3*(2*2*1) + 2*1 = 14.
def test_mlp_two_stages_minimise_the_larger_stage():
    """[42+6 | 40+4+14] = 48 | 58 is the best 2-way cut (the others: 42|64, 88|18, 92|14)."""
    split = split_units(network_tree(load_model("mlp")), 2)
    assert split.bounds == (0, 2, 5)
    assert split.flops == (48, 58)


def test_mlp_three_stages_minimise_the_largest_stage():
    """[42 | 6+40 | 4+14] has bottleneck 46; no other 3-way cut goes below it."""
    split = split_units(network_tree(load_model("mlp")), 3)
    assert split.bounds == (0, 1, 3, 5)
    assert split.flops == (42, 46, 18)


def test_more_stages_than_units_is_a_one_line_error():
    """pp * vpp (6) > 5 units of the MLP."""
    with pytest.raises(SpecError, match=r"pp \* vpp \(6\) must not exceed the network's units \(5\)"):
        split_units(network_tree(load_model("mlp")), 6)


def test_textbook_mlp_tp3_splits_the_hidden_layer_by_columns_and_gathers():
    """tp 3 splits only the 3 hidden units (2 and 1 are not divisible): column + AllGather."""
    assert _roles(load_model("mlp"), 3) == {
        "0": ("column", False), "1": ("sharded", True),
        "2": ("replicated", False), "3": ("replicated", False), "4": ("replicated", False),
    }


def test_mlp_tp2_pairs_column_and_row():
    """tp 2: 3->2 column, 2->1 row: AllReduce of 1 output beats AllGather of 2 (2 < 2*1 is false)."""
    roles = _roles(load_model("mlp"), 2)
    assert roles["2"] == ("column", False) and roles["4"] == ("row", False)


def test_megatron_mlp_is_a_column_row_pair():
    """h -> 4h -> h (Shoeybi et al. 2019, fig. 3a): column then row, nothing gathered."""
    spec = NetworkSpec(input_shape=[5, 8], layers=[
        {"type": "linear", "out_features": 32}, {"type": "gelu"}, {"type": "linear", "out_features": 8}])
    assert _roles(spec, 4) == {"0": ("column", False), "1": ("sharded", False), "2": ("row", False)}


def test_conv_pair_shards_batchnorm_and_pooling_between():
    """conv (out split) -> bn -> relu -> maxpool -> conv (in split): BN and pool run on the slice."""
    spec = NetworkSpec(input_shape=[3, 8, 8], layers=[
        {"type": "conv2d", "out_channels": 4, "kernel_size": 3}, {"type": "batchnorm2d"}, {"type": "relu"},
        {"type": "maxpool2d", "kernel_size": 2}, {"type": "conv2d", "out_channels": 6, "kernel_size": 3}])
    assert [r[0] for r in _roles(spec, 2).values()] == ["column", "sharded", "sharded", "sharded", "row"]


def test_flatten_carries_a_channel_shard_into_a_row_parallel_linear():
    """conv (4 channels) -> pool -> flatten -> linear (4*2*2 = 16 inputs): channel blocks are
    contiguous feature blocks after flatten, so the linear layer is row-parallel."""
    spec = NetworkSpec(input_shape=[2, 6, 6], layers=[
        {"type": "conv2d", "out_channels": 4, "kernel_size": 3}, {"type": "maxpool2d", "kernel_size": 2},
        {"type": "flatten"}, {"type": "linear", "out_features": 3}])
    assert [r for r in _roles(spec, 2).values()] == [
        ("column", False), ("sharded", False), ("sharded", False), ("row", False)]


def test_layernorm_stops_a_shard_with_a_gather():
    """LayerNorm needs every feature: the column output is gathered before it."""
    spec = NetworkSpec(input_shape=[4], layers=[
        {"type": "linear", "out_features": 4}, {"type": "relu"}, {"type": "layernorm"}])
    assert _roles(spec, 2) == {"0": ("column", False), "1": ("sharded", True), "2": ("replicated", False)}


def test_recurrent_layers_are_replicated_under_tp():
    """LSTM/GRU/RNN run data- and pipeline-parallel only."""
    roles = assign_tp(_nodes(load_model("lstm-lm")), 2)
    assert roles["rnn"].role is TpRole.REPLICATED and roles["encoder"].role is TpRole.REPLICATED


def test_residual_branches_end_whole():
    """A BasicBlock: conv1/conv2 pair inside the main branch; the 1x1 shortcut gathers; add replicated."""
    spec = NetworkSpec(input_shape=[4, 6, 6], layers=[{"type": "residual", "activation": "relu", "main": [
        {"type": "conv2d", "name": "c1", "out_channels": 4, "kernel_size": 3, "padding": 1},
        {"type": "batchnorm2d", "name": "b1"}, {"type": "relu", "name": "r"},
        {"type": "conv2d", "name": "c2", "out_channels": 4, "kernel_size": 3, "padding": 1}],
        "shortcut": [{"type": "conv2d", "out_channels": 4, "kernel_size": 1}]}])
    roles = _roles(spec, 2)
    assert roles["0/c1"][0] == "column" and roles["0/c2"][0] == "row"
    assert roles["0/shortcut/0"] == ("column", True)
    assert roles["0/add"] == ("replicated", False)


def test_stages_report_their_units_and_shapes():
    """LeNet in 2 stages: the boundary activation is the first stage's output."""
    stages = network_stages(network_tree(load_model("small-cnn")), 2, 1)
    assert stages[0].output_shape == stages[1].input_shape
    assert stages[0].units[0] == "conv1" and stages[1].units[-1] == "fc3"
