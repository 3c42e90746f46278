"""A bounded loopback load test of the real server: uploads, status polls and leaderboard reads
against a uvicorn process on 127.0.0.1 with 10,000 submissions already in the database.

    .venv/bin/python benchmarks/load_platform.py [--postgres] [--submissions 10000]
        [--users 1000] [--requests 2000] [--concurrency 8] [--max-seconds 120]
        [--mix upload=0.1,status=0.6,leaderboard=0.3] [--json out.json]

The database (a SQLite file, or with --postgres a throwaway database on ARENA_TEST_PG) is
migrated by the server at start-up; then one open phase is created over HTTP and filled by bulk
inserts through SQLAlchemy: `--users` participants, `--submissions` finished submissions spread
over them, one finished run each with a real run summary. The server enqueues on a filesystem
broker that nobody consumes (no Redis, no worker: only the web tier is measured). Clients are
threads with one keep-alive connection each; every request goes to 127.0.0.1, the run stops
after `--requests` requests or `--max-seconds`, whichever comes first. Reported: throughput,
p50/p95/max latency per operation, and errors (any unexpected status). tests/load runs a short
form of this and asserts only that there were no errors.

    .venv/bin/python benchmarks/load_platform.py --postgres --readers 200 --uploaders 30 \
        --max-seconds 60 --json mixed.json

is the mixed form (issue 21; ARENA_LOAD_SERVER_NICE=-10 runs the server at that priority, as
root: on a shared 2-core host at load 30 its one event loop otherwise gets a few percent of a
core, a measure of the host rather than of the server): `--readers` threads read the
leaderboard, the phase list and the home page without pause while `--uploaders` threads (one
participant each) upload without pause, all at once, for `--max-seconds` (at most `--requests`
requests); `--internal` threads call the workers' API. It reports responses >= 500 and broken
connections apart (`server_errors`), which must be 0.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
MIX = {"upload": 0.1, "status": 0.6, "leaderboard": 0.3}
EXPECTED_STATUS = {"upload": 201, "status": 200, "leaderboard": 200}


@dataclass
class LoadReport:
    """What one load run measured; latencies in milliseconds."""

    requests: int = 0
    seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    server_errors: int = 0
    """Responses >= 500 and broken connections (counted as 599); not the shed ones."""
    shed: int = 0
    """503 with Retry-After: admission refused the request (issue 38.5); their latencies are
    `shed` (refused on arrival) and `shed_after_wait` (queued, then timed out)."""
    timeouts: int = 0
    """Requests the client gave up on (its time-out ran out)."""

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def table(self) -> dict[str, dict[str, float]]:
        rows = {}
        for op, values in sorted(self.latencies.items()):
            ordered = sorted(values)
            rows[op] = {"n": len(ordered), "mean_ms": statistics.fmean(ordered),
                        "p50_ms": statistics.median(ordered),
                        "p95_ms": ordered[max(0, int(0.95 * len(ordered)) - 1)],
                        "max_ms": ordered[-1]}
        return rows

    def to_dict(self) -> dict:
        every = sorted(v for values in self.latencies.values() for v in values)
        p95 = every[max(0, int(0.95 * len(every)) - 1)] if every else 0.0
        return {"requests": self.requests, "seconds": round(self.seconds, 2),
                "throughput_rps": round(self.throughput, 1), "p95_ms": round(p95, 1),
                "errors": len(self.errors), "first_errors": self.errors[:5],
                "shed_503": self.shed, "client_timeouts": self.timeouts,
                "per_operation": self.table()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def database(postgres: bool, folder: Path) -> Iterator[str]:
    """A SQLite file, or a throwaway Postgres database dropped afterwards."""
    if not postgres:
        yield f"sqlite:///{folder / 'arena.db'}"
        return
    import psycopg

    admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    name = f"arena_load_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    try:
        yield f"{base}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


SERVE = """
import asyncio, json, sys, time, uvicorn
from server.app import create_app
from server.core.config import Settings
from server.core.http_bounds import uvicorn_bounds
settings = Settings()
app, lags, probing = create_app(settings), [], []
trace_path = sys.argv[3] if len(sys.argv) > 3 else ""
trace, traced = [], [0]
async def probe_lag():
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time()
        await asyncio.sleep(0.1)
        lags.append(loop.time() - asked - 0.1)
        if len(lags) % 20 == 0:  # uvicorn re-raises SIGTERM after its shutdown: no atexit
            open(sys.argv[2], "w").write(json.dumps(lags))
            if trace_path and len(trace) > traced[0]:
                with open(trace_path, "a") as out:
                    out.write("".join(json.dumps(r) + "\\n" for r in trace[traced[0]:]))
                traced[0] = len(trace)
async def probed(scope, receive, send):
    if not probing:
        probing.append(asyncio.get_running_loop().create_task(probe_lag()))
    if not trace_path or scope["type"] != "http":
        await app(scope, receive, send)
        return
    row = ["r", (scope.get("client") or ("", 0))[1], scope["path"], time.monotonic(), 0, 0, 0]
    async def timed(message):
        if message["type"] == "http.response.start":
            row[4], row[5] = time.monotonic(), message["status"]
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            row[6] = time.monotonic()
    try:
        await app(scope, receive, timed)
    finally:
        trace.append(row)
bounds = uvicorn_bounds(settings.max_header_bytes)
if trace_path:
    class Traced(bounds["http"]):
        def connection_made(self, transport):
            super().connection_made(transport)
            self._trace_port = (transport.get_extra_info("peername") or ("", 0))[1]
            trace.append(["c", self._trace_port, time.monotonic()])
        def data_received(self, data):
            trace.append(["d", self._trace_port, time.monotonic(), len(data)])
            super().data_received(data)
    bounds["http"] = Traced
uvicorn.run(probed, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", **bounds)
"""
"""The server as `arena serve` runs it (server/cli.py: one process, the HTTP bounds), plus a
probe of its event loop's lag (how late a 0.1 s sleep wakes), written to a file every 2 s.
With a third argument, a trace file: per connection (the client's port) when the loop made it
("c") and each read of its bytes ("d"), per request when the app was called, its response
started (status) and its last byte was handed to the socket ("r"), CLOCK_MONOTONIC, appended
every 2 s (see bench_overload's `--trace`)."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SERVER_PIDS: dict[str, int] = {}
"""The server process of each base URL (for `cpu_seconds`)."""


@contextmanager
def server(database_url: str, folder: Path, tree: Path = ROOT,
           trace: Path | None = None) -> Iterator[tuple[str, str]]:
    """A uvicorn server process on 127.0.0.1 serving the checkout `tree` (another worktree for
    a side-by-side run); yields (base URL, admin token)."""
    token, port = secrets.token_urlsafe(24), free_port()
    env = {**os.environ, "ARENA_DATABASE_URL": database_url, "ARENA_DATA_DIR": str(folder),
           "ARENA_ADMIN_BOOTSTRAP_TOKEN": token, "ARENA_BROKER_URL": "filesystem://",
           "ARENA_RECONCILE_INTERVAL_S": "0"}
    log = (folder / "server.log").open("ab")
    nice = int(os.environ.get("ARENA_LOAD_SERVER_NICE", "0"))
    process = subprocess.Popen([sys.executable, "-c", SERVE, str(port), str(folder / "lag.json"),
                                *([str(trace)] if trace else [])],
                               env=env, stdout=log, stderr=log, cwd=tree,
                               preexec_fn=(lambda: os.nice(nice)) if nice else None)
    base = f"http://127.0.0.1:{port}"
    SERVER_PIDS[base] = process.pid
    try:
        deadline = time.monotonic() + 240  # migrations on a loaded host take a while
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/api/v1/phases", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            raise RuntimeError(f"the server did not answer; see {folder / 'server.log'}")
        yield base, token
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def create_phase(base: str, admin_token: str) -> int:
    body = {"slug": f"load-{uuid.uuid4().hex[:8]}", "title": "Load",
            "phases": [{"name": "load", "status": "open", "protocol": {"name": "fixed"}}]}
    answer = httpx.post(f"{base}/api/v1/competitions", json=body, timeout=30,
                        headers={"Authorization": f"Bearer {admin_token}"})
    answer.raise_for_status()
    return answer.json()["phases"][0]["id"]


def make_summary() -> dict:
    from submission_api.scoring import TaskRecord, summarize_run

    rng = random.Random(0)
    records = [TaskRecord(id=i, dataset=f"domain_{i % 5}", group="test", n_ways=2 + i % 5,
                          n_shots=1 + i % 4, score=rng.random(), accuracy=rng.random(),
                          worst_class_accuracy=rng.random()) for i in range(30)]
    return summarize_run(records).to_dict()


def bulk_insert(database_url: str, phase_id: int, n_users: int, n_submissions: int) -> None:
    """`n_users` participants and `n_submissions` finished submissions (one run each)."""
    from sqlalchemy import create_engine, insert, select

    from server.models import Run, Submission, User

    engine = create_engine(database_url)
    now = datetime.now(UTC) - timedelta(days=1)
    summary, rng = make_summary(), random.Random(1)
    with engine.begin() as conn:
        users = [{"username": f"bulk-{uuid.uuid4().hex[:6]}-{i}", "role": "participant",
                  "created_at": now} for i in range(n_users)]
        conn.execute(insert(User), users)
        ids = conn.execute(select(User.id).where(User.username.startswith("bulk-"))
                           .order_by(User.id)).scalars().all()
        for start in range(0, n_submissions, 2000):
            chunk = range(start, min(start + 2000, n_submissions))
            rows = [{"phase_id": phase_id, "user_id": ids[i % len(ids)], "sha256": f"{i:064x}",
                     "size_bytes": 100, "storage_path": f"submissions/{i:064x}.zip",
                     "state": "finished", "score": rng.random(),
                     "created_at": now + timedelta(seconds=i), "finished_at": now} for i in chunk]
            first = conn.execute(insert(Submission).returning(Submission.id), rows).scalars().all()
            conn.execute(insert(Run), [
                {"submission_id": sid, "index": 0, "seed": 0, "state": "finished",
                 "score": row["score"], "summary": summary, "attempts": 1,
                 "created_at": now, "finished_at": now}
                for sid, row in zip(first, rows, strict=True)])
    engine.dispose()


def zip_bytes(note: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.py", f"# {note}\nclass MyMetaLearner: ...\nclass MyLearner: ...\n")
    return buf.getvalue()


def run_load(base: str, tokens: list[str], phase_id: int, *, n_requests: int, concurrency: int,
             max_seconds: float, mix: dict[str, float] = MIX, seed: int = 0) -> LoadReport:
    """Send at most `n_requests` requests (or stop after `max_seconds`) from `concurrency`
    threads, each with its own participant token and keep-alive connection."""
    report, lock = LoadReport(), threading.Lock()
    budget = iter(range(n_requests))
    deadline = time.monotonic() + max_seconds
    ops, weights = list(mix), list(mix.values())

    def client(slot: int) -> None:
        rng = random.Random(seed * 1000 + slot)
        headers = {"Authorization": f"Bearer {tokens[slot % len(tokens)]}"}
        mine: list[int] = []
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            while time.monotonic() < deadline:
                with lock:
                    if next(budget, None) is None:
                        return
                op = rng.choices(ops, weights)[0]
                if op == "status" and not mine:
                    op = "upload"
                started = time.perf_counter()
                if op == "upload":
                    answer = http.post(f"/api/v1/phases/{phase_id}/submissions", files={
                        "file": ("s.zip", zip_bytes(f"{slot}-{rng.random()}"), "application/zip")})
                    if answer.status_code == 201:
                        mine.append(answer.json()["id"])
                elif op == "status":
                    answer = http.get(f"/api/v1/submissions/{rng.choice(mine)}")
                else:
                    answer = http.get(f"/api/v1/phases/{phase_id}/leaderboard")
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    report.requests += 1
                    report.latencies.setdefault(op, []).append(elapsed)
                    if answer.status_code != EXPECTED_STATUS[op]:
                        report.errors.append(f"{op}: {answer.status_code} {answer.text[:200]}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report.seconds = time.perf_counter() - started
    return report


READS = ("leaderboard", "phases", "home")


INTERNAL_PAUSE_S = 0.25
"""Between two calls of one internal prober (a worker's heartbeat and claims are sparse)."""


def run_mixed(base: str, readers: list[str], uploaders: list[str], phase_id: int, *,
              n_requests: int, max_seconds: float, client_timeout_s: float = 120,
              internal: int = 0) -> LoadReport:
    """Readers and uploaders at once, without pause, until `max_seconds` or `n_requests`;
    `internal` probers call the workers' API meanwhile (a heartbeat with a token no run has:
    the workers' admission lane, the app and the run's lookup, answered 401), every
    INTERNAL_PAUSE_S."""
    report, lock = LoadReport(), threading.Lock()
    budget = iter(range(n_requests))
    deadline = time.monotonic() + max_seconds
    paths = {"leaderboard": f"/api/v1/phases/{phase_id}/leaderboard", "phases": "/api/v1/phases",
             "home": "/"}

    def one(http: httpx.Client, op: str, rng: random.Random) -> None:
        started = time.perf_counter()
        try:
            if op == "upload":
                answer = http.post(f"/api/v1/phases/{phase_id}/submissions", files={
                    "file": ("s.zip", zip_bytes(f"{rng.random()}"), "application/zip")})
                ok = answer.status_code in (201, 429)  # 429: a quota or slot, said plainly
            elif op == "internal":
                answer = http.post("/internal/runs/1/heartbeat",
                                   headers={"Authorization": "Bearer not-a-run-token"})
                ok = answer.status_code == 401
            else:
                answer = http.get(paths[op])
                ok = answer.status_code == 200
            status, text = answer.status_code, answer.text[:200]
            shed = status == 503 and "retry-after" in answer.headers
            waited = shed and "no slot freed" in text  # refused after the whole wait
        except httpx.HTTPError as exc:
            ok, status, text = False, 599, f"{type(exc).__name__}: {exc}"
            shed = waited = False
            report.timeouts += isinstance(exc, httpx.TimeoutException)
        elapsed = (time.perf_counter() - started) * 1000
        with lock:
            report.requests += 1
            kind = ("shed_after_wait" if waited else "shed") if shed else op
            report.latencies.setdefault(kind, []).append(elapsed)
            if shed:
                report.shed += 1
            elif not ok:
                report.errors.append(f"{op}: {status} {text}")
            if status >= 500 and not shed:
                report.server_errors += 1

    def client(token: str, slot: int, kind: str) -> None:
        rng = random.Random(slot)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                          timeout=client_timeout_s) as http:
            while time.monotonic() < deadline:
                with lock:
                    if next(budget, None) is None:
                        return
                one(http, kind if kind != "read" else rng.choice(READS), rng)
                if kind == "internal":
                    time.sleep(INTERNAL_PAUSE_S)

    # uploaders and the workers' probers first: starting 1,000 reader threads on a loaded host
    # took longer than the run, and those started last never sent a request
    threads = ([threading.Thread(target=client, args=("", 20_000 + i, "internal"))
                for i in range(internal)]
               + [threading.Thread(target=client, args=(t, 10_000 + i, "upload"))
                  for i, t in enumerate(uploaders)]
               + [threading.Thread(target=client, args=(t, i, "read"))
                  for i, t in enumerate(readers)])
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report.seconds = time.perf_counter() - started
    return report


def make_tokens(base: str, admin: str, prefix: str, n: int) -> list[str]:
    tokens = []
    for i in range(n):
        answer = httpx.post(f"{base}/api/v1/users", timeout=60,
                            headers={"Authorization": f"Bearer {admin}"},
                            json={"username": f"{prefix}-{i}", "role": "participant"})
        tokens.append(answer.raise_for_status().json()["token"])
    return tokens


def load_mixed(folder: Path, *, postgres: bool = False, n_submissions: int = 10_000,
               n_users: int = 1000, readers: int = 200, uploaders: int = 30,
               n_requests: int = 100_000, max_seconds: float = 60,
               client_timeout_s: float = 120, reader_accounts: int | None = None,
               internal: int = 0) -> dict:
    """The mixed form: seed one server, then readers and uploaders at once. Readers share
    `reader_accounts` accounts in turn (default: one each)."""
    with database(postgres, folder) as url, server(url, folder) as (base, admin):
        phase_id = create_phase(base, admin)
        bulk_insert(url, phase_id, n_users, n_submissions)
        accounts = make_tokens(base, admin, "reader", min(readers, reader_accounts or readers))
        reader_tokens = [accounts[i % len(accounts)] for i in range(readers)] if accounts else []
        uploader_tokens = make_tokens(base, admin, "uploader", uploaders)
        cpu_before, client_before = cpu_seconds(SERVER_PIDS[base]), cpu_seconds(os.getpid())
        report = run_mixed(base, reader_tokens, uploader_tokens, phase_id,
                           n_requests=n_requests, max_seconds=max_seconds,
                           client_timeout_s=client_timeout_s, internal=internal)
        server_cpu_s = cpu_seconds(SERVER_PIDS[base]) - cpu_before
        client_cpu_s = cpu_seconds(os.getpid()) - client_before
    lags = sorted(json.loads((folder / "lag.json").read_text() or "[]")) \
        if (folder / "lag.json").exists() else []
    return {"database": "postgres" if postgres else "sqlite", "submissions": n_submissions,
            "readers": readers, "uploaders": uploaders, "internal": internal,
            "load_average": [round(v, 1) for v in os.getloadavg()],
            "server_errors": report.server_errors,
            "server_cpu_s": round(server_cpu_s, 1),
            "server_cpu_ms_per_request": round(1000 * server_cpu_s / max(1, report.requests), 1),
            "client_cpu_s": round(client_cpu_s, 1),  # the 1,000 client threads: a share too
            "loop_lag_ms": {"p50": round(1000 * lags[len(lags) // 2], 1) if lags else None,
                            "p95": round(1000 * lags[int(0.95 * len(lags))], 1) if lags else None,
                            "max": round(1000 * lags[-1], 1) if lags else None},
            **report.to_dict()}


def load_platform(folder: Path, *, postgres: bool = False, n_submissions: int = 10_000,
                  n_users: int = 1000, n_requests: int = 2000, concurrency: int = 8,
                  max_seconds: float = 120, mix: dict[str, float] = MIX) -> dict:
    """Set up, seed and load one server; returns the report as a dict (plus the setup)."""
    with database(postgres, folder) as url, server(url, folder) as (base, admin):
        phase_id = create_phase(base, admin)
        seeding = time.perf_counter()
        bulk_insert(url, phase_id, n_users, n_submissions)
        seeded_s = time.perf_counter() - seeding
        tokens = []
        for i in range(concurrency):
            answer = httpx.post(f"{base}/api/v1/users", timeout=30,
                                headers={"Authorization": f"Bearer {admin}"},
                                json={"username": f"load-{i}", "role": "participant"})
            tokens.append(answer.raise_for_status().json()["token"])
        report = run_load(base, tokens, phase_id, n_requests=n_requests,
                          concurrency=concurrency, max_seconds=max_seconds, mix=mix)
    return {"database": "postgres" if postgres else "sqlite", "submissions": n_submissions,
            "users": n_users, "concurrency": concurrency, "seed_seconds": round(seeded_s, 2),
            **report.to_dict()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-seconds", type=float, default=120)
    parser.add_argument("--mix", default=",".join(f"{k}={v}" for k, v in MIX.items()))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--readers", type=int, default=0, help="mixed form: reader threads")
    parser.add_argument("--uploaders", type=int, default=0, help="mixed form: upload threads")
    parser.add_argument("--client-timeout", type=float, default=120,
                        help="mixed form: each client's time-out in seconds")
    parser.add_argument("--reader-accounts", type=int, default=None,
                        help="mixed form: accounts the readers share (default one each)")
    parser.add_argument("--internal", type=int, default=0,
                        help="mixed form: probers of the workers' internal API")
    args = parser.parse_args()
    mix = {k: float(v) for k, v in (part.split("=") for part in args.mix.split(","))}
    with tempfile.TemporaryDirectory(prefix="arena-load-") as tmp:
        if args.readers or args.uploaders or args.internal:
            result = load_mixed(Path(tmp), postgres=args.postgres,
                                n_submissions=args.submissions, n_users=args.users,
                                readers=args.readers, uploaders=args.uploaders,
                                n_requests=args.requests, max_seconds=args.max_seconds,
                                client_timeout_s=args.client_timeout,
                                reader_accounts=args.reader_accounts,
                                internal=args.internal)
        else:
            result = load_platform(Path(tmp), postgres=args.postgres,
                                   n_submissions=args.submissions,
                                   n_users=args.users, n_requests=args.requests,
                                   concurrency=args.concurrency,
                                   max_seconds=args.max_seconds, mix=mix)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
