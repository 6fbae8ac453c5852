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


def test_write_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path):
    """plan.json -> real/plan.json: the file behind the link gets the text, the link stays."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "plan.json"
    target.write_text("old")
    link = tmp_path / "plan.json"
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["plan.json"]


def test_unwritable_folder_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """mkstemp failing (read-only file system, EROFS) is one ModelplanError line, no temp file.

    The failure is injected: root may write into any folder, so permissions cannot provoke it."""
    import errno
    import tempfile

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(ModelplanError, match=r"a.txt: cannot write: Read-only file system$"):
        write_text_atomic(tmp_path / "a.txt", "x")
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_during_the_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    """KeyboardInterrupt between writing and renaming: the interrupt propagates, the target keeps
    its old text and the temporary sibling is gone."""
    target = tmp_path / "a.txt"
    target.write_text("old")

    def interrupt(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(target, "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"] and target.read_text() == "old"


def test_folder_in_the_files_place_is_refused_before_writing(tmp_path):
    """check_writable names the flag and the problem: a folder given as the output file."""
    from modelplan.export.files import check_writable

    with pytest.raises(ModelplanError, match=r"^-o .*: is a folder; give a file name$"):
        check_writable(tmp_path, "-o")
    assert check_writable(tmp_path / "new.json", "-o") == tmp_path / "new.json"


def test_dash_writes_to_standard_output(capsys):
    """`-` is standard output, as everywhere on the command line."""
    write_text_atomic("-", "hello\n")
    assert capsys.readouterr().out == "hello\n"
