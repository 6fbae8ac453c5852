"""`verify` on networks: every parallelism against the single-device step, and checks broken on purpose.

The expected values are the single-device reference (the same layers run whole on one device)
and the plan's own data (communication list, held elements, schedule); verify passes only when
every row does, so each test asserts `report.passed` and names the rows it relies on.
"""

from __future__ import annotations

import numpy as np
import pytest

import modelplan.execute.net.verify as net_verify
from modelplan.count.network import count_network_params, network_layers
from modelplan.errors import SpecError
from modelplan.execute.net.scale import scale_network
from modelplan.execute.net.tensor_parallel import NetTensorParallel
from modelplan.execute.verify import verify
from modelplan.specs.load import load_model
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec


def run(spec, global_batch=4, **plan):
    return verify(spec, TrainingSpec(global_batch=global_batch, optimizer="adamw"), Plan(**plan))


def rows(report):
    return {r.name: r for r in report.rows}


def failed(report):
    return [f"{r.name}: {r.detail}" for r in report.rows if not r.passed]


def test_textbook_mlp_tp3_passes_with_an_allgather():
    """2-3-2-1 MLP, tp 3: hidden 3 split by columns, AllGather; no AllReduce over tp at all."""
    report = run(load_model("mlp"), global_batch=2, tp=3)
    assert report.passed, failed(report)
    names = rows(report)
    assert "bytes all_gather/tp" in names and "bytes all_reduce/tp" not in names


def test_mlp_dp2_passes():
    """2-3-2-1 MLP, dp 2: gradients all-reduced and averaged."""
    report = run(load_model("mlp"), dp=2)
    assert report.passed, failed(report)
    assert "bytes all_reduce/dp" in rows(report)


def test_small_cnn_dp2_pp2_passes():
    """LeNet-5, dp 2 x pp 2 with 1F1B over 2 micro-batches per replica."""
    report = run(load_model("small-cnn"), global_batch=4, dp=2, pp=2)
    assert report.passed, failed(report)
    assert rows(report)["bubble fraction"].expected == pytest.approx(1 / 2)  # (p-1)/m = 1/2


def test_resnet18_scaled_dp2_pp2_passes():
    """ResNet-18 with fewer channels on small images, dp 2 x pp 2, BatchNorm per micro-batch."""
    report = run(load_model("resnet-18"), global_batch=8, dp=2, pp=2, micro_batch=2)
    assert report.passed, failed(report)
    assert any("pipeline stages" in n for n in report.notes)


def test_resnet50_scaled_tp2_pp2_passes_every_step():
    """`verify resnet-50 --tp 2 --pp 2` (global batch 4, micro-batch 1): every step's gradients and
    updates equal the reference's from the same weights within 1e-9. Regression: the oracle ran
    free from its own weights, and the two float64 trajectories parted (gradients 1.6e-8 apart at
    step 2, 6e-5 at step 3, under SGD too) while each step's gradients from the same weights
    agree to 3e-11."""
    report = run(load_model("resnet-50"), global_batch=4, tp=2, pp=2, micro_batch=1)
    assert report.passed, failed(report)
    got = rows(report)
    assert got["gradients"].detail.startswith("3 steps") and got["gradients"].measured < 1e-9


def test_scaling_keeps_the_resnet_structure():
    """Same leaves in the same order (every conv, BN, block, pool), far fewer parameters."""
    full = load_model("resnet-18")
    small = scale_network(full, Plan(dp=2, pp=2))
    assert [r.type for r in network_layers(small)] == [r.type for r in network_layers(full)]
    assert count_network_params(small).total < count_network_params(full).total / 100


LSTM = NetworkSpec(input_shape=[5], layers=[
    {"type": "embedding", "name": "encoder", "num_embeddings": 12, "embedding_dim": 4},
    {"type": "lstm", "name": "rnn", "hidden_size": 6, "num_layers": 2, "dropout": 0.3},
    {"type": "dropout", "name": "drop", "p": 0.2},
    {"type": "linear", "name": "decoder", "out_features": 12},
])


def test_two_layer_lstm_dp2_pp2_passes():
    """2-layer LSTM language model with dropout masks, dp 2 x pp 2 (BPTT on each stage)."""
    report = run(LSTM, global_batch=8, dp=2, pp=2)
    assert report.passed, failed(report)


CONVS = NetworkSpec(input_shape=[3, 8, 8], layers=[
    {"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1}, {"type": "batchnorm2d"},
    {"type": "relu"}, {"type": "conv2d", "out_channels": 6, "kernel_size": 3, "stride": 2},
    {"type": "relu"}, {"type": "conv2d", "out_channels": 4, "kernel_size": 1},
    {"type": "adaptiveavgpool2d", "output_size": 2}, {"type": "flatten"}, {"type": "layernorm"},
    {"type": "linear", "out_features": 5},
])


def test_conv_tp2_passes():
    """Convolutions with tp 2: output-channel split, sharded BatchNorm, input-channel split (AllReduce);
    the 1x1 conv's channels are pooled and flattened on their slice, gathered before LayerNorm."""
    report = run(CONVS, global_batch=4, tp=2, micro_batch=2)
    assert report.passed, failed(report)
    names = rows(report)
    assert "bytes all_reduce/tp" in names and "bytes all_gather/tp" in names


def test_everything_together_passes():
    """tp 2 x pp 2 x dp 2, interleaved 1F1B with 2 chunks, ZeRO 3, on the conv stack."""
    report = run(CONVS, global_batch=8, tp=2, pp=2, dp=2, vpp=2, schedule="interleaved", zero=3)
    assert report.passed, failed(report)


def test_skipping_the_allgather_fails(monkeypatch):
    """Each rank tiles its own slice instead of gathering: outputs, gradients and the ledger break."""
    original = NetTensorParallel.after_forward

    def no_gather(self, node, y, p):
        r = self._role(node)
        if r.gather_after:
            return np.concatenate([y] * self.tp, axis=r.axis)  # no communication
        return original(self, node, y, p)

    monkeypatch.setattr(NetTensorParallel, "after_forward", no_gather)
    report = run(load_model("mlp"), global_batch=2, tp=3)
    names = rows(report)
    assert not report.passed
    assert not names["loss"].passed and not names["gradients"].passed
    assert not names["bytes all_gather/tp"].passed


def test_a_communication_list_that_drifts_fails(monkeypatch):
    """A list that forgets the pipeline sends no longer matches the ledger."""
    real = net_verify.net_communication_list

    def drifted(*args, **kwargs):
        return [it for it in real(*args, **kwargs) if it.op.value != "send_recv"]

    monkeypatch.setattr(net_verify, "net_communication_list", drifted)
    report = run(load_model("mlp"), pp=2)
    assert not rows(report)["bytes send_recv/pp"].passed
    assert rows(report)["gradients"].passed


def test_context_parallel_is_rejected_for_networks():
    """cp is a transformer (sequence) split: a one-line error names it."""
    with pytest.raises(SpecError, match=r"cp \(2\) > 1 applies to transformers"):
        run(load_model("mlp"), global_batch=2, cp=2)
