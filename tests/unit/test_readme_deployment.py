"""README's "One server, several workers" (issue 24, trap 16): a minimal environment for
`arena serve` and for `arena worker`, naming the same broker URL, and the two settings classes'
defaults agree on it (the server sends jobs where the worker takes them)."""

from __future__ import annotations

import re
from pathlib import Path

from server.core.config import Settings
from worker.settings import WorkerSettings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_shows_one_server_and_its_workers_with_one_broker():
    start = README.index("### One server, several workers")
    section = README[start:README.index("\n#", start + 10)]
    server = re.search(r"ARENA_BROKER_URL=(\S+)", section).group(1)
    worker = re.search(r"ARENA_WORKER_BROKER_URL=(\S+)", section).group(1)
    assert server == worker and not server.endswith("/0")
    for needed in ("arena serve", "arena worker", "ARENA_WORKER_SERVER_URL", "ARENA_SECRET_KEY",
                   "ARENA_WORKER_EXECUTOR"):
        assert needed in section, needed


def test_server_and_worker_default_to_the_same_broker(monkeypatch):
    for name in ("ARENA_BROKER_URL", "ARENA_WORKER_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    assert Settings().broker_url == WorkerSettings().broker_url
