"""Reading inputs (modelplan.inputs): every way a file can be wrong is one SpecError line."""

from __future__ import annotations

import io
import sys

import pytest

from modelplan.errors import SpecError
from modelplan.inputs import MAX_DEPTH, forget_stdin, parse_json, parse_toml, read_data, read_text


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_not_utf8_names_the_byte_and_offset(tmp_path):
    """b'\\xff\\xfe{}' (a UTF-16 byte-order mark) is refused with the byte and where it is."""
    path = tmp_path / "bad.json"
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(SpecError) as exc:
        read_text(path)
    assert one_line(exc) == "bad.json: not UTF-8 text (byte 0xff at offset 0); save it as UTF-8"


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    """A UTF-8 BOM (what some Windows editors write) is dropped, not an error."""
    path = tmp_path / "ok.json"
    path.write_bytes(b"\xef\xbb\xbf{\"a\": 1}")
    assert read_data(path) == {"a": 1}


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)])
def test_deep_nesting_is_refused(text):
    """100,000 levels (RecursionError inside json) and MAX_DEPTH + 1 levels are both one line."""
    with pytest.raises(SpecError) as exc:
        parse_json(text, "deep.json")
    assert one_line(exc) == f"deep.json: nested more than {MAX_DEPTH} levels deep"


def test_deep_toml_is_refused():
    """tomllib recurses too: a 5,000-deep array is refused the same way."""
    with pytest.raises(SpecError, match="nested more than"):
        parse_toml("a = " + "[" * 5000 + "]" * 5000, "deep.toml")


@pytest.mark.parametrize("text, message", [
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": -Infinity}', "-Infinity is not a JSON number"),
    ('{"a": 1e400}', "1e400 is too large for a float"),
    ('{"name": "\\ud800"}', r"unpaired surrogate \(\\ud800\)"),
])
def test_numbers_and_strings_json_cannot_carry(text, message):
    """Python's json accepts NaN, Infinity, 1e400 (as inf) and lone surrogates; modelplan does not."""
    with pytest.raises(SpecError, match=message):
        parse_json(text, "x.json")


def test_truncated_json_says_truncated():
    """A file cut in the middle is called truncated, with its position."""
    with pytest.raises(SpecError, match=r"^x.json: truncated JSON at line 1 column"):
        parse_json('{"layers": 2,', "x.json")


def test_missing_file_and_folder(tmp_path):
    """A missing file and a folder given as a file are one line each."""
    with pytest.raises(SpecError, match="no such file"):
        read_text(tmp_path / "nope.json")
    with pytest.raises(SpecError, match="is a folder"):
        read_text(tmp_path)


def test_stdin_is_read_once_and_sniffed(monkeypatch):
    """`-` reads standard input once (two `-` arguments see the same text); JSON or TOML by content."""
    forget_stdin()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'layers = 2\nname = "x"\n')))
    assert read_data("-") == {"layers": 2, "name": "x"}
    assert read_data("-") == {"layers": 2, "name": "x"}
    forget_stdin()
