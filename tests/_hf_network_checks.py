"""Checks shared by the HF network-stack mapper tests (tests/test_hf_network_mappers.py's table,
test_hf_swin_networks.py): the count of a config.json, the matmul FLOPs against FlopCounterMode on transformers' own module, and
count / plan / verify run through the CLI."""

from __future__ import annotations

from _hf_n17_checks import assert_count_plan, runner
from modelplan.cli import app
from modelplan.count.network import network_layers
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

DENSE = ("aten.convolution", "aten.addmm", "aten.mm")
"""FlopCounterMode's ops of convolutions and Linears (2 x MACs, bias adds apart)."""


def total(data: dict) -> int:
    """modelplan's parameter total of `data` as a config.json."""
    return count_params(from_hf_config(data, "config.json")).total


def flop_counts(data: dict):
    """The spec of `data` and FlopCounterMode's FLOPs by op for one image through transformers'
    module (eager attention, no grad)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import hf_class, hf_config

    spec = from_hf_config(data)
    model = hf_class(data)._from_config(hf_config(data), attn_implementation="eager").eval()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(pixel_values=torch.randn(1, *spec.input_shape))
    return spec, {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}


def assert_matmul_flops_equal_flop_counter(data: dict) -> None:
    """One image through transformers' module (eager attention: FlopCounterMode does not count the CPU
    SDPA kernel): its convolutions' and Linears' FLOPs equal the spec's other matmul rows, its
    aten.bmm (q k^T and p v) the `attend` rows'."""
    spec, ops = flop_counts(data)
    rows = network_layers(spec)
    assert sum(r.matmul_flops for r in rows if r.type != "attend") == sum(ops.get(op, 0) for op in DENSE)
    assert sum(r.matmul_flops for r in rows if r.type == "attend") == ops.get("aten.bmm", 0)


def assert_count_plan_verify(tmp_path, data: dict) -> None:
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    path = assert_count_plan(tmp_path, data)
    result = runner.invoke(app, ["verify", str(path), "--tp", "2", "--pp", "2"])
    assert result.exit_code == 0, result.output
