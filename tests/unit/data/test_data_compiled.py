"""The compiled cache: exact pixels, content addressing, reuse when unchanged, rebuild when
changed, atomic entries, subsets, and the tensor conversion on the task path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from data_fakes import write_collection, write_dataset
from PIL import Image

from submission_api.data import (
    CompiledDataError,
    DataProblemsError,
    compile_dataset,
    images_to_tensor,
    load_collection,
    open_compiled,
    verify_compiled,
    write_compiled_subset,
)
from submission_api.data import compiler as compiler_module


def test_compile_then_reopen_gives_the_decoded_pixels(dataset: Path, cache: Path) -> None:
    compiled = compile_dataset(dataset, cache)
    reopened = open_compiled(compiled.root)
    assert reopened.class_names == ("class_0", "class_1", "class_2")
    assert reopened.images.shape == (12, 128, 128, 3) and reopened.images.dtype == np.uint8
    assert not reopened.images.flags.writeable
    for i in range(12):
        c, j = divmod(i, 4)  # sorted by (class, file name)
        expected = np.asarray(Image.open(dataset / "images" / f"img_{c}_{j}.png").convert("RGB"))
        np.testing.assert_array_equal(reopened.images[i], expected)
        assert reopened.labels[i] == c
    assert reopened.content_hash == compiled.root.name
    assert verify_compiled(reopened)


def test_class_indices_and_hash_do_not_depend_on_csv_row_order(tmp_path: Path,
                                                                cache: Path) -> None:
    a = compile_dataset(write_dataset(tmp_path / "a"), cache)
    b = compile_dataset(write_dataset(tmp_path / "b", shuffle_rows=True), cache)
    assert a.content_hash == b.content_hash  # the second compile lost the race and dropped its copy
    assert b.name == "b" and a.name == "a"
    assert sorted(p.name for p in cache.iterdir()) == sorted([a.content_hash, "sources"])


def test_an_unchanged_dataset_is_not_recompiled(dataset: Path, cache: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    first = compile_dataset(dataset, cache)

    def fail(*args, **kwargs):
        raise AssertionError("recompiled an unchanged dataset")

    monkeypatch.setattr(compiler_module, "_decode_into", fail)
    again = compile_dataset(dataset, cache)
    assert again.content_hash == first.content_hash


def test_a_changed_image_triggers_a_rebuild(dataset: Path, cache: Path) -> None:
    first = compile_dataset(dataset, cache)
    path = dataset / "images" / "img_1_0.png"
    Image.fromarray(np.full((128, 128, 3), 7, np.uint8)).save(path)
    second = compile_dataset(dataset, cache)
    assert second.content_hash != first.content_hash
    assert (second.images[4] == 7).all()
    assert first.root.is_dir()  # old entry untouched: a running task may still read it


def test_a_touched_but_identical_dataset_maps_to_the_same_entry(dataset: Path,
                                                                cache: Path) -> None:
    first = compile_dataset(dataset, cache)
    path = dataset / "labels.csv"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert compile_dataset(dataset, cache).content_hash == first.content_hash
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == sorted(
        [first.content_hash, "sources"])


def test_content_hash_is_stable_across_processes(dataset: Path, tmp_path: Path) -> None:
    code = ("import sys; from submission_api.data import compile_dataset; "
            "print(compile_dataset(sys.argv[1], sys.argv[2]).content_hash)")
    hashes = {
        subprocess.run([sys.executable, "-c", code, str(dataset), str(tmp_path / f"c{i}")],
                       check=True, capture_output=True, text=True,
                       env={**os.environ, "PYTHONHASHSEED": str(i)}).stdout.strip()
        for i in range(2)
    }
    assert len(hashes) == 1 and len(hashes.pop()) == 64


def test_no_half_written_entry_is_left_when_compile_fails(dataset: Path, cache: Path) -> None:
    Image.new("RGB", (50, 50)).save(dataset / "images" / "img_0_0.png")
    with pytest.raises(DataProblemsError, match="expected 128x128"):
        compile_dataset(dataset, cache)
    assert [p.name for p in cache.iterdir() if p.name != "sources"] == []


def test_super_categories_and_attributes_survive_compilation(tmp_path: Path,
                                                             cache: Path) -> None:
    d = write_dataset(tmp_path / "rich", super_categories=True, attributes=True)
    compiled = open_compiled(compile_dataset(d, cache).root)
    np.testing.assert_array_equal(compiled.super_categories, [0, 1, 0])
    assert compiled.attributes[5] == frozenset({"a1", "b1"})
    assert [m.tolist() for m in compiled.class_members()] == [[0, 1, 2, 3], [4, 5, 6, 7],
                                                              [8, 9, 10, 11]]
    assert compiled.class_members() is compiled.class_members()


def test_subset_holds_only_the_given_images(tmp_path: Path, cache: Path) -> None:
    d = write_dataset(tmp_path / "rich", super_categories=True, attributes=True)
    full = compile_dataset(d, cache)
    sub = write_compiled_subset(full, np.array([9, 1, 8, 0]), tmp_path / "view" / "rich")
    assert sub.images.shape[0] == 4
    np.testing.assert_array_equal(sub.images, full.images[[0, 1, 8, 9]])
    assert sub.class_names == ("class_0", "class_2")  # class_1 dropped, names re-indexed
    np.testing.assert_array_equal(sub.labels, [0, 0, 1, 1])
    np.testing.assert_array_equal(sub.super_categories, [0, 0])  # both in super_0
    assert sub.attributes == tuple(full.attributes[i] for i in [0, 1, 8, 9])
    assert sub.content_hash != full.content_hash and verify_compiled(sub)
    assert sorted(p.name for p in (tmp_path / "view").iterdir()) == ["rich"]


@pytest.mark.parametrize("indices", [[], [0, 0], [12], [-1]])
def test_subset_rejects_bad_indices(dataset: Path, cache: Path, tmp_path: Path,
                                    indices: list[int]) -> None:
    full = compile_dataset(dataset, cache)
    with pytest.raises(ValueError, match="image indices"):
        write_compiled_subset(full, np.array(indices, dtype=np.int64), tmp_path / "out")


def test_a_truncated_entry_is_refused_with_a_fix(dataset: Path, cache: Path) -> None:
    root = compile_dataset(dataset, cache).root
    with (root / "images.u8").open("r+b") as f:
        f.truncate(1000)
    with pytest.raises(CompiledDataError, match="Recompile"):
        open_compiled(root)


def test_images_to_tensor_layout_and_range() -> None:
    images = np.random.default_rng(0).integers(0, 256, (3, 128, 128, 3), dtype=np.uint8)
    x = images_to_tensor(images)
    assert x.shape == (3, 3, 128, 128) and x.dtype == torch.float32 and x.is_contiguous()
    reference = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255)
    assert torch.equal(x, reference)  # bitwise the plain torch conversion
    assert images_to_tensor(np.full((1, 128, 128, 3), 255, np.uint8)).max() == 1.0
    with pytest.raises(ValueError, match=r"expected uint8 images \[n, 128, 128, 3\]"):
        images_to_tensor(images.astype(np.float32))


def test_load_collection_compiles_every_dataset_and_reads_splits(tmp_path: Path,
                                                                 cache: Path) -> None:
    col = write_collection(tmp_path / "col", ["a", "b"], ["c"])
    loaded = load_collection(col, cache)
    assert sorted(loaded.datasets) == ["a", "b", "c"] and loaded.name == "col"
    assert loaded.splits["meta-train"] == ["a", "b"] and loaded.splits["meta-test"] == ["c"]
    assert loaded.datasets["c"].name == "c"


def test_load_collection_refuses_splits_naming_missing_datasets(tmp_path: Path,
                                                                cache: Path) -> None:
    col = write_collection(tmp_path / "col", ["a"], ["c"])
    (col / "info" / "meta_splits.txt").write_text('{"meta-train": ["a"], "meta-test": ["x"]}')
    with pytest.raises(DataProblemsError, match="'x', which is not a folder"):
        load_collection(col, cache)
