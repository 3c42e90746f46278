"""The deployment broker: a real Redis (ARENA_WORKER_BROKER_URL, default redis://localhost:6379/0).

Fails, never skips, when Redis is unreachable: CI must provide it (`-m "not integration"`
deselects this tier on a laptop without Redis).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis
from broker_roundtrip import round_trip

from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration


def test_job_sent_to_a_phase_queue_reaches_a_real_worker_through_redis(tmp_path: Path,
                                                                        monkeypatch):
    settings = WorkerSettings(data_dir=tmp_path, name="redis-test")
    if not settings.broker_url.startswith("redis://"):
        pytest.fail(f"ARENA_WORKER_BROKER_URL={settings.broker_url!r}; expected a redis:// URL")
    try:
        redis.Redis.from_url(settings.broker_url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis at {settings.broker_url} is unreachable ({exc}); start one "
                    "(redis-server --daemonize yes) or set ARENA_WORKER_BROKER_URL")
    queue = f"arena.test-{uuid.uuid4().hex[:8]}"  # no clash with other workers on this Redis
    settings = settings.model_copy(update={"queues": [queue]})
    assert round_trip(settings, monkeypatch, queue) == [(42, "tok", "runtime")]
