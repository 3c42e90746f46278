"""Zip bounds added in issue 21: names extraction cannot write, and a whole zip's expansion.

On 08e9140 a 60,000-character name or 4,000 nested folders passed the checker (extraction then
failed as a platform fault), and 1,997 files of 1 MiB zeros, each under `ratio_min_size`,
expanded 2.26 MB into 2.09 GB and were accepted. Here at a smaller scale, same ratio.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from submission_api.submission_zip import UnsafeZipError, check_submission_zip


def make(path, entries: list[tuple[str, bytes]]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in [("model.py", b"x = 1\n"), *entries]:
            zf.writestr(name, data)


@pytest.mark.parametrize(("name", "code"), [
    ("a" * 60_000 + ".py", "zip.name_too_long"),
    ("n" * 256 + ".py", "zip.name_too_long"),
    ("d/" * 4_000 + "x.py", "zip.name_too_long"),  # 8,000 characters: the length first
    ("d/" * 33 + "x.py", "zip.too_deep"),
])
def test_names_extraction_cannot_write_are_refused_with_their_code(tmp_path, name, code):
    make(tmp_path / "s.zip", [(name, b"y")])
    with pytest.raises(UnsafeZipError) as caught:
        check_submission_zip(tmp_path / "s.zip")
    assert caught.value.code == code


def test_ordinary_nesting_and_names_pass(tmp_path):
    make(tmp_path / "s.zip", [("d/" * 32 + "x.py", b"y"), ("w" * 200 + ".bin", b"z")])
    check_submission_zip(tmp_path / "s.zip")


def test_many_small_files_that_expand_hugely_together_are_a_bomb(tmp_path):
    make(tmp_path / "s.zip", [(f"zeros_{i}.bin", bytes(256 * 1024)) for i in range(40)])
    with pytest.raises(UnsafeZipError) as caught:
        check_submission_zip(tmp_path / "s.zip")
    assert caught.value.code == "zip.bomb" and "in all" in caught.value.message


def test_compressible_code_stays_under_the_whole_zip_ratio(tmp_path):
    source = io.StringIO()
    for i in range(20_000):
        source.write(f"def f_{i}(x):\n    return x + {i}\n")
    make(tmp_path / "s.zip", [("big.py", source.getvalue().encode())])
    check_submission_zip(tmp_path / "s.zip")
