"""Reading what a user hands in: files or standard input (`-`), as UTF-8 text, JSON or TOML.

Every reader of a spec, config, cluster or plan document goes through here, so each way a file can
be wrong is one `SpecError` line naming the file: missing or unreadable, not UTF-8, malformed or
cut off, nested deeper than any modelplan document, or carrying NaN/Infinity where JSON has none.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from modelplan.errors import SpecError

STDIN = "-"
"""The file name that means standard input."""
MAX_DEPTH = 64
"""Deepest nesting of tables/arrays read (modelplan's own documents stay under 12 levels)."""
MAX_BYTES = 64 * 2**20
"""Largest input read (64 MiB; a plan document is tens of KB)."""

_stdin_read: tuple[object, str] | None = None
"""(the sys.stdin it came from, its text): standard input is read once per stream."""


def source_name(ref: str | Path) -> str:
    """How messages name an input: the file name, or `<stdin>`."""
    return "<stdin>" if str(ref) == STDIN else Path(ref).name or str(ref)


def is_stdin(ref: str | Path) -> bool:
    return str(ref) == STDIN


def _decode(data: bytes, name: str) -> str:
    if len(data) > MAX_BYTES:
        raise SpecError(f"{name}: {len(data):,} bytes is larger than modelplan reads "
                        f"({MAX_BYTES:,})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                        f"{exc.start}); save it as UTF-8") from None
    return text.removeprefix("\ufeff")  # a UTF-8 byte-order mark is harmless


def read_text(ref: str | Path) -> str:
    """The UTF-8 text of a file, or of standard input for `-` (read once per stream, then
    remembered, so two arguments of `-` see the same text)."""
    global _stdin_read
    name = source_name(ref)
    if is_stdin(ref):
        if _stdin_read is None or _stdin_read[0] is not sys.stdin:
            stream = getattr(sys.stdin, "buffer", None)
            raw = stream.read(MAX_BYTES + 1) if stream is not None else sys.stdin.read().encode()
            _stdin_read = (sys.stdin, _decode(raw, name))
        return _stdin_read[1]
    path = Path(ref)
    if path.is_dir():
        raise SpecError(f"{ref}: is a folder, not a file")
    if not path.exists():
        raise SpecError(f"{ref}: no such file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"{ref}: cannot read: {exc.strerror or exc}") from None
    return _decode(raw, name)


def forget_stdin() -> None:
    """Drop the remembered standard input (tests that run several commands in one process)."""
    global _stdin_read
    _stdin_read = None


def check_depth(data: Any, name: str) -> Any:
    """`data` unchanged, or a SpecError when its tables/arrays nest deeper than MAX_DEPTH or a
    string holds a lone surrogate (a JSON `\\ud800` escape that no UTF-8 text can carry)."""
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, name)
        elif isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise SpecError(f"{name}: nested more than {MAX_DEPTH} levels deep")
            if isinstance(item, dict):
                for key in item:
                    _check_text(key, name)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return data


def _check_text(text: str, name: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SpecError(f"{name}: a string holds an unpaired surrogate "
                        f"(\\u{ord(text[exc.start]):04x}), which is not text") from None


def _no_constant(token: str) -> float:
    raise ValueError(f"{token} is not a JSON number (use a finite number)")


def _finite_float(token: str) -> float:
    value = float(token)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{token[:40]} is too large for a float (at most about 1.8e308)")
    return value


def _unclosed(text: str) -> bool:
    """Whether the text ends inside a string or with brackets still open (a cut-off file)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0


def parse_json(text: str, name: str) -> Any:
    """JSON text as Python data; NaN and Infinity (not JSON) are refused, every error one line."""
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        what = "truncated" if _unclosed(text) else "malformed"
        raise SpecError(f"{name}: {what} JSON at line {exc.lineno} column {exc.colno}: "
                        f"{exc.msg}") from None
    except ValueError as exc:  # from _no_constant, _finite_float
        raise SpecError(f"{name}: {_not_finite_key(text)}{exc}") from None
    except RecursionError:
        raise SpecError(f"{name}: nested more than {MAX_DEPTH} levels deep") from None
    return check_depth(data, name)


def _not_finite_key(text: str) -> str:
    """`key.path: ` of the first NaN, Infinity or overflowing number in the JSON text (read again
    the way Python's json reads it, where they are floats), or '' when it cannot be found."""
    import math

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return ""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"{path}: " if path else ""
        if isinstance(item, dict):
            stack.extend(reversed([(f"{path}.{k}" if path else str(k), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{path}[{i}]", v) for i, v in enumerate(item)]))
    return ""


def parse_toml(text: str, name: str) -> dict:
    """TOML text as a table; every error one line."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{name}: malformed TOML: {exc}") from None
    except RecursionError:
        raise SpecError(f"{name}: nested more than {MAX_DEPTH} levels deep") from None
    return check_depth(data, name)


def looks_like_json(text: str) -> bool:
    """Text whose first non-blank character opens a JSON object or array."""
    return text.lstrip()[:1] in ("{", "[")


def read_data(ref: str | Path) -> Any:
    """A JSON or TOML file (by its suffix; standard input and other names by their content)."""
    text, name = read_text(ref), source_name(ref)
    suffix = "" if is_stdin(ref) else Path(ref).suffix.lower()
    if suffix == ".json" or (suffix != ".toml" and looks_like_json(text)):
        return parse_json(text, name)
    return parse_toml(text, name)


def read_table(ref: str | Path) -> dict:
    """`read_data` that must be a table/object."""
    data = read_data(ref)
    if not isinstance(data, dict):
        raise SpecError(f"{source_name(ref)}: expected a table/object, got {type(data).__name__}")
    return data
