"""The submission zip grid: every unsafe shape is refused with its code; good shapes pass."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from submission_api.submission_zip import (
    UnsafeZipError,
    ZipLimits,
    build_submission_zip,
    check_submission_zip,
    safe_extract,
)

MODEL = b"class MyMetaLearner: ...\nclass MyLearner: ...\n"


def make_zip(path: Path, entries: list[tuple[str, bytes]], **kw) -> Path:
    """Write `entries` (name, data) into a zip; kw tweak every ZipInfo (e.g. external_attr)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            for key, value in kw.get(name, {}).items():
                setattr(info, key, value)
            zf.writestr(info, data)
    return path


def refused_code(path: Path, limits: ZipLimits = ZipLimits()) -> str:
    with pytest.raises(UnsafeZipError) as err:
        check_submission_zip(path, limits)
    assert err.value.message  # every refusal explains itself
    return err.value.code


def test_model_at_root_is_accepted_with_empty_root(tmp_path):
    report = check_submission_zip(make_zip(tmp_path / "a.zip", [("model.py", MODEL)]))
    assert report.root == ""
    assert report.n_files == 1
    assert report.total_uncompressed == len(MODEL)


def test_single_top_level_folder_is_accepted_and_reported(tmp_path):
    entries = [("sub/", b""), ("sub/model.py", MODEL), ("sub/w.bin", b"x" * 10)]
    assert check_submission_zip(make_zip(tmp_path / "a.zip", entries)).root == "sub"


def test_macosx_junk_does_not_hide_the_top_level_folder(tmp_path):
    entries = [("sub/model.py", MODEL), ("__MACOSX/sub/._model.py", b"junk")]
    assert check_submission_zip(make_zip(tmp_path / "a.zip", entries)).root == "sub"


@pytest.mark.parametrize(
    ("entries", "extra", "code"),
    [
        ([("/etc/model.py", MODEL)], {}, "zip.absolute_path"),
        ([("C:/model.py", MODEL)], {}, "zip.absolute_path"),
        ([("model.py", MODEL), ("../evil.py", b"x")], {}, "zip.parent_path"),
        ([("model.py", MODEL), ("a/../../evil.py", b"x")], {}, "zip.parent_path"),
        ([("model.py", MODEL), ("..\\evil.py", b"x")], {}, "zip.backslash_path"),
        ([("model.py", MODEL), ("link", b"/etc/passwd")],
         {"link": {"create_system": 3, "external_attr": (stat.S_IFLNK | 0o777) << 16}},
         "zip.link"),
        ([("model.py", MODEL), ("dev", b"")],
         {"dev": {"create_system": 3, "external_attr": (stat.S_IFCHR | 0o600) << 16}},
         "zip.special_file"),
        ([("model.py", MODEL), ("model.py", MODEL)], {}, "zip.duplicate_name"),
        ([("model.py", MODEL), ("Model.PY", MODEL)], {}, "zip.duplicate_name"),
        ([("model.py", MODEL), ("a", b"x"), ("a/b", b"y")], {}, "zip.duplicate_name"),
        ([("helper.py", b"x")], {}, "zip.no_model"),
        ([("a/model.py", MODEL), ("b/other.py", b"x")], {}, "zip.no_model"),
        ([("a/b/model.py", MODEL)], {}, "zip.no_model"),
    ],
)
def test_unsafe_shapes_are_refused_with_their_code(tmp_path, entries, extra, code):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are written on purpose
        path = make_zip(tmp_path / "bad.zip", entries, **extra)
    assert refused_code(path) == code


def test_bomb_ratio_is_refused(tmp_path):
    path = make_zip(tmp_path / "bomb.zip", [("model.py", MODEL), ("zeros", b"\0" * 4 * 1024**2)])
    assert refused_code(path) == "zip.bomb"


def test_too_many_files_is_refused(tmp_path):
    entries = [("model.py", MODEL)] + [(f"f{i}.py", b"x") for i in range(10)]
    path = make_zip(tmp_path / "many.zip", entries)
    assert refused_code(path, ZipLimits(max_files=5)) == "zip.too_many_files"


def test_total_uncompressed_beyond_bound_is_refused(tmp_path):
    path = make_zip(tmp_path / "big.zip", [("model.py", MODEL), ("w", b"ab" * 1000)])
    assert refused_code(path, ZipLimits(max_total_uncompressed=1000)) == "zip.too_large"


def test_lying_size_header_is_caught_while_streaming(tmp_path):
    """A central directory that under-declares a size is caught by the CRC/size check."""
    path = make_zip(tmp_path / "lie.zip", [("model.py", MODEL), ("w", b"abcdefgh" * 100)])
    data = bytearray(path.read_bytes())
    cd = data.rfind(b"PK\x01\x02")  # the last central entry is "w"
    data[cd + 24 : cd + 28] = (10).to_bytes(4, "little")  # declared uncompressed size
    path.write_bytes(bytes(data))
    assert refused_code(path) == "zip.corrupt"


def test_encrypted_entry_is_refused(tmp_path):
    path = make_zip(tmp_path / "enc.zip", [("model.py", MODEL)])
    data = bytearray(path.read_bytes())
    for signature, flag_offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature) + flag_offset
        data[at] |= 0x01  # the "encrypted" general-purpose bit, as zip -e writes it
    path.write_bytes(bytes(data))
    assert refused_code(path) == "zip.encrypted"


def test_truncated_zip_is_refused(tmp_path):
    path = make_zip(tmp_path / "t.zip", [("model.py", MODEL * 100)])
    path.write_bytes(path.read_bytes()[:-30])
    assert refused_code(path) == "zip.corrupt"


def test_bad_crc_is_refused(tmp_path):
    path = tmp_path / "crc.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("model.py", MODEL)
    data = bytearray(path.read_bytes())
    offset = data.find(MODEL)
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    assert refused_code(path) == "zip.corrupt"


def test_not_a_zip_is_refused(tmp_path):
    path = tmp_path / "x.zip"
    path.write_bytes(b"hello, not a zip")
    assert refused_code(path) == "zip.corrupt"


def test_nested_zip_is_a_plain_file_and_not_expanded(tmp_path):
    inner = make_zip(tmp_path / "inner.zip", [("zeros", b"\0" * 4 * 1024**2)])
    outer = make_zip(tmp_path / "o.zip", [("model.py", MODEL), ("inner.zip", inner.read_bytes())])
    report = check_submission_zip(outer)
    assert report.total_uncompressed == len(MODEL) + inner.stat().st_size


def test_safe_extract_returns_the_submission_root(tmp_path):
    path = make_zip(tmp_path / "a.zip", [("sub/model.py", MODEL), ("sub/pkg/x.py", b"1")])
    root = safe_extract(path, tmp_path / "out")
    assert root == (tmp_path / "out" / "sub").resolve()
    assert (root / "model.py").read_bytes() == MODEL
    assert (root / "pkg" / "x.py").read_bytes() == b"1"


def test_safe_extract_refuses_before_writing_anything(tmp_path):
    path = make_zip(tmp_path / "a.zip", [("model.py", MODEL), ("../x", b"1")])
    with pytest.raises(UnsafeZipError):
        safe_extract(path, tmp_path / "out")
    assert not (tmp_path / "x").exists()
    assert not any((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else True


def _kit(folder: Path) -> Path:
    (folder / "pkg" / "__pycache__").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / "output").mkdir()
    (folder / "model.py").write_bytes(MODEL)
    (folder / "config.json").write_text("{}")
    (folder / "pkg" / "util.py").write_text("X = 1\n")
    (folder / "pkg" / "__pycache__" / "util.cpython-311.pyc").write_bytes(b"junk")
    (folder / ".git" / "HEAD").write_text("ref")
    (folder / "output" / "pred.npy").write_bytes(b"x")
    (folder / ".DS_Store").write_bytes(b"x")
    return folder


def test_build_is_deterministic_and_skips_junk(tmp_path):
    kit = _kit(tmp_path / "kit")
    first = build_submission_zip(kit, tmp_path / "a.zip")
    second = build_submission_zip(kit, tmp_path / "b.zip")
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as zf:
        assert zf.namelist() == ["config.json", "model.py", "pkg/util.py"]


def test_build_refuses_a_folder_without_model(tmp_path):
    (tmp_path / "kit").mkdir()
    (tmp_path / "kit" / "helper.py").write_text("")
    with pytest.raises(UnsafeZipError) as err:
        build_submission_zip(tmp_path / "kit", tmp_path / "a.zip")
    assert err.value.code == "zip.no_model"
    assert not (tmp_path / "a.zip").exists()


def test_build_refuses_what_validation_would_refuse(tmp_path):
    kit = _kit(tmp_path / "kit")
    for i in range(5):
        (kit / f"f{i}.py").write_text("")
    with pytest.raises(UnsafeZipError) as err:
        build_submission_zip(kit, tmp_path / "a.zip", ZipLimits(max_files=3))
    assert err.value.code == "zip.too_many_files"
    assert not (tmp_path / "a.zip").exists()
    assert not (tmp_path / "a.zip.part").exists()


def test_build_refuses_symlinks(tmp_path):
    kit = _kit(tmp_path / "kit")
    (kit / "secret").symlink_to("/etc/hostname")
    with pytest.raises(UnsafeZipError) as err:
        build_submission_zip(kit, tmp_path / "a.zip")
    assert err.value.code == "zip.link"
