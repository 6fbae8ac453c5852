"""Checks the tests/test_hf_n17_*.py and test_hf_n18*.py files share: a bad config is a one-line
SpecError naming the field; `count` / `plan --gpus 8` run (and `verify` refuses the new features in
one line); a refused config is one line naming why; the total on CPU and the components equal
transformers'; each dense block's tp shards hold count's block parameters."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.specs.hf import from_hf_config

runner = CliRunner()


def class_defaults(model_type: str) -> dict:
    """`model_type`'s config class defaults as the config.json transformers writes for them (the
    independent source of the class-defaults tests)."""
    from _hf_reference import transformers_module

    return json.loads(transformers_module().AutoConfig.for_model(model_type).to_json_string(use_diff=False))


def class_default_totals(model_type: str, cls: str, device: str = "meta", **overrides) -> tuple[int, int]:
    """(modelplan's total, transformers' sum(p.numel()) of the module built on `device`) of
    `model_type`'s class defaults under architecture `cls`, some keys replaced."""
    from _hf_reference import hf_model

    data = {**class_defaults(model_type), "architectures": [cls], **overrides}
    return count_params(from_hf_config(data)).total, sum(p.numel() for p in hf_model(data, device).parameters())


def assert_one_line_error(data: dict, message: str) -> None:
    """from_hf_config(data) raises a one-line SpecError matching `message`."""
    with pytest.raises(SpecError, match=message) as exc:
        from_hf_config(data, "config.json")
    assert "\n" not in str(exc.value)


def ours(data: dict) -> dict[str, int]:
    """modelplan's embedding / layers / final_norm / head (compared with _hf_reference.hf_components)."""
    b = count_params(from_hf_config(data, "config.json")).breakdown
    return {key: b.get(key, 0) for key in ("embedding", "layers", "final_norm", "head")}


def assert_total_on_cpu(data: dict) -> None:
    """count_params' total = sum(p.numel()) of the transformers model really built on CPU (tied
    tensors yielded once)."""
    from _hf_reference import hf_model

    model = hf_model(data, device="cpu")
    assert count_params(from_hf_config(data, "config.json")).total == sum(p.numel() for p in model.parameters())


def assert_count_plan(tmp_path, data: dict):
    """count (its total = count_params') and plan --gpus 8 exit 0 on `data` written as config.json;
    returns the path."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["params"]["total"] == count_params(from_hf_config(data)).total
    result = runner.invoke(app, ["plan", str(path), "--gpus", "8", "--json"])
    assert result.exit_code == 0, result.output
    return path


def assert_count_refused(tmp_path, data: dict, text: str) -> None:
    """`modelplan count` on `data` exits non-zero with one line containing `text`."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and text in lines[0], result.output


def assert_count_plan_verify(tmp_path, data: dict, *features: str) -> None:
    """count (its total = count_params') and plan --gpus 8 exit 0; verify exits non-zero with one
    line naming every one of `features`."""
    path = assert_count_plan(tmp_path, data)
    result = runner.invoke(app, ["verify", str(path)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert all(feature in lines[0] for feature in features), lines[0]


def assert_dense_blocks_shard(spec, tp2=lambda block: True) -> None:
    """plan/shard.py's per-rank elements of each dense block of `spec`: at tp 1 the whole block
    (count's block_params); at tp 2 with sequence parallelism (every replicated tensor's gradient
    then a partial sum) the two ranks hold it once plus the replicated part once more, for the
    blocks `tp2(block)` accepts."""
    from modelplan.count.blocks import block_of, block_params
    from modelplan.plan.shard import _block

    for index in range(spec.layers):
        block = block_of(spec, index)
        if block.moe:
            continue
        whole = sum(block_params(spec, block).values())
        assert _block(spec, block, 1, False) == (whole, 0), index
        if not tp2(block):
            continue
        local, replicated = _block(spec, block, 2, True)
        assert 2 * local - replicated == whole, index


def case_ids(cases: list[dict]) -> list[str]:
    """pytest ids of config cases: architectures[0] and the case's index."""
    return [f"{d['architectures'][0]}-{i}" for i, d in enumerate(cases)]


def assert_total_and_trainable_on_cpu(data: dict) -> None:
    """count_params' total and trainable = sum(p.numel()) of the transformers model built on CPU,
    all of its parameters and those with requires_grad."""
    from _hf_reference import hf_model

    model = hf_model(data, device="cpu")
    count = count_params(from_hf_config(data, "config.json"))
    assert count.total == sum(p.numel() for p in model.parameters())
    assert count.trainable == sum(p.numel() for p in model.parameters() if p.requires_grad)


def assert_class_defaults(model_type: str, architecture: str) -> None:
    """`model_type`'s config class defaults built as `architecture` on the meta device count its total."""
    from _hf_reference import hf_numel

    data = {**class_defaults(model_type), "architectures": [architecture]}
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def assert_kernels_match_counted_gemms(spec, s: int, only=lambda block: True) -> None:
    """plan/kernels.py's weight GEMMs of each block (tp 1, micro-batch 2, s tokens) add up to count's
    forward FLOPs but the attention scores / context (and an indexer's) and, in MoE blocks, the MLP
    (priced at dispatched shapes): the planner prices what count counts. `only`: the blocks checked."""
    from modelplan.count.block_flops import block_forward_flops
    from modelplan.count.blocks import block_of
    from modelplan.plan.kernels import layer_kernels

    for index in range(spec.layers):
        block = block_of(spec, index)
        if not only(block):
            continue
        counted = block_forward_flops(spec, block, 2 * s, s)
        kernels = layer_kernels(spec, 1, 2, s, 2, block=block, moe_layer=block.moe)
        skip = ("attention/score", "indexer/score") + (("mlp/",) if block.moe else ())
        expected = sum(v for k, v in counted.items() if not any(x in k for x in skip))
        gemms = [g for g in kernels.gemms if not g.name.endswith(("/scores", "/context", "/sum"))
                 and not (block.moe and g.name.startswith("mlp/"))]
        assert sum(g.flops for g in gemms) == expected, index
