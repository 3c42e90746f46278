"""A containerized worker hands sandboxes a host-visible copy of submission_api."""

from __future__ import annotations

from worker.pipeline.wiring import sync_sandbox_code


def test_no_target_keeps_the_drivers_default():
    assert sync_sandbox_code(None) is None


def test_the_package_is_copied_without_bytecode_and_refreshed(tmp_path):
    copied = sync_sandbox_code(tmp_path)

    assert copied == tmp_path / "submission_api"
    assert (copied / "runner" / "participant.py").is_file()
    assert not list(copied.rglob("__pycache__"))
    (copied / "runner" / "participant.py").write_text("stale")
    sync_sandbox_code(tmp_path)
    assert "def main" in (copied / "runner" / "participant.py").read_text()


def _files(root):
    return {p.relative_to(root): p for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_sync_never_writes_a_file_in_place_that_a_running_sandbox_may_be_importing(tmp_path):
    """Every pool process (and a Celery worker's main process, for its start-up probe) syncs the
    copy while other slots' sandboxes import from it: an unchanged file is left alone, and a
    changed one is replaced by a rename, so a reader holding the old file reads it whole."""
    copied = sync_sandbox_code(tmp_path)
    before = {name: path.stat() for name, path in _files(copied).items()}
    participant = copied / "runner" / "participant.py"
    participant.write_text("stale")
    with participant.open() as held:
        sync_sandbox_code(tmp_path)
        assert held.read() == "stale"  # the old file, whole: replaced, not truncated

    after = {name: path.stat() for name, path in _files(copied).items()}
    assert set(after) == set(before)
    rewritten = [str(name) for name, st in after.items() if name != participant.relative_to(copied)
                 and (st.st_ino, st.st_ctime_ns) != (before[name].st_ino, before[name].st_ctime_ns)]
    assert rewritten == []
    assert "def main" in participant.read_text()
    assert not [p for p in copied.rglob("*") if p.name.startswith(".")]  # no temp file left
