"""Measured memory of a rank: the bytes of every live numpy array its state can reach.

A rank's state is a set of named roots (its parameter buckets, the gathered parameters of the
chunk it computes, its data, running statistics, the activations its in-flight micro-batches
keep, received messages waiting in its mailbox, and the rank's whole program object last, so
anything else it keeps is 'other'). `live_bytes` walks each root (dicts, lists, tuples, dataclasses and
plain objects, down to the arrays) and adds the bytes of each array's *buffer* once: views count
the buffer they look into, a buffer reached from two roots counts for the first. The buckets'
arrays are split by role (weights, gradients, optimizer state); anything else a bucket holds
counts as weights, so a copy kept on the side shows up as more weights than the plan's.
Nothing is sampled from the allocator: the numbers are the program's own live arrays, which on
the simulator (one thread per rank) are the only per-rank memory there is.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel

from modelplan.comm.communicator import Communicator, Group

TERMS = ("weights", "gradients", "optimizer", "gathered", "inputs", "buffers", "activations", "edge_activations",
         "deferred", "comm_buffers", "other")
"""Memory terms, in the order a buffer reachable from several roots is attributed (the data
before the activations: a first layer keeps a view of its input batch, which is resident anyway;
buffers are non-trained state such as BatchNorm running statistics; activations are what the
blocks / layers keep, edge_activations what the embedding, the output head and the loss keep,
deferred the weight gradients a split backward (B) leaves for its W)."""

_SKIP = (Communicator, Group, BaseModel, str, bytes, int, float, complex, bool, type(None), type, types.FunctionType,
         types.MethodType, types.BuiltinFunctionType, types.ModuleType, np.random.Generator)


def _buffer(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


@dataclass
class Walk:
    """Buffers already counted (by id) and the bytes per term."""

    seen: set[int] = field(default_factory=set)
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TERMS, 0))
    _visited: set[int] = field(default_factory=set)

    def add(self, term: str, obj: Any) -> None:
        """Count every array reachable from `obj` not counted yet under `term`."""
        stack = [obj]
        while stack:
            x = stack.pop()
            if isinstance(x, np.ndarray):
                buf = _buffer(x)
                if id(buf) not in self.seen:
                    self.seen.add(id(buf))
                    self.bytes[term] += buf.nbytes if buf.dtype != object else 0
                continue
            if isinstance(x, _SKIP):
                continue
            if id(x) in self._visited:
                continue
            self._visited.add(id(x))
            if isinstance(x, Mapping):
                stack.extend(x.values())
            elif isinstance(x, (list, tuple, set, frozenset)):
                stack.extend(x)
                if hasattr(x, "__dict__"):  # a subclass carrying attributes
                    stack.extend(vars(x).values())
            elif hasattr(x, "__dict__") or hasattr(x, "__slots__"):
                stack.extend(_fields(x))


def _fields(x: Any) -> Iterable[Any]:
    if hasattr(x, "__dict__"):
        yield from vars(x).values()
    for name in getattr(type(x), "__slots__", ()):
        if hasattr(x, name):
            yield getattr(x, name)


def bucket_roots(buckets: Iterable[Any]) -> dict[str, list[Any]]:
    """A rank's parameter buckets split by role: grad, optim, and everything else as weights."""
    out: dict[str, list[Any]] = {"gradients": [], "optimizer": [], "weights": []}
    for b in buckets:
        out["gradients"].append(b.grad)
        out["optimizer"].append(b.optim)
        out["weights"].append({k: v for k, v in vars(b).items() if k not in ("grad", "optim")})
    return out


def program_rest(program: Any, walked: tuple[str, ...]) -> dict[str, Any]:
    """The attributes of a rank program not walked under another term and not in its class's
    STATIC list (configuration without arrays), to be walked as 'other': whatever else the
    program keeps, including attributes nobody declared."""
    skip = set(walked) | set(getattr(type(program), "STATIC", ()))
    return {k: v for k, v in vars(program).items() if k not in skip}


def live_bytes(roots: Mapping[str, Any]) -> dict[str, int]:
    """Bytes per term of every array reachable from the roots (term -> object or list of objects)."""
    walk = Walk()
    for term in TERMS:
        if term in roots:
            walk.add(term, roots[term])
    return walk.bytes


@dataclass(frozen=True)
class RankMemory:
    """Peak live bytes of one rank over its run, per term, and of their sum."""

    peak: dict[str, int]
    total_peak: int
    observations: int


@dataclass
class PeakTracker:
    """Each term's peak over the observations of one rank, and the total's peak."""

    peak: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TERMS, 0))
    total_peak: int = 0
    observations: int = 0

    def observe(self, roots: Mapping[str, Any]) -> dict[str, int]:
        now = live_bytes(roots)
        for term, n in now.items():
            self.peak[term] = max(self.peak[term], n)
        self.total_peak = max(self.total_peak, sum(now.values()))
        self.observations += 1
        return now

    def result(self) -> RankMemory:
        return RankMemory(dict(self.peak), self.total_peak, self.observations)
