"""Network calculator: exact parameters, FLOPs and memory of MLPs, CNNs and RNNs.

Expected numbers come from hand formulas (shown in each test), published counts (torchvision's
ResNet-18 11,689,512 and ResNet-50 25,557,032) and PyTorch's own modules and FlopCounterMode.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelplan.count.network import (
    count_network_flops,
    count_network_memory,
    count_network_params,
    network_layers,
)
from modelplan.specs.load import load_model, model_from_dict
from modelplan.specs.training import TrainingSpec


def net(input_shape, *layers):
    return model_from_dict({"kind": "network", "input_shape": list(input_shape), "layers": list(layers)})


def lstm_params(inp, h, layers=1, d=1, bias=True, proj=0, gates=4):
    """Hand formula from the nn.LSTM/GRU/RNN docs: per layer and direction
    G*h*in (W_ih) + G*h*h_out (W_hh) + 2*G*h (b_ih, b_hh) + proj*h (W_hr); in = D*h_out after layer 0."""
    h_out = proj or h
    total = 0
    for k in range(layers):
        in_l = inp if k == 0 else d * h_out
        total += d * (gates * h * (in_l + h_out) + (2 * gates * h if bias else 0) + proj * h)
    return total


# --- parameters ------------------------------------------------------------------------------


def test_mlp_20_parameters():
    """2-3-2-1 MLP: 6 + 6 + 2 weights + 3 + 2 + 1 biases = 20."""
    count = count_network_params(load_model("mlp"))
    assert count.total == 6 + 6 + 2 + 3 + 2 + 1 == 20
    assert count.breakdown["0/weight"] == 6 and count.breakdown["2"] == 6 + 2 and count.breakdown["4/bias"] == 1


def test_resnet18_published_count():
    """torchvision.models.resnet18: 11,689,512 parameters (torchvision docs)."""
    assert count_network_params(load_model("resnet-18")).total == 11_689_512


def test_resnet50_published_count():
    """torchvision.models.resnet50: 25,557,032 parameters (torchvision docs)."""
    assert count_network_params(load_model("resnet-50")).total == 25_557_032


def test_small_cnn_count_by_hand():
    """LeNet-5 on 28x28: conv1 6*1*25+6, conv2 16*6*25+16, fc 400*120+120, 120*84+84, 84*10+10."""
    expected = (6 * 25 + 6) + (16 * 6 * 25 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)
    assert count_network_params(load_model("small-cnn")).total == expected == 61_706


def test_lstm_lm_count_by_hand():
    """Zaremba medium: 10000*650 embedding + 2-layer LSTM 650 + decoder 650*10000 + 10000."""
    expected = 10_000 * 650 + lstm_params(650, 650, layers=2) + 650 * 10_000 + 10_000
    assert count_network_params(load_model("lstm-lm")).total == expected == 19_780_400


@pytest.mark.torch
def test_lstm_lm_tensors_match_torch():
    """lstm-lm equals word_language_model's RNNModel parts (Embedding, LSTM, Linear) tensor by tensor."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    model = nn.Module()
    model.encoder = nn.Embedding(10_000, 650)
    model.rnn = nn.LSTM(650, 650, num_layers=2, dropout=0.5, batch_first=True)
    model.decoder = nn.Linear(650, 10_000)
    breakdown = count_network_params(load_model("lstm-lm")).breakdown
    expected = {n.replace(".", "/"): p.numel() for n, p in model.named_parameters()}
    assert {k: v for k, v in breakdown.items() if k.count("/") == 1} == expected


def test_breakdown_parents_are_sums():
    """Every parent key equals the sum of its direct tensor leaves (layer2/0/downsample)."""
    breakdown = count_network_params(load_model("resnet-18")).breakdown
    # downsample: conv 1x1 64->128 (8192) + BatchNorm 2*128 (256)
    assert breakdown["layer2/0/downsample/0/weight"] == 128 * 64
    assert breakdown["layer2/0/downsample"] == 128 * 64 + 2 * 128


RNN_CASES = [
    # (type, input, hidden, num_layers, bidirectional, bias, proj_size)
    ("lstm", 10, 20, 1, False, True, 0),
    ("lstm", 10, 20, 3, True, True, 0),
    ("lstm", 7, 16, 2, True, False, 5),
    ("lstm", 7, 16, 2, False, True, 4),
    ("gru", 10, 20, 2, True, True, 0),
    ("gru", 3, 5, 1, False, False, 0),
    ("rnn", 10, 20, 2, False, True, 0),
    ("rnn", 4, 6, 3, True, True, 0),
]


@pytest.mark.parametrize("kind, inp, h, layers, bidir, bias, proj", RNN_CASES)
def test_recurrent_count_hand_formula(kind, inp, h, layers, bidir, bias, proj):
    """nn.LSTM/GRU/RNN counts: G*(h*(in + h_out) + 2h) + proj*h per layer and direction."""
    spec = net([5, inp], {"type": kind, "hidden_size": h, "num_layers": layers, "bidirectional": bidir, "bias": bias, "proj_size": proj})
    gates = {"lstm": 4, "gru": 3, "rnn": 1}[kind]
    expected = lstm_params(inp, h, layers, 2 if bidir else 1, bias, proj, gates)
    assert count_network_params(spec).total == expected


@pytest.mark.torch
@pytest.mark.parametrize("kind, inp, h, layers, bidir, bias, proj", RNN_CASES)
def test_recurrent_tensors_match_torch(kind, inp, h, layers, bidir, bias, proj):
    """Every tensor name and size equals torch.nn.LSTM/GRU/RNN's named_parameters()."""
    torch = pytest.importorskip("torch")
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind]
    extra = {"proj_size": proj} if proj else {}
    module = cls(inp, h, num_layers=layers, bidirectional=bidir, bias=bias, batch_first=True, **extra)
    spec = net([5, inp], {"type": kind, "name": "rnn", "hidden_size": h, "num_layers": layers, "bidirectional": bidir, "bias": bias, "proj_size": proj})
    ours = {k: v for k, v in count_network_params(spec).breakdown.items() if k.count("/") == 1}
    assert ours == {f"rnn/{n}": p.numel() for n, p in module.named_parameters()}


def test_grouped_conv_by_hand():
    """Conv2d 8->16, k3, groups 4: 16 * (8/4) * 9 weights + 16 biases = 304."""
    spec = net([8, 10, 10], {"type": "conv2d", "out_channels": 16, "kernel_size": 3, "groups": 4})
    assert count_network_params(spec).total == 16 * 2 * 9 + 16 == 304


@pytest.mark.torch
def test_grouped_conv_matches_torch():
    """The same grouped conv in torch has as many parameters."""
    torch = pytest.importorskip("torch")
    module = torch.nn.Conv2d(8, 16, 3, groups=4)
    spec = net([8, 10, 10], {"type": "conv2d", "out_channels": 16, "kernel_size": 3, "groups": 4})
    assert count_network_params(spec).total == sum(p.numel() for p in module.parameters())


def test_batchnorm_params_and_buffers():
    """BatchNorm2d(32): 2*32 parameters; running mean/var + counter are 2*32 + 1 buffers."""
    spec = net([32, 4, 4], {"type": "batchnorm2d"})
    (row,) = network_layers(spec)
    assert (row.params, row.buffers) == (64, 65)
    no_affine = net([32, 4, 4], {"type": "batchnorm2d", "affine": False})
    assert count_network_params(no_affine).total == 0


def test_layernorm_without_bias():
    """LayerNorm over [6] with bias=False: 6 weights only (torch >= 2.1 flag)."""
    spec = net([3, 6], {"type": "layernorm", "bias": False})
    assert count_network_params(spec).total == 6


# --- torch comparisons of whole models ---------------------------------------------------------


def _torch_resnet(torch, kind, blocks):
    """ResNet written here from the paper's Table 1 (torchvision's module names), not torchvision."""
    nn = torch.nn
    expansion = 1 if kind == "basic" else 4

    class Block(nn.Module):
        def __init__(self, inplanes, planes, stride):
            super().__init__()
            out = planes * expansion
            if kind == "basic":
                self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(planes)
                self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
                self.bn2 = nn.BatchNorm2d(planes)
                self.convs = [(self.conv1, self.bn1), (self.conv2, self.bn2)]
            else:
                self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(planes)
                self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
                self.bn2 = nn.BatchNorm2d(planes)
                self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
                self.bn3 = nn.BatchNorm2d(out)
                self.convs = [(self.conv1, self.bn1), (self.conv2, self.bn2), (self.conv3, self.bn3)]
            self.downsample = None
            if stride != 1 or inplanes != out:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False), nn.BatchNorm2d(out))

        def forward(self, x):
            y = x
            for i, (conv, bn) in enumerate(self.convs):
                y = bn(conv(y))
                y = torch.relu(y) if i < len(self.convs) - 1 else y
            return torch.relu(y + (self.downsample(x) if self.downsample is not None else x))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    names = ["conv1", "bn1", "relu", "maxpool"]
    inplanes = 64
    for i, (planes, n) in enumerate(zip([64, 128, 256, 512], blocks)):
        stage = []
        for b in range(n):
            stage.append(Block(inplanes, planes, 2 if (b == 0 and i > 0) else 1))
            inplanes = planes * expansion
        layers.append(nn.Sequential(*stage))
        names.append(f"layer{i + 1}")
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inplanes, 1000)]
    names += ["avgpool", "flatten", "fc"]
    model = nn.Sequential()
    for name, layer in zip(names, layers):
        model.add_module(name, layer)
    return model


def _torch_breakdown(module):
    return {name.replace(".", "/"): p.numel() for name, p in module.named_parameters()}


@pytest.mark.torch
@pytest.mark.parametrize("preset, kind, blocks", [("resnet-18", "basic", [2, 2, 2, 2]), ("resnet-50", "bottleneck", [3, 4, 6, 3])])
def test_resnet_tensors_match_torch(preset, kind, blocks):
    """Every parameter tensor (name and size) equals a hand-built torch ResNet's named_parameters()."""
    torch = pytest.importorskip("torch")
    expected = _torch_breakdown(_torch_resnet(torch, kind, blocks))
    breakdown = count_network_params(load_model(preset)).breakdown
    assert {k: v for k, v in breakdown.items() if k.endswith(("weight", "bias"))} == expected


# --- FLOPs -----------------------------------------------------------------------------------


def test_linear_flops_by_hand():
    """Linear 100->30 on [7, 100]: matmul 2*7*100*30, bias 7*30."""
    (row,) = network_layers(net([7, 100], {"type": "linear", "out_features": 30}))
    assert row.matmul_flops == 2 * 7 * 100 * 30
    assert row.forward_flops == 2 * 7 * 100 * 30 + 7 * 30


def test_conv_flops_by_hand():
    """Conv2d 3->8 k3 p1 on 8x8, groups 1, no bias: 2 * (8*8*8 outputs) * (3*3*3 MACs)."""
    spec = net([3, 8, 8], {"type": "conv2d", "out_channels": 8, "kernel_size": 3, "padding": 1, "bias": False})
    (row,) = network_layers(spec)
    assert row.forward_flops == row.matmul_flops == 2 * (8 * 8 * 8) * (3 * 3 * 3)


def test_mlp_step_flops_by_hand():
    """MLP per sample: matmul 2*(6+6+2) = 28; biases 3+2+1 and sigmoids 3+2 = 11.

    Step of 4 samples: forward 4*39; model 4*(3*28 + 2*11); full recompute adds 4*39.
    """
    spec = load_model("mlp")
    flops = count_network_flops(spec, TrainingSpec(global_batch=4, recompute="full"))
    assert flops.forward_per_token == 28 + 11
    assert flops.forward == 4 * 39
    assert flops.model == 4 * (3 * 28 + 2 * 11)
    assert flops.hardware == flops.model + 4 * 39


def test_small_cnn_matmul_flops_by_hand():
    """LeNet MACs: 28*28*6*25 + 10*10*16*150 + 400*120 + 120*84 + 84*10 = 416,520; FLOPs 2x."""
    macs = 28 * 28 * 6 * 25 + 10 * 10 * 16 * 150 + 400 * 120 + 120 * 84 + 84 * 10
    assert sum(r.matmul_flops for r in network_layers(load_model("small-cnn"))) == 2 * macs == 833_040


@pytest.mark.torch
def test_small_cnn_flops_match_flop_counter():
    """Forward matmul/conv FLOPs and fwd+bwd (3x) equal torch FlopCounterMode on the same LeNet."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )
    x = torch.randn(1, 1, 28, 28, requires_grad=True)
    with FlopCounterMode(display=False) as forward:
        y = model(x)
    with FlopCounterMode(display=False) as backward:
        y.sum().backward()
    ours = sum(r.matmul_flops for r in network_layers(load_model("small-cnn")))
    assert ours == forward.get_total_flops()
    assert 3 * ours == forward.get_total_flops() + backward.get_total_flops()


@pytest.mark.torch
def test_resnet18_flops_match_flop_counter():
    """ResNet-18 conv+fc forward FLOPs (about 1.82 GMACs) equal FlopCounterMode on a hand-built one."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    model = _torch_resnet(torch, "basic", [2, 2, 2, 2]).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.randn(1, 3, 224, 224))
    assert sum(r.matmul_flops for r in network_layers(load_model("resnet-18"))) == counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")
@pytest.mark.parametrize("kind, inp, h, layers, bidir, bias, proj", RNN_CASES)
def test_recurrent_flops_match_flop_counter(kind, inp, h, layers, bidir, bias, proj):
    """RNN matmul FLOPs over 5 steps equal FlopCounterMode (oneDNN off so the cell is decomposed)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind]
    extra = {"proj_size": proj} if proj else {}
    module = cls(inp, h, num_layers=layers, bidirectional=bidir, bias=bias, batch_first=True, **extra)
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as counter:
        module(torch.randn(1, 5, inp))
    spec = net([5, inp], {"type": kind, "hidden_size": h, "num_layers": layers, "bidirectional": bidir, "bias": bias, "proj_size": proj})
    assert network_layers(spec)[0].matmul_flops == counter.get_total_flops()


def test_adaptive_pool_flops_overlapping_windows():
    """Adaptive avg pool 5 -> 3: windows [0,2), [1,4), [3,5) sum to 2+3+2 = 7 per channel."""
    (row,) = network_layers(net([2, 5], {"type": "adaptiveavgpool1d", "output_size": 3}))
    assert row.forward_flops == 2 * 7


def test_breakdown_scales_with_batch():
    """The FLOP breakdown is for the whole step: the root of layer 0 is global_batch x per sample."""
    spec = net([10], {"type": "linear", "out_features": 5, "bias": False})
    flops = count_network_flops(spec, TrainingSpec(global_batch=8))
    assert flops.breakdown == {"0": 8 * 2 * 10 * 5}


# --- memory ----------------------------------------------------------------------------------


def test_mlp_model_states_fp32_adam():
    """fp32 Adam: 20 params x (4 weights + 4 grads + 8 states), no master copy."""
    memory = count_network_memory(load_model("mlp"), TrainingSpec(precision="fp32", optimizer="adam"), 1)
    assert (memory.weights, memory.gradients, memory.optimizer, memory.master_weights) == (80, 80, 160, 0)


def test_mlp_model_states_bf16_adamw_zero_paper():
    """bf16 AdamW with bf16 grads: ZeRO paper's 2 + 2 + 12 (master + m + v) = 16 bytes/param."""
    training = TrainingSpec(precision="bf16", grad_dtype="same")
    memory = count_network_memory(load_model("mlp"), training, 1)
    assert (memory.weights, memory.gradients, memory.optimizer, memory.master_weights) == (40, 40, 160, 80)
    assert memory.model_states == 20 * 16


def test_mlp_fp32_grad_buffer_under_mixed_precision():
    """bf16 with the default fp32 gradient buffer (Megatron): 4 bytes of gradient per parameter."""
    memory = count_network_memory(load_model("mlp"), TrainingSpec(precision="bf16"), 1)
    assert memory.gradients == 20 * 4


def test_mlp_activations_by_hand():
    """Per sample: linear inputs 2+3+2 and sigmoid outputs 3+2 = 12 floats; 4 samples fp32 = 192."""
    memory = count_network_memory(load_model("mlp"), TrainingSpec(precision="fp32"), micro_batch=4)
    assert memory.activations == 4 * 12 * 4
    assert memory.activations_per_layer == [4 * 4 * n for n in (2, 3, 3, 2, 2)]


def test_small_cnn_activations_by_hand():
    """LeNet per sample, bf16: float inputs of conv/linear 784+1176+400+120+84 (2 bytes each);
    ReLU masks 4704+1600+120+84 bytes; int64 maxpool indices 8*(6*14*14 + 16*5*5)."""
    floats = 784 + 6 * 14 * 14 + 400 + 120 + 84
    fixed = (6 * 28 * 28 + 16 * 10 * 10 + 120 + 84) + 8 * (6 * 14 * 14 + 16 * 5 * 5)
    memory = count_network_memory(load_model("small-cnn"), TrainingSpec(precision="bf16"), micro_batch=1)
    assert memory.activations == 2 * floats + fixed


def test_lstm_bptt_activations_by_hand():
    """1-layer LSTM, seq 5, in 3, h 4, fp32: input 5*3 + per step 4h gates + c_t + h_t = 5*24."""
    spec = net([5, 3], {"type": "lstm", "hidden_size": 4})
    memory = count_network_memory(spec, TrainingSpec(precision="fp32"), micro_batch=1)
    assert memory.activations == 4 * (5 * 3 + 5 * (4 * 4 + 4 + 4))


def test_full_recompute_keeps_unit_inputs():
    """Full recompute keeps each unit's input: MLP 2+3+3+2+2 floats per sample."""
    memory = count_network_memory(load_model("mlp"), TrainingSpec(precision="fp32", recompute="full"), 2)
    assert memory.activations == 2 * 4 * (2 + 3 + 3 + 2 + 2)


def test_full_recompute_checkpoints_blocks_not_leaves():
    """ResNet-18 under full recompute keeps one input per unit: 4 stem leaves + 8 residual
    blocks + avgpool, flatten, fc = 15 checkpoints, fewer bytes than keeping everything."""
    spec = load_model("resnet-18")
    full = count_network_memory(spec, TrainingSpec(recompute="full"), 1)
    none = count_network_memory(spec, TrainingSpec(), 1)
    assert sum(1 for b in full.activations_per_layer if b) == 4 + 8 + 3
    # the first checkpoint is the bf16 image: 3*224*224*2 bytes
    assert full.activations_per_layer[0] == 3 * 224 * 224 * 2
    assert full.activations < none.activations


# --- random stacks (hypothesis) ----------------------------------------------------------------

ACTIVATIONS = ["relu", "gelu", "tanh", "sigmoid", "silu"]


def _conv_size(size, k, s, p, d=1):
    """torch.nn.Conv2d docs: floor((L + 2p - d(k-1) - 1)/s) + 1."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@st.composite
def stacks(draw):
    """A valid random CNN-then-MLP stack, with a recipe to build the same model in torch.

    Returns (input_shape, layer tables, torch recipe, expected output shape), the shape
    tracked here with torch's documented formulas (square images).
    """
    c, size = draw(st.integers(1, 4)), draw(st.integers(4, 12))
    input_shape = [c, size, size]
    layers, recipe = [], []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["conv", "pool", "bn", "act", "dropout", "residual"]))
        if kind == "conv":
            k, s, p, d = draw(st.integers(1, 4)), draw(st.integers(1, 2)), draw(st.integers(0, 2)), draw(st.integers(1, 2))
            g = draw(st.sampled_from([x for x in (1, 2, 3, 4) if c % x == 0]))
            out, bias = g * draw(st.integers(1, 3)), draw(st.booleans())
            new = _conv_size(size, k, s, p, d)
            if new < 1:
                continue
            layers.append({"type": "conv2d", "out_channels": out, "kernel_size": k, "stride": s, "padding": p, "dilation": d, "groups": g, "bias": bias})
            recipe.append(("Conv2d", (c, out, k), {"stride": s, "padding": p, "dilation": d, "groups": g, "bias": bias}))
            c, size = out, new
        elif kind == "pool":
            op, k = draw(st.sampled_from(["max", "avg"])), draw(st.integers(1, 3))
            s, p, ceil = draw(st.integers(1, 3)), draw(st.integers(0, k // 2)), draw(st.booleans())
            new = _conv_size(size, k, s, p)
            if ceil:  # torch.nn.MaxPool2d docs: round up, but the last window must start inside
                new = -(-(size + 2 * p - k) // s) + 1
                new -= 1 if (new - 1) * s >= size + p else 0
            if new < 1:
                continue
            layers.append({"type": f"{op}pool2d", "kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil})
            recipe.append((f"{op.capitalize()}Pool2d", (k,), {"stride": s, "padding": p, "ceil_mode": ceil}))
            size = new
        elif kind == "bn":
            affine = draw(st.booleans())
            layers.append({"type": "batchnorm2d", "affine": affine})
            recipe.append(("BatchNorm2d", (c,), {"affine": affine}))
        elif kind == "act":
            name = draw(st.sampled_from(ACTIVATIONS))
            layers.append({"type": name})
            recipe.append(({"relu": "ReLU", "gelu": "GELU", "tanh": "Tanh", "sigmoid": "Sigmoid", "silu": "SiLU"}[name], (), {}))
        elif kind == "dropout":
            layers.append({"type": "dropout", "p": 0.1})
            recipe.append(("Dropout", (0.1,), {}))
        else:  # same-shape residual conv block
            k = draw(st.sampled_from([1, 3]))
            layers.append({"type": "residual", "activation": "relu", "main": [
                {"type": "conv2d", "out_channels": c, "kernel_size": k, "padding": k // 2}, {"type": "batchnorm2d"}]})
            recipe.append(("Residual", (c, k), {}))
    layers.append({"type": "flatten"})
    recipe.append(("Flatten", (), {}))
    width = c * size * size
    for _ in range(draw(st.integers(1, 3))):
        out, bias = draw(st.integers(1, 9)), draw(st.booleans())
        layers.append({"type": "linear", "out_features": out, "bias": bias})
        recipe.append(("Linear", (width, out), {"bias": bias}))
        width = out
        if draw(st.booleans()):
            layers.append({"type": "layernorm"})
            recipe.append(("LayerNorm", (width,), {}))
    return input_shape, layers, recipe, (width,)


def _build_torch(torch, recipe):
    """The torch.nn.Sequential a recipe describes (Residual: relu(bn(conv(x)) + x))."""
    nn = torch.nn

    class Residual(nn.Module):
        def __init__(self, c, k):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(c, c, k, padding=k // 2), nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)) + x)

    modules = [Residual(*args) if name == "Residual" else getattr(nn, name)(*args, **kw) for name, args, kw in recipe]
    return nn.Sequential(*modules)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacks())
def test_random_stacks_never_crash(case):
    """Any valid CNN/MLP stack validates and counts: totals equal the sums of their parts."""
    input_shape, layers, _, expected_out = case
    spec = net(input_shape, *layers)
    rows = network_layers(spec)
    params = count_network_params(spec)
    flops = count_network_flops(spec, TrainingSpec(global_batch=3))
    memory = count_network_memory(spec, TrainingSpec(), micro_batch=2)
    assert rows[-1].output_shape == expected_out
    assert params.total == sum(params.per_layer) == sum(v for k, v in params.breakdown.items() if "/" not in k)
    assert flops.forward == 3 * sum(r.forward_flops for r in rows) and flops.model >= 2 * flops.forward
    assert memory.activations == sum(memory.activations_per_layer) >= 0


@pytest.mark.torch
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stacks())
def test_random_stacks_match_torch(case):
    """Random stacks: parameter count, output shape and matmul FLOPs equal the torch model's."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    input_shape, layers, recipe, _ = case
    model = _build_torch(torch, recipe).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        y = model(torch.randn(1, *input_shape))
    spec = net(input_shape, *layers)
    rows = network_layers(spec)
    assert count_network_params(spec).total == sum(p.numel() for p in model.parameters())
    assert rows[-1].output_shape == tuple(y.shape[1:])
    assert sum(r.matmul_flops for r in rows) == counter.get_total_flops()
