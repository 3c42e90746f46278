"""The embedded default's broker: kombu's filesystem transport under the worker's data dir, with
the worker's consumer (`worker.filesystem_transport`), which never takes a half-written message."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path
from queue import Empty

import pytest
from broker_roundtrip import round_trip
from kombu import Connection

from submission_api.contract.jobs import filesystem_broker_options
from worker.filesystem_transport import Transport
from worker.settings import WorkerSettings


def test_job_sent_by_name_reaches_a_real_worker_through_the_filesystem_broker(
        tmp_path: Path, monkeypatch):
    settings = WorkerSettings(broker_url="filesystem://", data_dir=tmp_path, name="fs",
                              queues=["arena.embedded"])
    assert round_trip(settings, monkeypatch, "arena.embedded") == [(42, "tok", "runtime")]
    assert list((tmp_path / "broker" / "queue").iterdir()) == []  # consumed, nothing left
    assert len(list((tmp_path / "broker" / "processed").iterdir())) == 1


def _channels(tmp_path: Path):
    """kombu's own filesystem channel (the server's producer) and the worker's consumer channel,
    on one broker folder."""
    options = filesystem_broker_options(tmp_path / "broker")
    producer = Connection("filesystem://", transport_options=options).channel()
    consumer = Connection(transport=Transport, transport_options=options).channel()
    return producer, consumer, Path(options["data_folder_in"])


def test_the_consumer_leaves_a_message_its_producer_has_not_finished(tmp_path: Path):
    producer, consumer, queue_dir = _channels(tmp_path)
    created = queue_dir / "1_a.jobs.msg"
    created.touch()  # made by the producer, not yet locked: kombu's consumer took it empty
    with pytest.raises(Empty):
        consumer._get("jobs")
    with created.open("r+b", buffering=0) as writing:
        fcntl.flock(writing.fileno(), fcntl.LOCK_EX)  # locked, still being written
        writing.write(b'{"body": "hal')
        with pytest.raises(Empty):
            consumer._get("jobs")
        writing.write(b'f"}')
        fcntl.flock(writing.fileno(), fcntl.LOCK_UN)
    assert consumer._get("jobs") == {"body": "half"}
    producer._put("jobs", {"body": "whole"})
    assert consumer._get("jobs") == {"body": "whole"}
    assert list(queue_dir.iterdir()) == []


def test_every_message_is_taken_whole_while_the_producer_writes_beside_the_consumer(
        tmp_path: Path):
    producer, consumer, _ = _channels(tmp_path)
    count, taken = 1_000, []

    def produce() -> None:
        for n in range(count):
            producer._put("jobs", {"n": n})

    thread = threading.Thread(target=produce)
    thread.start()
    while True:
        finished = not thread.is_alive()  # read before the poll: an empty poll after it is final
        try:
            taken.append(consumer._get("jobs")["n"])
        except Empty:
            if finished:
                break
    thread.join()
    assert sorted(taken) == list(range(count))
