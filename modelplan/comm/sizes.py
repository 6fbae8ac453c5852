"""Message sizes as users type them (nccl-tests' -b/-e style) and as tables print them; the one
size parser of the command line.

`K`, `M`, `G`, `T` and `KiB`...`TiB` are powers of 1024 (nccl-tests reads `-e 128M` as
128 * 2**20); `KB`, `MB`, `GB`, `TB` are powers of 1000 (SI). A bare number is bytes.
"""

from __future__ import annotations

import re

from modelplan.errors import SpecError

_UNITS = {
    "": 1, "b": 1,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}
_SIZE = re.compile(r"^\s*([+-]?\d{1,30}(?:\.\d{0,30})?|[+-]?\.\d{1,30})\s*([A-Za-z]*)\s*$")
MAX_SIZE = 2**50
"""The largest message size read (1 PiB), far above any collective's buffer."""


def parse_size(text: str, what: str = "size") -> int:
    """Bytes in a size like 8, 1K, 64MiB, 1.5G, 8GB; raises a one-line SpecError otherwise.

    The one size parser of the command line (`comm`, `calibrate`), with nccl-tests' meaning:
    K, M, G, T (and KiB..TiB) are powers of 1024, KB, MB, GB, TB powers of 1000 (SI)."""
    from fractions import Fraction

    m = _SIZE.match(str(text))
    if not m:
        raise SpecError(f"{what} '{str(text)[:40]}' is not a size (examples: 8, 1K, 64MiB, 1G, 8GB)")
    number, unit = m.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise SpecError(
            f"{what} '{text}': unknown unit '{unit}' (B, K, M, G, T, KiB..TiB, KB..TB)"
        )
    value = Fraction(number) * factor  # exact: 1.5K is 1536, 123456789012345678 stays itself
    if value < 0:
        raise SpecError(f"{what} '{text}' must be >= 0")
    if value.denominator != 1:
        raise SpecError(f"{what} '{text}' is not a whole number of bytes ({float(value):g})")
    if value > MAX_SIZE:
        raise SpecError(f"{what} '{text}' is larger than {format_size(MAX_SIZE)}")
    return int(value)


def format_size(nbytes: int) -> str:
    """Short binary size: 8 B, 1 KiB, 256 MiB, 1.5 GiB."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= factor:
            value = nbytes / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{nbytes} B"
