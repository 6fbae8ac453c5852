"""Atomic writes (modelplan.export.files): whole file or nothing, with the mode the umask gives."""

import os
import stat

import pytest

from modelplan.errors import ModelplanError
from modelplan.export.files import write_text_atomic


def test_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
    """With umask 022 a new file is 0644 (0666 & ~022), as open() would make it."""
    old = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "plan.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text() == "{}"


def test_no_temporary_file_is_left_behind(tmp_path):
    """Only the target exists after the write (the temp sibling was renamed onto it)."""
    write_text_atomic(tmp_path / "a.txt", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_missing_folder_is_one_line_error(tmp_path):
    """A target in a folder that does not exist is a ModelplanError naming the folder."""
    with pytest.raises(ModelplanError, match="does not exist"):
        write_text_atomic(tmp_path / "nope" / "a.txt", "x")
