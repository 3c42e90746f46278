"""One loop writes a checked zip to disk (issue 35.5: submissions and dataset archives had one
each): both extractors go through `safe_unzip.write_members`, which keeps every member inside
the folder, counts the bytes it writes and never replaces a file unless told to."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

import submission_api.data.archive as archive
import submission_api.submission_zip as submission_zip
from submission_api.safe_unzip import OutsideFolder, TooManyBytes, write_members


def _zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return path


def test_both_extractors_write_through_the_one_loop(tmp_path, monkeypatch):
    calls = []

    def spy(zf, dest, max_bytes=None, *, overwrite=False):
        calls.append(overwrite)
        return write_members(zf, dest, max_bytes, overwrite=overwrite)

    monkeypatch.setattr(submission_zip, "write_members", spy)
    monkeypatch.setattr(archive, "write_members", spy)
    entries = {"model.py": b"class MyMetaLearner: ...\n", "sub/a.txt": b"a"}
    root = submission_zip.safe_extract(_zip(tmp_path / "s.zip", entries), tmp_path / "s")
    archive.extract_zip_safely(_zip(tmp_path / "d.zip", entries), tmp_path / "d")
    assert calls == [False, True]
    assert (root / "sub/a.txt").read_bytes() == b"a"
    assert (tmp_path / "d/sub/a.txt").read_bytes() == b"a"


def test_a_member_leaving_the_folder_is_refused(tmp_path):
    path = _zip(tmp_path / "z.zip", {"../escape.txt": b"x"})
    with zipfile.ZipFile(path) as zf, pytest.raises(OutsideFolder, match="escape"):
        write_members(zf, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()


def test_bytes_are_counted_as_written_and_files_never_replaced_unless_asked(tmp_path):
    path = _zip(tmp_path / "z.zip", {"a": b"1" * 10, "b": b"2" * 10})
    with zipfile.ZipFile(path) as zf:
        with pytest.raises(TooManyBytes):
            write_members(zf, tmp_path / "small", max_bytes=15)
        write_members(zf, tmp_path / "out")
        with pytest.raises(FileExistsError):
            write_members(zf, tmp_path / "out")
        write_members(zf, tmp_path / "out", overwrite=True)
