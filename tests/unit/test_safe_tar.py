"""Tar extraction without `filter=` (Python < 3.11.4, e.g. Debian 12's 3.11.2) keeps the
protections of the `data` filter. Every case runs the fallback on any interpreter
(`use_filter=False`), and the filter path too where this Python has it, so both agree."""

from __future__ import annotations

import io
import stat
import tarfile
from pathlib import Path

import pytest

from submission_api import safe_tar
from submission_api.safe_tar import HAS_TAR_FILTER, UnsafeTarError, extract_tar

PATHS = [pytest.param(False, id="fallback"),
         pytest.param(True, id="filter", marks=pytest.mark.skipif(
             not HAS_TAR_FILTER, reason="this Python has no tar extraction filters"))]


def _tar(path: Path, *members: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    with tarfile.open(path, "w") as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, data


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _special(name: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info, None


def _extract(tar_path: Path, dest: Path, use_filter: bool) -> None:
    with tarfile.open(tar_path) as archive:
        extract_tar(archive, dest, use_filter=use_filter)


@pytest.mark.parametrize("use_filter", PATHS)
def test_plain_entry_extracts_with_inner_links(tmp_path: Path, use_filter: bool) -> None:
    folder = tarfile.TarInfo("entry")
    folder.type, folder.mode = tarfile.DIRTYPE, 0o755
    tar = _tar(tmp_path / "ok.tar", (folder, None), _file("entry/manifest.json", b"{}"),
               _file("entry/images.u8", b"\0" * 64, mode=0o4777),
               _link("entry/alias.json", "manifest.json"),
               _link("entry/hard.json", "entry/manifest.json", tarfile.LNKTYPE))
    dest = tmp_path / "out"
    _extract(tar, dest, use_filter)
    assert (dest / "entry/manifest.json").read_bytes() == b"{}"
    assert (dest / "entry/alias.json").read_bytes() == b"{}"
    assert (dest / "entry/hard.json").read_bytes() == b"{}"
    mode = stat.S_IMODE((dest / "entry/images.u8").stat().st_mode)
    assert not mode & (stat.S_ISUID | stat.S_IWGRP | stat.S_IWOTH)


UNSAFE = {
    "dot-dot path": [_file("../escaped")],
    "symlink to an absolute path": [_link("etc", "/etc")],
    "symlink out": [_link("up", "../..")],
    # Lexically inside ("l/.." is "."), really outside once `l -> .` exists on disk.
    "symlink chain out": [_link("l", "."), _link("x", "l/.."), _file("x/escaped")],
    "hard link out": [_link("pw", "../outside.txt", tarfile.LNKTYPE)],
    "fifo": [_special("pipe", tarfile.FIFOTYPE)],
    "character device": [_special("null", tarfile.CHRTYPE)],
    "block device": [_special("disk", tarfile.BLKTYPE)],
}


@pytest.mark.parametrize("use_filter", PATHS)
@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_unsafe_member_is_refused(tmp_path: Path, case: str, use_filter: bool) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    tar = _tar(tmp_path / "bad.tar", *UNSAFE[case])
    dest = tmp_path / "a" / "b" / "out"
    with pytest.raises(tarfile.TarError):
        _extract(tar, dest, use_filter)
    assert not (tmp_path / "a" / "b" / "escaped").exists()
    assert not (tmp_path / "a" / "escaped").exists()
    assert (tmp_path / "outside.txt").read_text() == "secret"


@pytest.mark.parametrize("use_filter", PATHS)
def test_absolute_path_never_lands_outside(tmp_path: Path, use_filter: bool) -> None:
    """The fallback refuses it; the `data` filter strips the leading slash instead."""
    absolute = tmp_path / "abs-escaped"
    tar = _tar(tmp_path / "abs.tar", _file(str(absolute)))
    try:
        _extract(tar, tmp_path / "out", use_filter)
    except tarfile.TarError:
        assert not use_filter
    else:
        assert use_filter and (tmp_path / "out" / str(absolute).lstrip("/")).is_file()
    assert not absolute.exists()


def test_fallback_raises_its_own_tar_error(tmp_path: Path) -> None:
    tar = _tar(tmp_path / "bad.tar", _file("../escaped"))
    with pytest.raises(UnsafeTarError, match="outside the target"):
        _extract(tar, tmp_path / "out", use_filter=False)


def test_worker_unpacks_a_dataset_tar_on_a_python_without_filters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's call site goes through the fallback when the interpreter lacks filters."""
    from worker.pipeline import fetch
    from worker.pipeline.errors import CacheCorruptError

    monkeypatch.setattr(safe_tar, "HAS_TAR_FILTER", False)
    good = _tar(tmp_path / "good.tar", _file("manifest.json", b"{}"))
    assert fetch._unpack_entry(good, tmp_path / "good") == tmp_path / "good"
    bad = _tar(tmp_path / "bad.tar", _file("manifest.json", b"{}"), _link("up", "../.."))
    with pytest.raises(CacheCorruptError, match="outside the target"):
        fetch._unpack_entry(bad, tmp_path / "bad")
