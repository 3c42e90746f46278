"""The embedded default's broker: kombu's filesystem transport under the worker's data dir."""

from __future__ import annotations

from pathlib import Path

from broker_roundtrip import round_trip

from worker.settings import WorkerSettings


def test_job_sent_by_name_reaches_a_real_worker_through_the_filesystem_broker(
        tmp_path: Path, monkeypatch):
    settings = WorkerSettings(broker_url="filesystem://", data_dir=tmp_path, name="fs",
                              queues=["arena.embedded"])
    assert round_trip(settings, monkeypatch, "arena.embedded") == [(42, "tok", "runtime")]
    assert list((tmp_path / "broker" / "queue").iterdir()) == []  # consumed, nothing left
    assert len(list((tmp_path / "broker" / "processed").iterdir())) == 1
