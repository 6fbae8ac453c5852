"""The model-family registry (`specs/family.py`): every family implements the whole protocol, the
network family runs through the shared verify orchestration, and no module outside the registry
dispatches on a spec's `kind`.

Expected values: the registered names must resolve to callables (the protocol, by construction);
the network's ledgers and reassembled gradients are compared with the single-device reference
that verify itself checks (report.passed), and the reassembled shapes with the network's own
PyTorch-layout parameter shapes (`count/network_layers.py`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from modelplan.count.network import network_layers
from modelplan.specs.family import FAMILIES, family_of, resolve, spec_class
from modelplan.specs.load import load_model
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

PACKAGE = Path(__file__).resolve().parent.parent / "modelplan"
ENTRIES = ("spec", "params", "flops", "memory", "search", "evaluator", "verify")


@pytest.mark.parametrize("kind", sorted(FAMILIES))
def test_every_family_implements_the_whole_protocol(kind):
    """Each entry of the protocol names something importable; each family names both oracles."""
    family = FAMILIES[kind]
    for entry in ENTRIES:
        assert callable(resolve(getattr(family, entry))), (kind, entry)
    assert {k for k, _ in family.oracles} == {"numpy", "torch"}
    assert family.kind == kind


def test_spec_classes_by_kind():
    """The loader's classes come from the registry; an unknown kind has none."""
    assert spec_class("transformer") is TransformerSpec
    assert spec_class("network") is NetworkSpec
    assert spec_class("diffusion") is None
    assert family_of(load_model("mlp")).throughput_unit == "samples"
    assert family_of(load_model("llama-3-8b")).throughput_unit == "tokens"


def _kind_reads(tree: ast.AST) -> list[int]:
    """Lines that compare a value with a family's kind ("transformer", "network") or branch on
    isinstance of a family's spec class."""
    families = set(FAMILIES)
    guards = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and isinstance(block.test, ast.UnaryOp)
              and isinstance(block.body[0], ast.Raise) for n in ast.walk(block.test)}
    """`if not isinstance(spec, X): raise ...`: a function refusing another family, not a dispatch."""
    lines = []
    for node in ast.walk(tree):
        if id(node) in guards:
            continue
        if isinstance(node, ast.Compare):
            consts = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            if any(c in families for c in consts):
                lines.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            if any(isinstance(a, ast.Name) and a.id in ("NetworkSpec", "TransformerSpec") for a in ast.walk(node)):
                lines.append(node.lineno)
    return lines


def test_the_check_finds_a_kind_dispatch():
    """The checker itself: both spellings of a family dispatch are found."""
    code = ('if spec.kind == "network":\n    pass\nif isinstance(spec, NetworkSpec):\n    pass\n'
            'if not isinstance(spec, TransformerSpec):\n    raise ValueError(spec)\n')
    assert _kind_reads(ast.parse(code)) == [1, 3]


def test_no_kind_dispatch_outside_the_registry():
    """Only specs/family.py decides by family (issue 12: no `kind ==` dispatch elsewhere)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "family.py":
            continue
        lines = _kind_reads(ast.parse(path.read_text()))
        if lines:
            found[str(path.relative_to(PACKAGE))] = lines
    assert found == {}


def test_network_verify_returns_ledgers_and_tensors_like_a_transformer():
    """verify_run of a network (dp 2) through the one orchestration: the report passes and the
    ledgers of both ranks and the reassembled full-shape gradients come back."""
    from modelplan.execute.verify import verify_run

    spec = load_model("mlp")
    out = verify_run(spec, TrainingSpec(global_batch=4, optimizer="adamw"), Plan(dp=2))
    assert out.report.passed, [f"{r.name}: {r.detail}" for r in out.report.rows if not r.passed]
    assert len(out.ledgers) == 2
    first = network_layers(spec)[0]
    weight = f"{first.path}/weight"
    # nn.Linear(in, out).weight is (out, in); the executor may store it transposed
    assert sorted(out.grads[weight].shape) == sorted(first.param_shapes["weight"])
