"""The job queue the server enqueues evaluation jobs on, by name only.

The server never imports the worker: the real queue sends the Celery job `arena.evaluate_run`
with `[run_id, run_token]` by name. Enqueueing happens only after the database commit that
created or re-queued the run, so a worker never sees a run the database does not hold; if the
broker is down, the run stays queued in the database and the reconciler sends it again.

A queue may also say which runs its broker still holds (`pending_runs`): waiting in the queue,
or taken by a worker and not yet acknowledged (Celery's `acks_late`). That is how the
reconciler tells a run lost by a restarted broker from one that merely waits its turn, within a
minute instead of a long fixed delay, and without ever sending a waiting run twice.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from submission_api.contract.jobs import EVALUATE_RUN, filesystem_broker_options

UNACKED_GRACE_S = 60.0
"""A message delivered but not acknowledged counts as held this long past its delivery; after
that, only while a live worker says it holds it (or, when no worker answers at all, until this
long past its due time) (D6)."""
INSPECT_TIMEOUT_S = 1.0
"""How long the reconciler waits for live workers to say which jobs they hold."""
log = logging.getLogger("arena.queue")
__all__ = ["EVALUATE_RUN", "CeleryJobQueue", "JobQueue", "filesystem_broker_options"]


class JobQueue(Protocol):
    def enqueue(self, run_id: int, run_token: str, queue: str, countdown_s: float = 0.0) -> None:
        """Send one evaluation job, to start no sooner than `countdown_s` from now (a back-off
        after a platform fault); may raise if the broker is unreachable."""

    def pending_runs(self, queue: str) -> set[int] | None:
        """Ids of the runs whose jobs the broker holds for `queue` (waiting, or taken and not
        acknowledged); None when this broker cannot be inspected (or is unreachable)."""


class CeleryJobQueue:
    """Sends jobs through a Celery app built lazily from the broker URL (no worker import).

    `broker_dir` is where the one-machine `filesystem://` broker keeps its messages.
    """

    def __init__(self, broker_url: str, broker_dir: Path | None = None,
                 unacked_grace_s: float = UNACKED_GRACE_S,
                 inspect_timeout_s: float = INSPECT_TIMEOUT_S) -> None:
        self.broker_url = broker_url
        self.broker_dir = broker_dir
        self.unacked_grace_s = unacked_grace_s
        self.inspect_timeout_s = inspect_timeout_s
        self._app: Any = None  # celery.Celery, built on first use

    def warm(self) -> None:
        """Open the broker connection ahead of the first upload, which would otherwise pay for
        it (0.4-3 s measured). Failures are logged: enqueueing retries, the reconciler resends."""
        try:
            # The producer pool is what send_task uses: warm that very connection.
            with self._celery().producer_or_acquire() as producer:
                producer.connection.ensure_connection(max_retries=1)
        except Exception:  # any broker failure: uploads still work once it is back
            log.warning("queue.warm.failed broker=%s", self.broker_url, exc_info=True)

    def enqueue(self, run_id: int, run_token: str, queue: str, countdown_s: float = 0.0) -> None:
        self._celery().send_task(EVALUATE_RUN, args=[run_id, run_token], queue=queue,
                                 countdown=countdown_s or None)

    def pending_runs(self, queue: str) -> set[int] | None:
        try:
            if self.broker_url.startswith(("redis://", "rediss://")):
                return _redis_pending(self.broker_url, queue, self.unacked_grace_s,
                                      self.live_task_ids)
            if self.broker_url.startswith("filesystem://") and self.broker_dir is not None:
                return _filesystem_pending(self.broker_dir, queue)
        except Exception:  # any broker failure: "cannot tell", the reconciler falls back
            log.warning("queue.inspect.failed broker=%s", self.broker_url, exc_info=True)
        return None

    def ping_workers(self, timeout_s: float) -> list[str]:
        """The Celery node names (`arena@<worker name>`) that answer a ping through the
        broker within `timeout_s`: idle workers too, which report nothing to the server."""
        replies = self._celery().control.ping(timeout=timeout_s) or []
        return sorted({name for reply in replies for name in reply})

    def live_task_ids(self) -> set[str] | None:
        """Ids of the jobs live workers hold (running, reserved, or waiting for their ETA), by
        Celery's remote control; None when no worker answers (none alive, or control off)."""
        inspector = self._celery().control.inspect(timeout=self.inspect_timeout_s)
        ids, answered = set(), False
        for kind in ("active", "reserved", "scheduled"):
            replies = getattr(inspector, kind)() or {}
            answered = answered or bool(replies)
            for entries in replies.values():
                for entry in entries or ():
                    request = entry.get("request", entry) if isinstance(entry, dict) else {}
                    if isinstance(request, dict) and request.get("id"):
                        ids.add(str(request["id"]))
        return ids if answered else None

    def _celery(self) -> Any:  # celery.Celery (untyped), imported lazily
        if self._app is None:
            import celery

            self._app = celery.Celery("arena-server", broker=self.broker_url)
            if self.broker_url.startswith("filesystem://"):
                if self.broker_dir is None:
                    raise ValueError("a filesystem:// broker needs a broker folder: set "
                                     "ARENA_DATA_DIR so that <data_dir>/broker is shared")
                self._app.conf.broker_transport_options = filesystem_broker_options(self.broker_dir)
        return self._app


# kombu's Redis transport: a list per queue (and per priority step, suffixed "\x06\x16<n>"),
# and one hash of messages delivered to a consumer but not acknowledged yet.
_REDIS_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")
_REDIS_UNACKED = "unacked"
_REDIS_UNACKED_INDEX = "unacked_index"  # delivery tag -> when it was delivered (epoch s)


def _redis_pending(url: str, queue: str, unacked_grace_s: float = UNACKED_GRACE_S,
                   live_task_ids: Callable[[], set[str] | None] | None = None) -> set[int]:
    """Runs waiting in `queue`'s lists, and those delivered but not acknowledged that are still
    held (`_still_held`)."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        raw = [m for suffix in _REDIS_PRIORITY_SUFFIXES for m in client.lrange(queue + suffix,
                                                                                0, -1)]
        unacked = client.hgetall(_REDIS_UNACKED)
        # redis-py types zrange's answer as a union over its options (with scores it is a
        # list of (member, score) pairs); a later redis-py may type it exactly.
        delivered = dict(client.zrange(  # type: ignore[arg-type, unused-ignore]
            _REDIS_UNACKED_INDEX, 0, -1, withscores=True))
    finally:
        client.close()
    now = time.time()
    taken = [(message, delivered.get(tag, now)) for tag, value in unacked.items()
             if (message := json.loads(value)[0]) is not None]
    # Only messages past their delivery's grace need asking the workers (a broadcast, ~1 s).
    settled = [m for m, at in taken if now - at >= unacked_grace_s]
    live = live_task_ids() if settled and live_task_ids is not None else None
    held = [message for message, at in taken
            if _still_held(message, at, now, unacked_grace_s, live)]
    return _run_ids([json.loads(m) for m in raw] + held)


def _still_held(message: Any, delivered_at: float, now: float, grace_s: float,
                live: set[str] | None) -> bool:
    """Whether a delivered, unacknowledged message is still with a live worker.

    Within `grace_s` of its delivery, always (the worker may not have registered it yet). Then,
    when some worker answered the inspection, only if one of them names it: a worker SIGKILLed
    while holding a back-off message leaves it unacknowledged for the 7 h visibility timeout,
    and no live worker names it, so the run is sent again within the reconciler's two passes
    of the worker's death, whatever the back-off (D6). When no worker answers (none alive, or
    remote control off), until `grace_s` past its due time.
    """
    if now - delivered_at < grace_s:
        return True
    if live is not None:
        task_id = (message.get("headers") or {}).get("id") if isinstance(message, dict) else None
        return task_id is not None and str(task_id) in live
    return now - _due_at(message, delivered_at) < grace_s


def _due_at(message: Any, delivered_at: float) -> float:
    """When a delivered message was due to run: its delivery, or its ETA (a back-off) if later.

    A live idle worker claims a run within seconds of this; a message unacknowledged well past
    it sits with a dead worker (D6: 9 minutes seen, up to the 7 h visibility timeout) or a busy
    one, and either way sending the run again is safe: the old message's token is replaced.
    """
    eta = (message.get("headers") or {}).get("eta") if isinstance(message, dict) else None
    try:
        eta_at = datetime.fromisoformat(eta).timestamp() if isinstance(eta, str) else 0.0
    except ValueError:
        eta_at = 0.0
    return max(delivered_at, eta_at)


def _filesystem_pending(broker_dir: Path, queue: str) -> set[int]:
    folder = Path(filesystem_broker_options(broker_dir)["data_folder_in"])
    messages = []
    for path in folder.glob(f"*.{queue}.msg"):
        try:
            messages.append(json.loads(path.read_bytes()))
        except (OSError, ValueError):  # taken by a worker meanwhile, or half written
            continue
    return _run_ids(messages)


def _run_ids(messages: Iterable[Any]) -> set[int]:
    """The run ids of the `arena.evaluate_run` jobs among kombu message envelopes."""
    found = set()
    for message in messages:
        run_id = run_id_of(message)
        if run_id is not None:
            found.add(run_id)
    return found


def run_id_of(message: Any) -> int | None:
    """The run id a Celery (protocol 2) message carries, or None if it is no evaluation job."""
    try:
        if message["headers"]["task"] != EVALUATE_RUN:
            return None
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return int(args[0])
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def enqueue_quietly(queue: JobQueue, jobs: list[tuple[int, str, str]],
                    countdown_s: float = 0.0) -> int:
    """Enqueue committed jobs; a broker error is logged, not raised (the reconciler retries).

    A broker that is down is one log line per batch (not a traceback per job: the first failure
    stops the batch, the rest stay queued in the database) and is noted on the queue object as
    `broker_failure` ({"at", "error", "waiting"}), which the organizer dashboard shows until a
    send succeeds again. Returns how many were sent.
    """
    sent = 0
    for index, (run_id, token, name) in enumerate(jobs):
        try:
            if countdown_s:
                queue.enqueue(run_id, token, name, countdown_s=countdown_s)
            else:  # queues written before the back-off need not take the argument
                queue.enqueue(run_id, token, name)
            sent += 1
        except Exception as exc:  # any broker failure: the rows stay queued, the reconciler resends
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
            waiting = len(jobs) - index
            log.warning("queue.enqueue.failed the broker %s does not answer (%s); %d run(s) stay "
                        "queued in the database and are resent by the reconciler once it "
                        "answers — check that it runs and ARENA_BROKER_URL points at it",
                        getattr(queue, "broker_url", "?"), error, waiting)
            _note(queue, {"at": datetime.now(UTC), "error": error, "waiting": waiting})
            return sent
    if sent:
        _note(queue, None)
    return sent


def _note(queue: JobQueue, failure: dict[str, Any] | None) -> None:
    # A queue class with __slots__ cannot carry it: nothing to show then, the log says it.
    with contextlib.suppress(AttributeError):
        queue.broker_failure = failure  # type: ignore[attr-defined]
