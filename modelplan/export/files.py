"""Atomic text writes: a reader never sees half a file (temp file in the folder + os.replace)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from modelplan.errors import ModelplanError


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` via a temporary sibling and os.replace; returns the path."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise ModelplanError(f"{target}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ModelplanError(f"{target}: cannot write: {exc.strerror}") from None
    return target
