"""Slow uploads beside readers: can a few clients trickling bytes deny service to everyone?

    .venv/bin/python benchmarks/bench_upload_pressure.py [--postgres] [--readers 50]
        [--slow-users 15] [--slow-per-user 2] [--slow-seconds 40] [--fast 20] [--json out.json]

A uvicorn server on 127.0.0.1 (filesystem broker, no worker: the web tier only), one open phase.
Reader threads poll the leaderboard and their own submissions for the whole run; slow uploaders
each send a small zip as a multipart body trickled over `--slow-seconds` (so they outlast the
database pool's 30 s wait); fast uploaders send one zip after another. Reported: requests per
second and p95 per kind, every status seen, responses >= 500, and whether every accepted upload
is stored exactly once (one row per 201, each with its zip in storage, none for a refusal).
Issue 13 item 11 measured, before the fix, on the embedded server (SQLite) with 50 readers and
30 slow uploads: 40 answers 500 after 30 s (`QueuePool limit of size 5 overflow 10 reached`),
every upload timed out, readers' p99 0.66 s -> 30 s. tests/load runs a short form of this.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import httpx  # noqa: E402
from load_platform import create_phase, database, free_port, zip_bytes  # noqa: E402

BOUNDARY = "arena-pressure-boundary"


@dataclass
class Pressure:
    """What one run saw; latencies in milliseconds per kind of request."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[str, Counter] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, started: float, status: int | str, body: str = "") -> None:
        with self.lock:
            self.latencies.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
            self.statuses.setdefault(kind, Counter())[str(status)] += 1
            if not isinstance(status, int) or status >= 500:
                self.failures.append(f"{kind}: {status} {body[:200]}")

    def to_dict(self) -> dict:
        rows = {}
        for kind, values in sorted(self.latencies.items()):
            ordered = sorted(values)
            rows[kind] = {"n": len(ordered), "rps": round(len(ordered) / self.seconds, 1),
                          "p50_ms": round(statistics.median(ordered), 1),
                          "p95_ms": round(ordered[max(0, int(0.95 * len(ordered)) - 1)], 1),
                          "statuses": dict(self.statuses[kind])}
        total = sum(len(v) for v in self.latencies.values())
        return {"seconds": round(self.seconds, 1), "requests": total,
                "rps": round(total / self.seconds, 1) if self.seconds else 0.0,
                "responses_5xx_or_failed": len(self.failures), "first_failures": self.failures[:5],
                "accepted_uploads": len(self.accepted), "per_kind": rows}


@contextmanager
def pressure_server(database_url: str, folder: Path, env: dict[str, str]
                    ) -> Iterator[tuple[str, str]]:
    """A uvicorn process on 127.0.0.1 with `env` added; yields (base URL, admin token)."""
    token, port = secrets.token_urlsafe(24), free_port()
    full = {**os.environ, "ARENA_DATABASE_URL": database_url, "ARENA_DATA_DIR": str(folder),
            "ARENA_ADMIN_BOOTSTRAP_TOKEN": token, "ARENA_BROKER_URL": "filesystem://",
            "ARENA_RECONCILE_INTERVAL_S": "0", **env}
    with (folder / "server.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "server.app:create_app", "--host",
             "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            env=full, stdout=log, stderr=log, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/v1/phases", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer; see {folder / 'server.log'}")
            time.sleep(0.3)
        yield base, token
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def trickle(data: bytes, seconds: float, pieces: int = 20) -> Iterator[bytes]:
    """A multipart body carrying `data` as 'file', sent in `pieces` over `seconds`."""
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"s.zip\"\r\nContent-Type: application/zip\r\n\r\n").encode()
    body = head + data + f"\r\n--{BOUNDARY}--\r\n".encode()
    size = -(-len(body) // pieces)
    for start in range(0, len(body), size):
        yield body[start:start + size]
        time.sleep(seconds / pieces)


def new_tokens(base: str, admin: str, prefix: str, n: int) -> list[str]:
    tokens = []
    for i in range(n):
        answer = httpx.post(f"{base}/api/v1/users", timeout=60,
                            headers={"Authorization": f"Bearer {admin}"},
                            json={"username": f"{prefix}-{i}", "role": "participant"})
        tokens.append(answer.raise_for_status().json()["token"])
    return tokens


def run_pressure(base: str, admin: str, phase_id: int, *, readers: int, slow_users: int,
                 slow_per_user: int, slow_seconds: float, fast: int) -> Pressure:
    """Readers and fast uploaders run while the slow uploads last (and a little after)."""
    seen = Pressure()
    done = threading.Event()
    url = f"/api/v1/phases/{phase_id}/submissions"

    def upload(kind: str, http: httpx.Client, content, headers: dict) -> None:
        started = time.perf_counter()
        try:
            answer = http.post(url, content=content, headers=headers)
        except httpx.HTTPError as exc:
            seen.record(kind, started, type(exc).__name__, str(exc))
            return
        seen.record(kind, started, answer.status_code, answer.text)
        if answer.status_code == 201:
            with seen.lock:
                seen.accepted.append(answer.json()["id"])
        elif answer.status_code in (429, 503) and "retry-after" not in answer.headers:
            seen.record(kind, started, "no Retry-After", answer.text)

    def slow(token: str, n: int) -> None:
        headers = {"Authorization": f"Bearer {token}",
                   "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
        with httpx.Client(base_url=base, timeout=slow_seconds + 90) as http:
            upload("slow_upload", http, trickle(zip_bytes(f"slow-{token[:6]}-{n}"),
                                                slow_seconds), headers)

    def fast_loop(token: str, slot: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
            n = 0
            while not done.is_set():
                n += 1
                started = time.perf_counter()
                try:
                    answer = http.post(url, files={"file": ("s.zip", zip_bytes(
                        f"fast-{slot}-{n}"), "application/zip")})
                except httpx.HTTPError as exc:
                    seen.record("fast_upload", started, type(exc).__name__, str(exc))
                    continue
                seen.record("fast_upload", started, answer.status_code, answer.text)
                if answer.status_code == 201:
                    with seen.lock:
                        seen.accepted.append(answer.json()["id"])
                time.sleep(0.5)

    def read_loop(token: str, slot: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        paths = [f"/api/v1/phases/{phase_id}/leaderboard", "/api/v1/me/submissions",
                 f"/api/v1/phases/{phase_id}"]
        with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
            n = slot
            while not done.is_set():
                n += 1
                started = time.perf_counter()
                try:
                    answer = http.get(paths[n % len(paths)])
                    seen.record("read", started, answer.status_code, answer.text)
                except httpx.HTTPError as exc:
                    seen.record("read", started, type(exc).__name__, str(exc))

    slow_tokens = new_tokens(base, admin, "slow", slow_users)
    fast_tokens = new_tokens(base, admin, "fast", fast)
    reader_tokens = new_tokens(base, admin, "reader", max(1, min(readers, 10)))
    slow_threads = [threading.Thread(target=slow, args=(t, i)) for t in slow_tokens
                    for i in range(slow_per_user)]
    others = ([threading.Thread(target=fast_loop, args=(t, i))
               for i, t in enumerate(fast_tokens)]
              + [threading.Thread(target=read_loop, args=(reader_tokens[i % len(reader_tokens)],
                                                          i)) for i in range(readers)])
    started = time.perf_counter()
    for thread in slow_threads + others:
        thread.start()
    for thread in slow_threads:
        thread.join()
    time.sleep(2)  # readers and fast uploads go on a moment after the last slow one
    done.set()
    for thread in others:
        thread.join()
    seen.seconds = time.perf_counter() - started
    return seen


def stored_once(database_url: str, storage: Path, phase_id: int, accepted: list[int]) -> dict:
    """Rows and files of the phase's submissions against the accepted answers."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(sqlalchemy.text(
            "SELECT id, sha256, storage_path FROM submissions WHERE phase_id = :p"),
            {"p": phase_id}).all()
    engine.dispose()
    ids = sorted(r.id for r in rows)
    return {"rows": len(rows), "rows_match_accepted": ids == sorted(accepted),
            "distinct_zips": len({r.sha256 for r in rows}),
            "missing_files": sum(not (storage / r.storage_path).is_file() for r in rows)}


def upload_pressure(folder: Path, *, postgres: bool = False, readers: int = 50,
                    slow_users: int = 15, slow_per_user: int = 2, slow_seconds: float = 40,
                    fast: int = 10, env: dict[str, str] | None = None) -> dict:
    """One run on a fresh server and database; returns the report as a dict."""
    with database(postgres, folder) as url, \
            pressure_server(url, folder, env or {}) as (base, admin):
        phase_id = create_phase(base, admin)
        seen = run_pressure(base, admin, phase_id, readers=readers, slow_users=slow_users,
                            slow_per_user=slow_per_user, slow_seconds=slow_seconds, fast=fast)
        storage = stored_once(url, folder / "storage", phase_id, seen.accepted)
    return {"database": "postgres" if postgres else "sqlite", "readers": readers,
            "slow_uploads": slow_users * slow_per_user, "slow_seconds": slow_seconds,
            "fast_uploaders": fast, **seen.to_dict(), "storage": storage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--slow-users", type=int, default=15)
    parser.add_argument("--slow-per-user", type=int, default=2)
    parser.add_argument("--slow-seconds", type=float, default=40)
    parser.add_argument("--fast", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arena-pressure-") as tmp:
        result = upload_pressure(Path(tmp), postgres=args.postgres, readers=args.readers,
                                 slow_users=args.slow_users, slow_per_user=args.slow_per_user,
                                 slow_seconds=args.slow_seconds, fast=args.fast)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
