"""import_dataset takes a dataset zip (with or without a top-level folder) or folder into a
collection, checks it first, and never extracts an unsafe zip."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest
from data_fakes import write_dataset

from submission_api.data import DataProblemsError, check_collection, import_dataset
from submission_api.data.importing import check_archive


def _zip(folder: Path, archive: Path, top_level: bool) -> Path:
    with zipfile.ZipFile(archive, "w") as zf:
        for f in sorted(folder.rglob("*")):
            rel = f.relative_to(folder.parent if top_level else folder)
            zf.write(f, rel.as_posix())
    return archive


def _splits(collection: Path) -> dict:
    return json.loads((collection / "info" / "meta_splits.txt").read_text())


@pytest.mark.parametrize("top_level", [True, False])
def test_zip_import_lands_in_the_collection_and_split(tmp_path: Path, dataset: Path,
                                                      top_level: bool) -> None:
    archive = _zip(dataset, tmp_path / "Tiny_Mini.zip", top_level)
    col = tmp_path / "col"
    dest = import_dataset(archive, col, split="meta-test", min_images_per_class=4)
    assert dest == col / ("tiny" if top_level else "Tiny_Mini")
    assert len(list((dest / "images").iterdir())) == 12
    assert _splits(col) == {"meta-train": [], "meta-valid": [], "meta-test": [dest.name]}
    assert [p.name for p in col.iterdir() if p.name.startswith(".")] == []


def test_folder_import_copies_and_keeps_the_source(tmp_path: Path, dataset: Path) -> None:
    col = tmp_path / "col"
    import_dataset(dataset, col, split="meta-train", min_images_per_class=4)
    import_dataset(write_dataset(tmp_path / "other"), col, split="meta-test",
                   min_images_per_class=4)
    assert dataset.is_dir()
    assert _splits(col) == {"meta-train": ["tiny"], "meta-test": ["other"], "meta-valid": []}
    assert check_collection(col, min_images_per_class=4) == []


def test_a_dataset_that_fails_the_checker_is_refused_with_all_problems(tmp_path: Path,
                                                                       dataset: Path) -> None:
    (dataset / "images" / "img_0_0.png").unlink()
    (dataset / "images" / "img_0_1.png").write_bytes(b"junk")
    col = tmp_path / "col"
    with pytest.raises(DataProblemsError) as err:
        import_dataset(dataset, col, min_images_per_class=4)
    assert len(err.value.problems) == 2
    assert not (col / "tiny").exists()


def test_an_existing_name_is_refused(tmp_path: Path, dataset: Path) -> None:
    import_dataset(dataset, tmp_path / "col", min_images_per_class=4)
    with pytest.raises(FileExistsError, match="another name"):
        import_dataset(dataset, tmp_path / "col", min_images_per_class=4)


def test_an_unknown_split_is_refused_before_anything_is_written(tmp_path: Path,
                                                                dataset: Path) -> None:
    with pytest.raises(ValueError, match="meta-train, meta-valid or meta-test"):
        import_dataset(dataset, tmp_path / "col", split="train")
    assert not (tmp_path / "col").exists()


def _symlink_member(zf: zipfile.ZipFile) -> None:
    info = zipfile.ZipInfo("tiny/images/link.png")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    zf.writestr(info, "/etc/passwd")


@pytest.mark.parametrize(("add_member", "expected"), [
    (lambda zf: zf.writestr("../evil.txt", "x"), "climbs out"),
    (lambda zf: zf.writestr("tiny/../../evil.txt", "x"), "climbs out"),
    (lambda zf: zf.writestr("/abs/evil.txt", "x"), "absolute path"),
    (_symlink_member, "is a link"),
])
def test_unsafe_zips_are_refused_and_nothing_is_extracted(tmp_path: Path, dataset: Path,
                                                          add_member, expected: str) -> None:
    archive = _zip(dataset, tmp_path / "bad.zip", top_level=True)
    with zipfile.ZipFile(archive, "a") as zf:
        add_member(zf)
    col = tmp_path / "col"
    with pytest.raises(DataProblemsError, match=expected):
        import_dataset(archive, col, min_images_per_class=4)
    assert not (tmp_path / "evil.txt").exists()
    assert list(col.iterdir()) == []
    assert expected in str(check_archive(archive, 4)[0])


def test_a_zip_without_a_dataset_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "empty.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("a/readme.txt", "x")
        zf.writestr("b/readme.txt", "x")
    with pytest.raises(DataProblemsError, match="no info.json"):
        import_dataset(archive, tmp_path / "col")


@pytest.mark.parametrize("name", ["info", ".hidden", "a/b"])
def test_names_that_cannot_be_dataset_folders_are_refused(tmp_path: Path, dataset: Path,
                                                          name: str) -> None:
    with pytest.raises(ValueError, match="plain folder name"):
        import_dataset(dataset, tmp_path / "col", name=name, min_images_per_class=4)
    assert [p.name for p in (tmp_path / "col").iterdir()] == []
