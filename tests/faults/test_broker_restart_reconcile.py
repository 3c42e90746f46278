"""A broker restarted without persistence loses the jobs of queued runs (issue 13 item 6).

Real Redis (a private redis-server, SIGKILLed: nothing survives), real Postgres, real Celery
messages sent by the server's queue; the reconciler is called with the clock it would see.
Before the fix: the lost runs waited `requeue_after_s` (15 min), and every pass after that
re-sent every old queued run with a new token — even those still waiting in the broker, which
then went to the back of the queue with a dead token in front. Now: a run missing from the
broker on two passes once `lost_after_s` passed is sent again, once; one that waits is never
touched.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "adversarial"),
                str(Path(__file__).resolve().parents[1] / "fuzz")]
from hardening_support import PrivateRedis  # noqa: E402
from inprocess_support import zip_bytes  # noqa: E402

from server.app import create_app  # noqa: E402
from server.core.config import Settings  # noqa: E402
from server.core.security import hash_token  # noqa: E402
from server.models import Run, utcnow  # noqa: E402
from server.services.queue import CeleryJobQueue, run_id_of  # noqa: E402
from server.services.reconcile import ReconcilePolicy, reconcile  # noqa: E402

pytestmark = [pytest.mark.integration]
PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
POLICY = ReconcilePolicy(requeue_after_s=900, lost_after_s=60)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database() -> Iterator[str]:
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - any failure means "no Postgres here"
        if os.environ.get("CI"):
            pytest.fail(f"Postgres is not reachable ({exc})")
        pytest.skip(f"Postgres is not reachable ({exc})")
    name = f"arena_broker_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    try:
        yield f"{base}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def broker_jobs(redis_url: str) -> list[tuple[int, str]]:
    """(run id, run token) of every job waiting in the `arena` queue."""
    import redis

    client = redis.Redis.from_url(redis_url)
    out = []
    for raw in client.lrange("arena", 0, -1):
        message = json.loads(raw)
        args = json.loads(base64.b64decode(message["body"]))[0]
        assert run_id_of(message) == args[0]
        out.append((int(args[0]), str(args[1])))
    return sorted(out)


def test_a_lost_job_is_sent_again_within_minutes_and_a_waiting_one_never(
        redis_server: PrivateRedis, pg_database: str, tmp_path: Path) -> None:
    admin_token = uuid.uuid4().hex
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_database,
                        reconcile_interval_s=0, admin_bootstrap_token=admin_token)
    queue = CeleryJobQueue(redis_server.url)
    app = create_app(settings, queue=queue)
    admin = {"Authorization": f"Bearer {admin_token}"}
    with TestClient(app) as client:
        comp = client.post("/api/v1/competitions", headers=admin, json={
            "slug": "broker", "title": "B",
            "phases": [{"name": "dev", "status": "open", "protocol": {"name": "fixed"}}]})
        phase_id = comp.json()["phases"][0]["id"]
        for i in range(3):
            answer = client.post(f"/api/v1/phases/{phase_id}/submissions", headers=admin,
                                 files={"file": ("s.zip", zip_bytes([("model.py",
                                                                      f"# {i}\n".encode())]),
                                                 "application/zip")})
            assert answer.status_code == 201, answer.text
        db = app.state.db

        def hashes() -> dict[int, str]:
            with db.session() as session:
                return dict(session.execute(select(Run.id, Run.run_token_hash)).all())

        def pass_at(minutes: float, suspects: dict) -> list[int]:
            with db.session(write=True) as session:
                report = reconcile(session, utcnow() + timedelta(minutes=minutes), queue,
                                   POLICY, suspects)
            return report.requeued

        waiting, tokens = broker_jobs(redis_server.url), hashes()
        assert len(waiting) == 3
        # Runs that wait their turn (a busy worker pool for an hour): never sent twice.
        suspects: dict = {}
        for minute in (2, 3, 20, 40, 60):
            assert pass_at(minute, suspects) == []
        assert broker_jobs(redis_server.url) == waiting and hashes() == tokens

        redis_server.stop()  # SIGKILL, no persistence: the jobs are gone
        redis_server.start()
        assert broker_jobs(redis_server.url) == []

        assert pass_at(0.5, suspects) == []  # too young to call lost
        assert pass_at(1.5, suspects) == []  # missing once: maybe being taken right now
        requeued = pass_at(2, suspects)  # missing twice: lost, sent again
        assert sorted(requeued) == [run_id for run_id, _ in waiting]
        resent, now_hashes = broker_jobs(redis_server.url), hashes()
        assert [run_id for run_id, _ in resent] == [run_id for run_id, _ in waiting]
        assert all(hash_token(token) == now_hashes[run_id] for run_id, token in resent)
        for minute in (3, 4, 30):  # and once only
            assert pass_at(minute, suspects) == []
        assert broker_jobs(redis_server.url) == resent
