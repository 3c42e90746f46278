"""The real app served by uvicorn on a TCP socket (in a thread of the test process), on a
throwaway SQLite database: for account attacks that must go through HTTP as a client sends it
(cookies, form encoding, the client address the server sees), not the in-process client."""

from __future__ import annotations

import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from job_queue_fake import RecordingJobQueue

from server.app import create_app
from server.core.config import Settings


@dataclass
class LiveServer:
    base_url: str
    admin: dict[str, str]
    settings: Settings

    def client(self, headers: dict[str, str] | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers=headers or {}, timeout=30)

    def user(self, username: str, role: str = "participant", actor: dict | None = None) -> dict:
        """A user made by `actor` (an admin by default); returns the created body."""
        with self.client(actor or self.admin) as c:
            made = c.post("/api/v1/users", json={"username": username, "role": role})
        assert made.status_code == 201, made.text
        return made.json()


def form_nonce(page: str) -> str:
    """The CSRF token of the first form on a page."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, page[:400]
    return found.group(1)


@contextmanager
def live_server(root: Path, **overrides) -> Iterator[LiveServer]:
    admin_token = f"admin-{uuid.uuid4().hex}"
    settings = Settings(data_dir=root, reconcile_interval_s=0, admin_bootstrap_token=admin_token,
                        **overrides)
    sock = socket.socket()  # bound here and handed over: no other process can take the port
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(settings, queue=RecordingJobQueue())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(600):  # up to ~30 s to migrate and listen on a loaded host
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "the server did not start"
    try:
        yield LiveServer(base_url=f"http://127.0.0.1:{port}", settings=settings,
                         admin={"Authorization": f"Bearer {admin_token}"})
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
