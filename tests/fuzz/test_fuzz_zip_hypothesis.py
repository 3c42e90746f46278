"""Property-based fuzzing of the one function that decides zip safety (`check_submission_zip`):
on any bytes it either refuses with an `UnsafeZipError` or accepts a zip that is safe to extract,
never crashes with anything else; `safe_extract` of an accepted zip writes only under its folder.
"""

from __future__ import annotations

import io
import stat
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from submission_api.submission_zip import (
    UnsafeZipError,
    ZipLimits,
    check_submission_zip,
    safe_extract,
)

pytestmark = pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
"""Duplicate names are among the generated attacks: zipfile warns of each as it writes one."""

LIMITS = ZipLimits(max_files=40, max_total_uncompressed=2 * 1024**2,
                   max_file_uncompressed=1024**2, max_ratio=50.0, ratio_min_size=64 * 1024)
SEGMENTS = st.one_of(
    st.sampled_from(["model.py", "..", ".", "", "a", "sub", "MODEL.py", "m\u043edel.py",
                     "\uff0e\uff0e", "C:", "x\\..\\y", "\x00", "__MACOSX", "\u202e", "con"]),
    st.text(min_size=1, max_size=12),
)
NAMES = st.builds(lambda parts, lead: ("/" if lead else "") + "/".join(parts),
                  st.lists(SEGMENTS, min_size=1, max_size=4), st.booleans())
KINDS = st.sampled_from([stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK, stat.S_IFIFO, stat.S_IFCHR, 0])
CONTENT = st.one_of(st.binary(max_size=2048), st.just(b"\0" * 200_000),
                    st.just(b"class MyMetaLearner: ...\nclass MyLearner: ...\n"))
ENTRIES = st.lists(st.tuples(NAMES, KINDS, CONTENT, st.sampled_from([0, 3]),
                             st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])),
                   min_size=1, max_size=8)


def build(entries) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, kind, data, system, method in entries:
            info = zipfile.ZipInfo(name or "x")
            info.create_system = system
            info.external_attr = (kind | 0o644) << 16
            info.compress_type = method
            zf.writestr(info, data)
    return buf.getvalue()


def check_bytes(data: bytes, folder: Path):
    path = folder / "s.zip"
    path.write_bytes(data)
    try:
        return path, check_submission_zip(path, LIMITS)
    except UnsafeZipError as error:
        assert error.code.startswith("zip.") and len(error.message) > 20
        return path, None


def assert_safe(path: Path, report, folder: Path) -> None:
    for name in report.names:
        parts = PurePosixPath(name).parts
        assert not name.startswith("/") and ".." not in parts and "\\" not in name
        assert "\x00" not in name
    assert len({n.casefold() for n in report.names}) == len(report.names)
    assert report.total_uncompressed <= LIMITS.max_total_uncompressed
    model = f"{report.root}/model.py" if report.root else "model.py"
    assert model in report.names
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            kind = stat.S_IFMT(info.external_attr >> 16)
            assert info.create_system != 3 or kind in (0, stat.S_IFREG, stat.S_IFDIR)
    dest = folder / "out"
    safe_extract(path, dest, LIMITS)
    for item in dest.rglob("*"):
        assert not item.is_symlink()
        assert item.resolve().is_relative_to(dest.resolve())


FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(ENTRIES)
def test_generated_zips_are_refused_cleanly_or_safe_to_extract(entries):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, report = check_bytes(build(entries), folder)
        if report is not None:
            assert_safe(path, report, folder)


@FUZZ
@given(ENTRIES, st.data())
def test_corrupted_zips_never_crash_the_checker(entries, data):
    raw = bytearray(build(entries))
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, report = check_bytes(bytes(raw[:cut] if data.draw(st.booleans()) else raw), folder)
        if report is not None:
            assert_safe(path, report, folder)


# (A NUL inside a name is no case: zipfile cuts the name at the NUL when reading, so the checker
# and the extractor both see the same, harmless prefix.)
@pytest.mark.parametrize("name", ["../x", "/abs", "a/../../b", "C:x", "a\\b", "\x00b"])
def test_a_single_unsafe_name_is_always_refused(tmp_path, name):
    data = build([("model.py", stat.S_IFREG, b"x", 3, zipfile.ZIP_STORED),
                  (name, stat.S_IFREG, b"x", 3, zipfile.ZIP_STORED)])
    _, report = check_bytes(data, tmp_path)
    assert report is None
