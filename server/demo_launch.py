"""What `arena demo` checks before it does anything, and how it stops.

Before generating data or touching the database: the port must be free (else one line with
the fix, not a traceback after minutes of data generation), and an earlier demo's database is
wiped only when the person agrees (asked on a terminal; `--fresh` or `--keep` for scripts; a
script that says neither gets a fresh start, as before, and a line saying so). Stopping: the
worker runs in its own process group, so Ctrl-C reaches the demo alone; the demo then asks the
worker for a warm stop (it finishes its run and says which in worker.log) and a second Ctrl-C
stops it at once, its run given back for an uncharged retry (`worker.shutdown`).
"""

from __future__ import annotations

import errno
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

DB_FILES = ("arena.db", "arena.db-wal", "arena.db-shm")


class LaunchError(RuntimeError):
    """The demo cannot start as asked; the message is one line with the fix."""


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Raises LaunchError when something already listens on `host:port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                raise LaunchError(
                    f"port {port} on {host} is taken (an earlier demo or another server is "
                    f"running there); stop it, or pass --port {port + 1}") from exc
            raise


def decide_fresh(data_dir: Path, fresh: bool | None, ask: Callable[[str], bool] | None) -> bool:
    """True to wipe an earlier demo's database (and its runs), False to keep it.

    `fresh` is the command's --fresh/--keep (None: neither); `ask` asks a yes/no question on
    a terminal (None when there is none). With no earlier database there is nothing to ask."""
    if not (data_dir / "arena.db").exists():
        return True
    if fresh is not None:
        return fresh
    if ask is None:
        return True
    return ask(f"an earlier demo's database is in {data_dir} (its users, submissions and "
               "scores). Wipe it and start a fresh competition? (no: keep it and serve it)")


def wipe_state(data_dir: Path) -> None:
    """Remove the database, stored submissions, broker and runs; data and caches are kept."""
    import shutil

    for name in DB_FILES:
        (data_dir / name).unlink(missing_ok=True)
    for name in ("storage", "broker", "runs"):
        shutil.rmtree(data_dir / name, ignore_errors=True)


def stop_worker(worker: subprocess.Popen[bytes], say: Callable[[str], None], log: Path) -> None:
    """Warm stop (the worker finishes its run), then at a second Ctrl-C a stop now."""
    if worker.poll() is not None:
        return
    worker.send_signal(signal.SIGINT)
    say(f"stopping: the worker finishes the run it holds first ({log} says which and how "
        "long it may take); press Ctrl-C again to stop now — the run is given back for a "
        "retry, not charged")
    try:
        worker.wait()
    except KeyboardInterrupt:
        worker.send_signal(signal.SIGINT)  # Celery's second signal: cold shutdown
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
