"""Message sizes as typed on the command line (nccl-tests -b/-e: K/M/G are powers of 1024)."""

import pytest

from modelplan.comm.sizes import format_size, parse_size
from modelplan.errors import SpecError


@pytest.mark.parametrize("text, nbytes", [
    ("8", 8), ("1K", 1024), ("256M", 256 * 2**20), ("64MiB", 64 * 2**20), ("1G", 2**30),
    ("8GB", 8 * 10**9), ("1.5K", 1536), ("100B", 100), ("2 GiB", 2 * 2**30), ("1kb", 1000),
])
def test_parse_size(text, nbytes):
    """Binary suffixes K/M/G and KiB/MiB/GiB, SI suffixes KB/MB/GB, bare bytes."""
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("text, message", [
    ("12QB", r"unknown unit 'QB'"),
    ("-5", r"must be >= 0"),
    ("abc", r"is not a size"),
    ("1.3", r"not a whole number of bytes"),
])
def test_parse_size_rejects(text, message):
    """Unknown units, negative sizes, words and fractional bytes are one-line errors."""
    with pytest.raises(SpecError, match=message):
        parse_size(text)


def test_format_size():
    """Binary units for tables."""
    assert [format_size(n) for n in (8, 1024, 3 * 2**29, 16 * 2**30)] == ["8 B", "1 KiB", "1.5 GiB", "16 GiB"]


def test_parse_size_is_exact_and_bounded():
    """Decimal digits are read exactly (a float would round 1.0000000000000001K to 1024 bytes);
    beyond 1 PiB is refused, never inf."""
    assert parse_size("1125899906842623") == 2**50 - 1
    with pytest.raises(SpecError, match="not a whole number of bytes"):
        parse_size("1.0000000000000001K")
    with pytest.raises(SpecError, match="larger than"):
        parse_size("9" * 30 + "T")
