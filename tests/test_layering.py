"""Data flows one way (STYLE.md): spec -> counts -> costs -> plans -> run costs -> verification -> export -> cli.

A module may import only from its own layer or layers to its left, and numpy / typer / rich stay
where STYLE.md puts them, so `import modelplan` and `modelplan count` stay cheap.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "modelplan"
ORDER = ["errors", "inputs", "presets", "specs", "count", "comm", "plan", "cost", "execute", "export", "cli"]
RANK = {layer: i for i, layer in enumerate(ORDER)}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if layer in RANK:
            yield path, layer


def _imports(tree: ast.AST, top_level_only: bool):
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


@pytest.mark.parametrize("path,layer", list(_modules()), ids=lambda v: str(v)[-40:])
def test_imports_only_from_layers_to_the_left(path, layer):
    """No module imports a modelplan layer to its right (e.g. plan must not import execute)."""
    tree = ast.parse(path.read_text())
    for module in _imports(tree, top_level_only=False):
        if module.startswith("modelplan."):
            target = module.split(".")[1]
            assert RANK.get(target, -1) <= RANK[layer], f"{path.name} ({layer}) imports {module}"


@pytest.mark.parametrize("path,layer", [(p, l) for p, l in _modules() if l not in ("execute", "cli")],
                         ids=lambda v: str(v)[-40:])
def test_no_top_level_numpy_typer_or_rich_outside_execute_and_cli(path, layer):
    """numpy is imported lazily outside execute/; typer and rich only in cli/ (STYLE.md layout)."""
    tree = ast.parse(path.read_text())
    heavy = {m.split(".")[0] for m in _imports(tree, top_level_only=True)} & {"numpy", "typer", "rich"}
    assert not heavy, f"{path.name} imports {sorted(heavy)} at module level"
