"""The task's own root (`runner/task_root.py`, issue 34): what the run's copy holds, which folders
the big files' overlays may take (the fallback where `pivot_root` is refused: in
test_task_isolation_seccomp.py, which forks). The root
itself, entered by every task of a sandboxed run, is measured in
tests/integration/sandbox/test_sandbox_task_root.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from submission_api.runner import task_root


def test_the_copy_keeps_names_copies_small_files_and_stands_in_for_big_and_unreadable_ones(
        tmp_path: Path):
    source = tmp_path / "source"
    (source / "pkg" / "include").mkdir(parents=True)
    (source / "pkg" / "include" / "header.h").write_text("int x;")
    (source / "pkg" / "module.py").write_text("x = 1\n")
    (source / "pkg" / "big.so").write_bytes(b"\0" * (task_root.BIG_FILE + 1))
    (source / "pkg" / "link").symlink_to("module.py")
    secret = source / "pkg" / "secret"
    secret.write_text("no")
    secret.chmod(0o000)
    big: list[Path] = []

    task_root._copy(source, tmp_path / "copy", big, [1 << 20])

    copy = tmp_path / "copy" / "pkg"
    assert (copy / "module.py").read_text() == "x = 1\n"
    assert os.readlink(copy / "link") == "module.py"
    assert big == [source / "pkg" / "big.so"]
    assert (copy / "big.so").stat().st_size == 0  # a stand-in: the file is bound over it
    assert (copy / "secret").stat().st_mode & 0o777 == 0  # the name, with its mode
    if os.getuid() != 0:  # root reads it (and gets its bytes); the sandbox's user cannot
        assert (copy / "secret").stat().st_size == 0
    assert not (copy / "include").exists()  # C headers: no compiler in the image


def test_the_trees_leave_out_what_is_bound_in_and_nest_nothing(tmp_path: Path):
    found = task_root.trees([Path("/tmp"), tmp_path])

    assert found, "sys.path and the system folders give at least one tree"
    assert not [p for p in found if p.is_relative_to("/tmp") or p.is_relative_to("/proc")]
    assert not [p for p in found for q in found if p != q and p.is_relative_to(q)]


def test_no_big_files_overlay_takes_a_folder_with_a_mount_under_it():
    points = task_root.mount_points()
    big = [Path(os.__file__).resolve()]  # a file of the image (here: of this machine)

    for lower in task_root.image_lowers(big):
        assert not [p for p in points if p != Path("/") and p.is_relative_to(lower)], lower
        assert lower != Path("/")


def test_a_copy_over_its_share_of_the_run_s_memory_is_refused(tmp_path: Path):
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "a").write_bytes(b"a" * 1000)
    (tmp_path / "source" / "b").write_bytes(b"b" * 1000)

    with pytest.raises(OSError, match="1/4 of the run's memory"):
        task_root._copy(tmp_path / "source", tmp_path / "copy", [], [1500])
