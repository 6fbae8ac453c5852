"""Deliberate faults for the mutation suite: each a small named object that patches one seam.

A seam is a public function, method or module constant named by its dotted path
('modelplan.execute.layers.norm:norm_backward', 'modelplan.execute.data_parallel:DataParallel.finish_grads',
'modelplan.execute.layers.attention:ROTARY_BASE'). `Injector.wrap` replaces a function in its
module *and* in every loaded modelplan module that imported it by name, so a fault reaches the
copy the executor, the reference and the checks each hold, whatever the import layout. A seam
that no longer exists fails loudly (`StaleSeam`), and a wrapped seam that was never called
fails the test as 'did not fire': the executor changed shape, the fault must follow it, and a
silently inert fault can never be mistaken for a caught one.
"""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class StaleSeam(AssertionError):
    """The fault's seam is not in the code any more."""


def _resolve(target: str) -> tuple[Any, str, Any]:
    """(owner object, attribute name, current value) of 'module:Attr' or 'module:Class.attr'."""
    module_name, _, path = target.partition(":")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise StaleSeam(f"seam {target}: module {module_name} is gone ({exc})") from None
    parts = path.split(".")
    for part in parts[:-1]:
        if not hasattr(owner, part):
            raise StaleSeam(f"seam {target}: {part} is gone")
        owner = getattr(owner, part)
    if not hasattr(owner, parts[-1]):
        raise StaleSeam(f"seam {target}: {parts[-1]} is gone")
    return owner, parts[-1], getattr(owner, parts[-1])


@dataclass
class Injector:
    """Applies faults through pytest's monkeypatch and counts how often each wrapped seam ran."""

    monkeypatch: Any
    fired: Counter = field(default_factory=Counter)

    def wrap(self, target: str, make: Callable[[Callable], Callable]) -> None:
        """Replace the seam by `make(original)`; functions are replaced at every import site."""
        owner, name, original = _resolve(target)
        raw = original.__func__ if isinstance(original, (staticmethod, classmethod)) else original
        replacement = make(raw)

        def counted(*args, **kwargs):
            self.fired[target] += 1
            return replacement(*args, **kwargs)

        if isinstance(owner, type):
            wrapped = staticmethod(counted) if isinstance(owner.__dict__.get(name), staticmethod) else counted
            self.monkeypatch.setattr(owner, name, wrapped)
            return
        for module in list(sys.modules.values()):
            if not getattr(module, "__name__", "").startswith("modelplan"):
                continue
            for attr, value in list(vars(module).items()):
                if value is original:
                    self.monkeypatch.setattr(module, attr, counted)

    def set(self, target: str, value: Any) -> None:
        """Replace a module constant or attribute (read at call time by the code under test)."""
        owner, name, _ = _resolve(target)
        self.monkeypatch.setattr(owner, name, value)
        self.fired[target] += 1


@dataclass(frozen=True)
class Fault:
    """One deliberate fault: what it breaks, how, the run that must catch it and the check names
    (report rows) that must fail."""

    name: str
    family: str
    """The class of bug (issue 15): layer math, collective, sharding, pipeline, memory, optimizer, ..."""
    inject: Callable[[Injector], None]
    run: Callable[[], Any]
    """Runs verify under the fault and returns its report."""
    must_fail: frozenset[str]
    needs_torch: bool = False
    detail_contains: tuple[str, ...] = ()
    """Words the first failing check's detail must contain (diagnostics that point)."""
