"""The queue tells the reconciler which runs its broker still holds (issue 13 item 6): read from
real kombu messages of the one-machine filesystem broker; None where it cannot tell."""

from __future__ import annotations

from pathlib import Path

from job_queue_fake import RecordingJobQueue

from server.services.queue import CeleryJobQueue


def test_the_filesystem_broker_lists_the_runs_it_holds(tmp_path: Path) -> None:
    queue = CeleryJobQueue("filesystem://", tmp_path / "broker")
    queue.enqueue(5, "token-5", "arena")
    queue.enqueue(7, "token-7", "gpu")
    assert queue.pending_runs("arena") == {5}
    assert queue.pending_runs("gpu") == {7}
    for message in (tmp_path / "broker" / "queue").iterdir():
        message.unlink()  # the broker lost them
    assert queue.pending_runs("arena") == set()


def test_an_unknown_or_unreachable_broker_cannot_tell() -> None:
    assert CeleryJobQueue("amqp://127.0.0.1:1//").pending_runs("arena") is None
    assert CeleryJobQueue("redis://127.0.0.1:1/0").pending_runs("arena") is None
    assert RecordingJobQueue().pending_runs("arena") is None
