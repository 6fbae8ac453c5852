"""Atomic text writes: a reader never sees half a file (temp file in the folder + os.replace).

Every failure is one ModelplanError line naming the file (missing or read-only folder, full disk,
a folder where the file should be), and no temporary file is left behind, not even after Ctrl-C.
A symbolic link is followed: the file it points to is replaced and the link stays a link.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from modelplan.errors import ModelplanError

STDOUT = "-"
"""The output name that means standard output."""


def _target(path: str | Path) -> Path:
    """The file a write to `path` replaces: the end of its chain of symbolic links."""
    target = Path(path)
    if target.is_symlink():
        return Path(os.path.realpath(target))
    return target


def check_writable(path: str | Path, flag: str = "") -> Path:
    """Refuse, in one line and before any long work, a path `write_text_atomic` cannot write:
    a missing or read-only folder, a folder in the file's place. Returns the file to write."""
    label = f"{flag} {path}" if flag else str(path)
    if str(path) == STDOUT:
        return Path(STDOUT)
    try:
        target = _target(path)
        folder = target.parent if str(target.parent) else Path(".")
        if target.is_dir():
            raise ModelplanError(f"{label}: is a folder; give a file name")
        if not folder.is_dir():
            raise ModelplanError(f"{label}: folder {folder} does not exist")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ModelplanError(f"{label}: folder {folder} is not writable")
    except OSError as exc:  # a name no file can have (too long, say)
        raise ModelplanError(f"{label}: cannot write: {exc.strerror or exc}") from None
    return target


def check_one_stdout(output: str | Path | None, json_out: bool, flag: str = "-o", document: str = "document") -> None:
    """`-o -` prints the document on standard output, so --json cannot print there too: refused."""
    if output is not None and str(output) == "-" and json_out:
        raise ModelplanError(f"{flag} - prints the {document} on standard output: drop --json (or write it to a file)")


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` via a temporary sibling and os.replace; returns the path.

    `-` writes to standard output instead. The temporary file is removed on every failure,
    KeyboardInterrupt included.
    """
    if str(path) == STDOUT:
        import sys

        sys.stdout.write(text)
        sys.stdout.flush()
        return Path(STDOUT)
    target = check_writable(path)
    folder = target.parent if str(target.parent) else Path(".")
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise ModelplanError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:  # failed or interrupted before the replace
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return Path(path)
