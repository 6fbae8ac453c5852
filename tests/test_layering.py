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


REGISTRY = PACKAGE / "specs" / "family.py"
"""The one place a spec's family is looked at (`specs/family.py`)."""


def _family_names() -> tuple[set[str], set[str]]:
    """(the registered kinds, their spec classes' names), read from the registry itself."""
    from modelplan.specs.family import FAMILIES

    return set(FAMILIES), {f.spec.split(":")[1] for f in FAMILIES.values()}


def _family_dispatch(tree: ast.AST, kinds: set[str], classes: set[str]) -> list[str]:
    """Each place `tree` picks a model family itself: `isinstance` / `issubclass` against a
    family's spec class, a comparison of anything with a family's kind string ("network" ==
    spec.kind, kind in ("transformer", ...)), or a pydantic union discriminated by `kind`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass"):
            names = {n.id for arg in node.args[1:] for n in ast.walk(arg) if isinstance(n, ast.Name)}
            names |= {n.attr for arg in node.args[1:] for n in ast.walk(arg) if isinstance(n, ast.Attribute)}
            if names & classes:
                found.append(f"line {node.lineno}: {node.func.id}(..., {', '.join(sorted(names & classes))})")
        elif isinstance(node, ast.Compare):
            strings = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            if strings & kinds:
                found.append(f"line {node.lineno}: compares with {', '.join(sorted(strings & kinds))!r}")
        elif isinstance(node, ast.keyword) and node.arg == "discriminator" and getattr(node.value, "value", None) == "kind":
            found.append(f"line {node.value.lineno}: a union discriminated by kind")
    return found


@pytest.mark.parametrize("path,layer", [(p, l) for p, l in _modules() if p != REGISTRY], ids=lambda v: str(v)[-40:])
def test_no_family_dispatch_outside_the_registry(path, layer):
    """A model family is chosen only by `specs/family.py` (issue 12: no `kind ==` dispatch
    outside the registry): every other module asks the registry (`family_of(spec).blocks`, its
    evaluator, search, verify) instead of testing a spec's class or kind."""
    kinds, classes = _family_names()
    found = _family_dispatch(ast.parse(path.read_text()), kinds, classes)
    assert not found, f"{path.relative_to(PACKAGE)} picks a family itself: {'; '.join(found)}"


def test_the_dispatch_check_finds_each_form():
    """The checker itself, on each form it forbids and on look-alikes it allows (another `kind`
    vocabulary, a registry call)."""
    kinds, classes = {"transformer", "network"}, {"TransformerSpec", "NetworkSpec"}
    bad = ['if spec.kind == "network": pass', 'x = "transformer" != kind', 'y = spec.kind in ("network", "t")',
           "if isinstance(spec, TransformerSpec): pass", "ok = isinstance(m, (int, specs.NetworkSpec))",
           'f: Annotated[A | B, Field(discriminator="kind")]']
    for src in bad:
        assert len(_family_dispatch(ast.parse(src), kinds, classes)) == 1, src
    good = ['if optimizer.kind == "adam": pass', "if family_of(spec).blocks: pass", "isinstance(x, Spec)",
            'f: Annotated[A | B, Field(discriminator="type")]']
    for src in good:
        assert _family_dispatch(ast.parse(src), kinds, classes) == [], src
