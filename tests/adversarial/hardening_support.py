"""A real platform for the hardening suites (adversarial, faults): the e2e `Platform`, isolated.

Every platform has a queue of its own on its test process's Redis database (platform_support);
here it may also get its own broker (fault injection: its own Redis and Postgres), so suites never
see each other's jobs. Also: a participant model template with hooks, and checks that the
host is intact.

Importable by name: the conftests of tests/adversarial and tests/faults put this folder and
tests/e2e on sys.path.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from arena_test_services import require_service
from platform_support import (
    REDIS_URL,
    TERMINAL,
    Platform,
    free_port,
    wait_until,
)

SANDBOX_LABEL = "org.metadl-arena.role=sandbox"

@dataclass
class IsolatedPlatform(Platform):
    """The e2e platform with its own queue name, broker URL and optional extra server env."""

    broker_url: str = REDIS_URL
    extra_server_env: dict | None = None

    def server_env(self) -> dict[str, str]:
        return {**super().server_env(), "ARENA_BROKER_URL": self.broker_url,
                "ARENA_DEFAULT_QUEUE": self.queue, **(self.extra_server_env or {})}

    def start_worker(self, name: str = "w1", **env: str) -> subprocess.Popen:
        values = {"ARENA_WORKER_BROKER_URL": self.broker_url,
                  "ARENA_WORKER_QUEUES": f'["{self.queue}"]', **env}
        return super().start_worker(name, **values)

    def stop_server(self, kill: bool = True) -> None:
        """Stop the server process (SIGKILL by default, as a crashed host would)."""
        if self.server is not None and self.server.poll() is None:
            self.server.kill() if kill else self.server.terminate()
            self.server.wait(timeout=30)

    def final_states(self, token: str, ids: list[int], timeout_s: float) -> dict[int, dict]:
        """Wait until every submission in `ids` is terminal; returns id -> submission.

        One listing of the owner's submissions a second, on one connection (a GET and a client
        per submission was 10-15 requests a second through a batch)."""
        done: dict[int, dict] = {}
        deadline = time.monotonic() + timeout_s
        with self.api(token) as api:
            while len(done) < len(ids):
                listed = {s["id"]: s for s in api.get(
                    "/api/v1/me/submissions", params={"limit": 500}).raise_for_status().json()}
                for sid in [sid for sid in ids if sid not in done]:
                    current = listed.get(sid) or api.get(  # older than the 500 newest
                        f"/api/v1/submissions/{sid}").raise_for_status().json()
                    if current["state"] in TERMINAL:
                        done[sid] = current
                if time.monotonic() > deadline:
                    missing = sorted(set(ids) - set(done))
                    raise AssertionError(f"submissions {missing} not final after {timeout_s:g} s")
                if len(done) < len(ids):
                    time.sleep(1)
        return done


def new_platform(root: Path, database_url: str, **fields) -> IsolatedPlatform:
    return IsolatedPlatform(root=root, database_url=database_url,
                            base_url=f"http://127.0.0.1:{free_port()}",
                            admin_token=secrets.token_urlsafe(24),
                            queue=f"hard-{uuid.uuid4().hex[:8]}", **fields)


def leftover_sandboxes(server_url: str, run_ids: list[int]) -> list[str]:
    """Names of sandbox containers of these runs of this deployment still present (none, ever)."""
    import docker
    from worker.pipeline.execute import compute_deployment_id, container_prefix

    deployment = compute_deployment_id(server_url)
    # ignore_removed: a container (another suite's, on a shared host) removed between the list
    # and its inspection is gone, not an error (it was: 404 Not Found, under load).
    names = [c.name for c in docker.from_env().containers.list(
        all=True, filters={"label": SANDBOX_LABEL}, ignore_removed=True)]
    return [n for n in names
            if any(n.startswith(container_prefix(deployment, r)) for r in run_ids)]


# --- private services for fault injection ----------------------------------------------------
class PrivateRedis:
    """A redis-server of our own on a free port, with no persistence: a restart loses its data,
    as a crashed broker without AOF would."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        if shutil.which("redis-server") is None:
            require_service("redis-server", "the redis-server binary is not installed")
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: _port_open(self.port), 20, "the private Redis to listen")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=20)


class PrivatePostgres:
    """A Postgres cluster of our own (initdb in a temp folder, run as user postgres), so that
    stopping it never touches the shared cluster other tests use."""

    def __init__(self) -> None:
        self.port = free_port()
        # Its own folder under /tmp: pytest's are private to us, and postgres must traverse it.
        self.workdir = Path(tempfile.mkdtemp(prefix="arena-pg-"))
        self.workdir.chmod(0o755)
        self.datadir = self.workdir / "pgdata"
        self.socket_dir = self.workdir / "pgsock"
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, *command: str) -> subprocess.CompletedProcess:
        prefix = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
        return subprocess.run([*prefix, *command], capture_output=True, text=True, check=False)

    def init(self) -> None:
        initdb = shutil.which("initdb")
        if initdb is None or not shutil.which("pg_ctl"):
            require_service("Postgres binaries", "initdb/pg_ctl are not on PATH")
        for folder in (self.datadir, self.socket_dir):
            folder.mkdir(parents=True)
            if os.geteuid() == 0:
                shutil.chown(folder, "postgres", "postgres")
        done = self._as_postgres(initdb, "-D", str(self.datadir), "-U", "postgres",
                                 "-A", "trust", "--no-sync")
        if done.returncode != 0:
            require_service("a private Postgres", f"initdb failed: {done.stderr[-500:]}")
        self.start()

    def start(self) -> None:
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        done = self._as_postgres("pg_ctl", "-D", str(self.datadir), "-o", options, "-w",
                                 "-l", str(self.socket_dir / "pg.log"), "start")
        if done.returncode != 0:
            raise AssertionError(f"private Postgres did not start: {done.stderr[-500:]}")

    def stop(self, mode: str = "immediate") -> None:
        self._as_postgres("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0
