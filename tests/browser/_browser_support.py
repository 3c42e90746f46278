"""Helpers for the browser tests: a live server in a thread, data seeded through the services
and the JSON API, and a fake worker that moves runs through the internal API like a real one
(claim, heartbeat, finish) but evaluates nothing.
"""

from __future__ import annotations

import io
import os
import re
import socket
import threading
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import uvicorn
from job_queue_fake import RecordingJobQueue

from server.core.db import Database
from server.models import Competition, Phase, User, utcnow
from server.services.users import issue_token, user_for_token
from submission_api.scoring.records import TaskRecord
from submission_api.scoring.summary import summarize_run

ARTIFACTS = Path(os.environ.get("ARENA_BROWSER_ARTIFACTS", "/tmp/arena-browser-artifacts"))
MODEL = b"class MyMetaLearner: ...\nclass MyLearner: ...\n"
DATASETS = ("birds", "insects", "plankton")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """uvicorn serving `app` on a free local port, in a daemon thread."""

    def __init__(self, app) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the test server did not start; see the log above")
            threading.Event().wait(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def write_zip(path: Path) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.py", MODEL)
        zf.writestr("weights.bin", b"\0" * 200_000)  # big enough for a few progress events
    path.write_bytes(buffer.getvalue())
    return path


def run_outcome(base: float) -> dict:
    """A finished run's summary and task rows, scored by submission_api.scoring."""
    records = [TaskRecord(id=i, dataset=DATASETS[i % 3], group="test", n_ways=2 + i % 4,
                          n_shots=1 + i % 3, score=min(1.0, base + 0.02 * (i % 5)),
                          accuracy=min(1.0, base + 0.1), worst_class_accuracy=base / 2)
               for i in range(12)]
    return {"state": "finished", "summary": summarize_run(records).to_dict(),
            "tasks": [r.to_dict() for r in records], "log": "meta-train done\nall 12 tasks"}


@dataclass
class Arena:
    """The seeded platform behind the browser: database, recorded jobs, HTTP client."""

    url: str
    db: Database
    queue: RecordingJobQueue
    http: httpx.Client
    done: set[int] = field(default_factory=set)

    def user(self, username: str, role: str = "participant") -> str:
        """A user and an API token for them (what they paste into the login page)."""
        with self.db.session() as s:
            user = User(username=username, role=role, created_at=utcnow())
            s.add(user)
            s.flush()
            return issue_token(s, user, now=utcnow())

    def phase(self, owner_token: str | None = None, **fields) -> int:
        """An open phase in a new competition (owned by the holder of `owner_token`)."""
        values = {"name": "feedback", "status": "open", "runs_per_submission": 1} | fields
        with self.db.session() as s:
            owner = user_for_token(s, owner_token, utcnow()).id if owner_token else None
            comp = Competition(slug=f"c-{uuid.uuid4().hex[:8]}", title="Cross-domain few-shot",
                               description="Meta-learn on some domains, be tested on others.",
                               owner_id=owner, created_at=utcnow())
            s.add(comp)
            s.flush()
            phase = Phase(competition_id=comp.id, created_at=utcnow(), **values)
            s.add(phase)
            s.flush()
            return phase.id

    def upload(self, phase_id: int, token: str, zip_path: Path) -> int:
        answer = self.http.post(f"/api/v1/phases/{phase_id}/submissions",
                                headers={"Authorization": f"Bearer {token}"},
                                files={"file": ("s.zip", zip_path.read_bytes(),
                                                "application/zip")})
        answer.raise_for_status()
        return answer.json()["id"]

    def worker(self, name: str = "gpu-worker-1") -> FakeWorker:
        return FakeWorker(self, name)


@dataclass
class FakeWorker:
    """Moves one run at a time through the internal API, as `worker/client.py` would."""

    arena: Arena
    name: str
    run_id: int = 0
    token: str = ""
    fencing: int = 0

    def claim(self) -> int:
        """Claim the oldest job not yet taken; returns its run id (state: preparing)."""
        run_id, token, _queue = next(j for j in self.arena.queue.jobs
                                     if j[0] not in self.arena.done)
        self.arena.done.add(run_id)
        self.run_id, self.token = run_id, token
        self.fencing = self._post("claim", {"worker": self.name, "host_lock": True})[  # a final's
            "fencing_token"]
        return run_id

    def heartbeat(self, stage: str = "running", progress: dict | None = None) -> None:
        body = {"fencing_token": self.fencing, "stage": stage}
        self._post("heartbeat", body | ({"progress": progress} if progress else {}))

    def finish(self, base_score: float = 0.6) -> None:
        self._post("finish", {"fencing_token": self.fencing, **run_outcome(base_score)})

    def fail(self, reason: str, message: str, log: str = "") -> None:
        """End the claimed run as the worker ends a participant failure."""
        self._post("finish", {"fencing_token": self.fencing, "state": "failed",
                              "reason": reason, "message": message, "log": log})

    def evaluate(self, base_score: float = 0.6) -> int:
        run_id = self.claim()
        self.heartbeat("running")
        self.finish(base_score)
        return run_id

    def _post(self, call: str, body: dict) -> dict:
        answer = self.arena.http.post(f"/internal/runs/{self.run_id}/{call}", json=body,
                                      headers={"Authorization": f"Bearer {self.token}"})
        answer.raise_for_status()
        return answer.json()


def shot(page, name: str) -> Path:
    """Save a full-page screenshot for a person to look at (not compared by any test)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


WIDE, NARROW = 1400, 400


def shots_at_both_widths(page, name: str) -> None:
    """Screenshots at 1400 px and 400 px (a phone), checking at 400 px that nothing widens the
    page: wide tables scroll inside their own box, long lines wrap."""
    for width in (WIDE, NARROW):
        page.set_viewport_size({"width": width, "height": 900})
        shot(page, f"{name}-{width}px")
    overflow = page.evaluate("document.documentElement.scrollWidth")
    wide = page.evaluate("""() => Array.from(document.querySelectorAll('body *'))
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
        .slice(0, 5).map(e => e.tagName + '.' + e.className)""") if overflow > NARROW else []
    assert overflow <= NARROW, f"{name}: the page is {overflow} px wide at {NARROW} px: {wide}"
    page.set_viewport_size({"width": WIDE, "height": 900})


def login(page, token: str) -> None:
    """Log in through the login page's API-token form, as a person would."""
    page.goto("/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Use this token").click()
    page.wait_for_url(re.compile(r"/(my|organizer)$"))  # participants: /my; staff: /organizer
