"""A real platform for end-to-end tests: a uvicorn server process on a throwaway Postgres database,
Celery worker processes on real Redis, and the Docker sandbox. Helpers drive it over HTTP only,
as a participant, an organizer or an operator would.

Importable by name (tests/e2e has no __init__); the `platform` fixture in conftest builds one.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
from arena_test_services import require_service

from submission_api.submission_zip import build_submission_zip

TERMINAL = {"finished", "failed", "timed_out", "cancelled"}
PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("ARENA_TEST_REDIS", "redis://127.0.0.1:6379/13")
SANDBOX_IMAGE = "metadl-arena/sandbox:cpu"
TLS = ssl.create_default_context()
"""One SSL context for every client the helpers make: httpx builds one per client otherwise,
loading the CA bundle (~23 ms of CPU a client), and each wait's poll made a client."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout_s: float, what: str, every_s: float = 0.5):  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


@dataclass
class Platform:
    """Handles on the running processes, plus HTTP helpers."""

    root: Path
    database_url: str
    base_url: str
    admin_token: str
    server: subprocess.Popen | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)
    queue: str = field(default_factory=lambda: f"e2e-{uuid.uuid4().hex[:8]}")
    """The platform's own queue, on this test process's own Redis database: two platforms at
    once (xdist workers, two checkouts) never take each other's jobs."""
    reset_dentries: bool = False
    """Whether its workers drop the host's dentries before each run (the workers' default, issue
    34). Off here: each drop also moves the host's reclaim counters, so the next run of every
    worker on the host reads the whole 1 GB image again (`worker.prefault`: 3-11 s a run at load
    15, beside the drop's own 0.3-1.2 s and every other test process's lost dentries). The
    modules that measure isolation on the platform turn it on (`RESET_DENTRIES = True`, read by
    tests/e2e/conftest.py); the reset itself is checked in test_sandbox_dentry_reset.py."""

    # --- processes -------------------------------------------------------------------------
    def server_env(self) -> dict[str, str]:
        return {**os.environ, "ARENA_DATABASE_URL": self.database_url,
                "ARENA_BROKER_URL": REDIS_URL, "ARENA_DATA_DIR": str(self.root / "server"),
                "ARENA_ADMIN_BOOTSTRAP_TOKEN": self.admin_token, "ARENA_LEASE_SECONDS": "15",
                "ARENA_RECONCILE_INTERVAL_S": "2", "ARENA_REQUEUE_AFTER_S": "600",
                "ARENA_DEFAULT_QUEUE": self.queue}

    def start_server(self) -> None:
        port = self.base_url.rsplit(":", 1)[1]
        log = (self.root / "server.log").open("ab")
        self.server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "server.app:create_app",
             "--host", "127.0.0.1", "--port", port, "--log-level", "warning"],
            env=self.server_env(), stdout=log, stderr=log)
        wait_until(self._server_answers, 60, "the server to answer")

    def _server_answers(self) -> bool:
        try:
            answer = httpx.get(f"{self.base_url}/api/v1/phases", timeout=2, verify=TLS)
            return answer.status_code == 200
        except httpx.HTTPError:
            return False

    def start_worker(self, name: str = "w1", **env: str) -> subprocess.Popen:
        values = {"ARENA_WORKER_BROKER_URL": REDIS_URL, "ARENA_WORKER_SERVER_URL": self.base_url,
                  "ARENA_WORKER_DATA_DIR": str(self.root / f"worker-{name}"),
                  "ARENA_WORKER_EXECUTOR": "docker", "ARENA_WORKER_NAME": name,
                  "ARENA_WORKER_HEARTBEAT_INTERVAL_S": "3",
                  "ARENA_WORKER_QUEUES": f'["{self.queue}"]',
                  "ARENA_WORKER_MAX_TIME_LIMIT_S": "120", "ARENA_WORKER_VISIBILITY_MARGIN_S": "30",
                  "ARENA_WORKER_RESET_DENTRIES": "1" if self.reset_dentries else "0", **env}
        log = (self.root / f"worker-{name}.log").open("ab")
        process = subprocess.Popen([sys.executable, "-m", "worker"], env={**os.environ, **values},
                                   stdout=log, stderr=log, start_new_session=True)
        self.workers.append(process)
        return process

    def kill_worker(self, process: subprocess.Popen) -> None:
        """SIGKILL the worker and its pool, as a crashed host would lose them."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def stop(self) -> None:
        """Stop the server and the workers, then sweep what the workers left.

        A worker's pool and its run's processes live in the worker's session: a main process
        that outlives its warm shutdown, or dies before its children, would leave them polling
        a queue and holding a run's loop-mounted output for the rest of the suite (loop devices
        are few, host-wide). So the session goes after the main process, and each worker's data
        folder is swept as a worker's start would sweep it (no worker starts there again)."""
        for process in [*self.workers, self.server]:
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for process in self.workers:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        self._sweep_worker_folders()

    def _sweep_worker_folders(self) -> None:
        sweep_worker_folders(sorted(self.root.glob("worker-*/runs")), self.base_url)

    # --- HTTP ------------------------------------------------------------------------------
    def api(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token or self.admin_token}"}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=60, verify=TLS)

    def create_user(self, username: str, role: str = "participant") -> str:
        with self.api() as api:
            answer = api.post("/api/v1/users", json={"username": username, "role": role})
            return answer.raise_for_status().json()["token"]

    def register_collection(self, collection_dir: Path, cache_dir: Path,
                            extra_test: tuple[str, ...] = ()) -> dict:
        """Compile a collection and register its datasets; returns the phase `data` field.

        `extra_test` adds datasets outside the collection's splits to the meta-test role (the
        attribute-annotated one for fewstab, the many-class one for within-domain)."""
        from submission_api.data import load_collection

        collection = load_collection(collection_dir, cache_dir)
        data: dict = {"collection": collection.name}
        with self.api() as api:
            for role, split in (("meta_train", "meta-train"), ("meta_valid", "meta-valid"),
                                ("meta_test", "meta-test")):
                data[role] = []
                names = list(collection.splits.get(split, []))
                names += list(extra_test) if role == "meta_test" else []
                for name in names:
                    root = str(collection.datasets[name].root)
                    row = api.post("/api/v1/datasets/from-path", json={"path": root})
                    if row.status_code == 409:  # registered by an earlier test
                        row = api.get("/api/v1/datasets")
                        digest = collection.datasets[name].content_hash
                        assert any(d["content_hash"] == digest for d in row.json())
                    else:
                        digest = row.raise_for_status().json()["content_hash"]
                    data[role].append({"name": name, "content_hash": digest})
        return data

    def create_phase(self, organizer_token: str, data: dict, **fields) -> int:
        phase = {"name": "feedback", "status": "open", "data": data, "seed": 0,
                 "protocol": {"name": "cross-domain", "tasks_per_dataset": 3},
                 "runs_per_submission": 1, "time_limit_s": 120,
                 "resources": {"cpus": 1, "memory_mb": 2048, "gpus": 0}, **fields}
        body = {"slug": f"e2e-{uuid.uuid4().hex[:8]}", "title": "E2E", "phases": [phase]}
        with self.api(organizer_token) as api:
            answer = api.post("/api/v1/competitions", json=body).raise_for_status()
            return answer.json()["phases"][0]["id"]

    def submit(self, token: str, phase_id: int, archive: Path) -> int:
        with self.api(token) as api, archive.open("rb") as handle:
            answer = api.post(f"/api/v1/phases/{phase_id}/submissions",
                              files={"file": (archive.name, handle, "application/zip")})
            return answer.raise_for_status().json()["id"]

    def submission(self, token: str, submission_id: int) -> dict:
        with self.api(token) as api:
            return api.get(f"/api/v1/submissions/{submission_id}").raise_for_status().json()

    def wait_terminal(self, token: str, submission_id: int, timeout_s: float = 300) -> dict:
        return wait_until(
            lambda: (s := self.submission(token, submission_id))["state"] in TERMINAL and s,
            timeout_s, f"submission {submission_id} to reach a final state", every_s=1)


def require_redis_and_docker(redis_url: str = REDIS_URL) -> None:
    """Ping (never flush: the db is shared) Redis; check the sandbox image exists."""
    try:
        import redis

        redis.Redis.from_url(redis_url, socket_timeout=3).ping()
    except Exception as error:  # noqa: BLE001
        require_service("Redis", str(error))
    try:
        import docker

        docker.from_env().images.get(SANDBOX_IMAGE)
    except Exception as error:  # noqa: BLE001
        require_service("Docker sandbox image", f"{error}; run scripts/services.sh")


PlatformT = TypeVar("PlatformT", bound=Platform)


@contextmanager
def started_platform(kind: type[PlatformT], root: Path, *,
                     migrated: bool = True) -> Iterator[PlatformT]:
    """A `kind` of platform on a throwaway database with its server answering; stopped after.

    `migrated=False` hands the server an empty database to migrate at its start, as a new
    deployment's is (the rehearsal); else a copy of one migrated once (`throwaway_database`)."""
    require_redis_and_docker()
    with throwaway_database(migrated=migrated) as url:
        platform = kind(root=root, database_url=url, base_url=f"http://127.0.0.1:{free_port()}",
                        admin_token=secrets.token_urlsafe(24))
        try:
            platform.start_server()
            yield platform
        finally:
            platform.stop()


@contextmanager
def throwaway_database(admin_url: str = PG_ADMIN_URL, *, migrated: bool = False) -> Iterator[str]:
    """A fresh database on the Postgres at `admin_url`; yields its SQLAlchemy URL.

    `migrated=True`: a copy (`CREATE DATABASE ... TEMPLATE`, ~0.3 s) of a database migrated to
    the migrations' head once per version of them (`migrated_template`), so the server's own
    migration at its start finds nothing to do."""
    try:
        import psycopg

        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=3)
    except Exception as error:  # noqa: BLE001 - any failure means no Postgres
        require_service("Postgres", str(error))
    name = f"arena_test_{uuid.uuid4().hex[:10]}"
    template = f' TEMPLATE "{migrated_template(admin, admin_url)}"' if migrated else ""
    admin.execute(f'CREATE DATABASE "{name}"{template}')
    try:
        yield f"{_sqlalchemy_base(admin_url)}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _sqlalchemy_base(admin_url: str) -> str:
    return admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")


MIGRATIONS = Path(__file__).resolve().parents[2] / "server" / "migrations"
TEMPLATE_LOCK = 0x41524E54  # pg_advisory_lock key: one builder at a time on a cluster


def migrations_key() -> str:
    """A digest of every migration file: a changed, added or removed one names a new template,
    so no test copies a database migrated by other migrations than its checkout's."""
    digest = hashlib.sha256()
    for path in sorted(MIGRATIONS.rglob("*.py")):
        digest.update(path.relative_to(MIGRATIONS).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def migrated_template(admin, admin_url: str) -> str:  # noqa: ANN001 - a psycopg connection
    """The name of a database migrated to head by this checkout's migrations, built the first
    time (under an advisory lock: xdist workers and other checkouts share the cluster).

    It is built under another name and renamed when complete, so a half-migrated one is never
    copied; it refuses connections afterwards (a connection would make every copy fail)."""
    name = f"arena_template_{migrations_key()}"
    admin.execute("SELECT pg_advisory_lock(%s)", (TEMPLATE_LOCK,))
    try:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if exists.fetchone() is None:
            from server.core.db import upgrade_database

            building = f"{name}_building"
            admin.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{building}"')
            upgrade_database(f"{_sqlalchemy_base(admin_url)}/{building}")  # NullPool: no
            admin.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')  # connection left
            admin.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false')
    finally:
        admin.execute("SELECT pg_advisory_unlock(%s)", (TEMPLATE_LOCK,))
    return name


MODEL = '''
import os, sys, time, json
import numpy as np, torch
from submission_api.api import MetaLearner, Learner, Predictor
CALLS = {"fit": 0, "predict": 0}
{top}

class MyPredictor(Predictor):
    def __init__(self, means):
        self.means = means
    def predict(self, query_set):
        CALLS["predict"] += 1
{predict}
        return (-torch.cdist(query_set.flatten(1), self.means)).numpy()

class MyLearner(Learner):
    def fit(self, support_set):
        CALLS["fit"] += 1
{fit}
        x, y, _, n_ways, _ = support_set
        x = x.flatten(1)
        return MyPredictor(torch.stack([x[y == c].mean(0) for c in range(n_ways)]))
    def save(self, path):
        pass
    def load(self, path):
        pass

class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
{meta_fit}
        return MyLearner()
'''


def make_model_zip(folder: Path, *, top: str = "", meta_fit: str = "pass", fit: str = "pass",
                   predict: str = "pass", config: str | None = None) -> Path:
    """A nearest-centroid submission (fast, deterministic, clearly above chance) with
    participant code spliced into its hooks, and an optional config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(config)
    source = MODEL.replace("{top}", textwrap.dedent(top))
    for hook, code in (("meta_fit", meta_fit), ("fit", fit), ("predict", predict)):
        source = source.replace("{" + hook + "}", textwrap.indent(textwrap.dedent(code), " " * 8))
    (folder / "model.py").write_text(source)
    return build_submission_zip(folder, folder.with_suffix(".zip"))


def sweep_worker_folders(runs_dirs: list[Path], base_url: str) -> None:
    """What stopped workers left in their data folders (containers, a run's loop-mounted output
    and its loop device, run folders: nothing removes them if no worker starts there again),
    swept as a worker's start would (`worker.sweep`, under each folder's runs lock); a folder a
    live worker still holds is left alone."""
    runs_dirs = [folder for folder in runs_dirs if folder.is_dir()]
    if not runs_dirs:
        return
    import docker
    from worker.pipeline.execute import compute_deployment_id
    from worker.sweep import hold_runs_lock, sweep_orphans

    client = docker.from_env()
    try:
        for runs_dir in runs_dirs:
            handle, exclusive = hold_runs_lock(runs_dir)
            try:
                if exclusive:
                    sweep_orphans(client, compute_deployment_id(base_url), runs_dir)
            finally:
                handle.close()
    finally:
        client.close()
