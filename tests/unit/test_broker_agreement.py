"""The server and the worker describe the one-machine filesystem broker alike (they must not
import each other, so each keeps its copy): a job the server writes is where the worker reads."""

from __future__ import annotations

from server.services.queue import filesystem_broker_options as server_options
from worker.celery_app import filesystem_broker_options as worker_options


def test_server_and_worker_use_the_same_filesystem_broker_layout(tmp_path):
    assert server_options(tmp_path / "broker") == worker_options(tmp_path / "broker")
    assert (tmp_path / "broker" / "queue").is_dir()
