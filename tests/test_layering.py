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


def _module_graph() -> dict[str, set[str]]:
    """modelplan module -> the modelplan modules it imports (anywhere in the file, lazy imports
    included, `if TYPE_CHECKING:` blocks not; `from package import name` counts the submodule
    `name` when there is one)."""
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    graph = {}
    for name, path in mods.items():
        deps = set()
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and getattr(block.test, "id", getattr(block.test, "attr", None)) == "TYPE_CHECKING"
                       for stmt in block.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:  # annotations only: no import at run time
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("modelplan"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in mods)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan 1972)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles_between_files():
    """No two modules import each other, directly or around a circle, lazily or not: each file
    depends on files that do not depend back on it."""
    assert _cycles(_module_graph()) == []


def test_the_circle_check_finds_a_circle():
    """The checker itself: a -> b -> c -> a is one circle, d alone is none."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
