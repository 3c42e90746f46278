"""The server opens its broker connection at start-up, so the first upload does not pay for it;
a broker that is down only logs."""

from __future__ import annotations

import logging

from server.services.queue import CeleryJobQueue


def test_warming_a_filesystem_broker_opens_the_producer_pool(tmp_path):
    queue = CeleryJobQueue("filesystem://", tmp_path / "broker")
    queue.warm()
    assert queue._app is not None and (tmp_path / "broker" / "queue").is_dir()
    queue.enqueue(1, "tok", "arena")
    assert len(list((tmp_path / "broker" / "queue").iterdir())) == 1


def test_an_unreachable_broker_is_logged_not_raised(caplog):
    queue = CeleryJobQueue("redis://127.0.0.1:1/0")
    with caplog.at_level(logging.WARNING, logger="arena.queue"):
        queue.warm()
    assert "queue.warm.failed" in caplog.text
