"""The real job queue puts `arena.evaluate_run(run_id, run_token)` on Redis, by name."""

from __future__ import annotations

import base64
import json
import os
import uuid

import pytest

from server.services.queue import CeleryJobQueue

REDIS_URL = os.environ.get("ARENA_TEST_REDIS", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_client():
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no Redis"
        if os.environ.get("CI"):
            pytest.fail(f"Redis is not reachable at {REDIS_URL} ({exc})")
        pytest.skip(f"Redis is not reachable at {REDIS_URL} ({exc})")
    yield client
    client.close()


def test_celery_queue_sends_the_job_by_name_with_ids_only(redis_client):
    queue_name = f"arena-test-{uuid.uuid4().hex[:8]}"
    try:
        CeleryJobQueue(REDIS_URL).enqueue(42, "tok", queue_name)
        raw = redis_client.lpop(queue_name)
        assert raw is not None
        message = json.loads(raw)
        assert message["headers"]["task"] == "arena.evaluate_run"
        args, _kwargs, _ = json.loads(base64.b64decode(message["body"]))
        assert args == [42, "tok"]
    finally:
        redis_client.delete(queue_name, f"_kombu.binding.{queue_name}",
                            f"_kombu.binding_permanent.{queue_name}")
