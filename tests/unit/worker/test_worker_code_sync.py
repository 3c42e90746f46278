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
