"""A competition from bundle to final leaderboard, in-process on real Postgres.

An organizer creates the NeurIPS'22-shaped example from its bundle (the CLI's code compiles and
registers the generated data); participants submit in the feedback phase under its quotas
(including two uploads at the same instant); the phase closes when its end passes; chosen
submissions above their league threshold are carried into the final, each run with 3 seeds by a
fake worker over the internal API; the final board ranks by the worst of the three runs.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from arena_test_services import require_service
from fastapi.testclient import TestClient
from job_queue_fake import RecordingJobQueue
from sqlalchemy import select

from server.app import create_app, reconcile_policy
from server.core.config import Settings
from server.core.db import upgrade_database
from server.models import Submission
from server.services.reconcile import reconcile
from starting_kit.commands.remote_client import ArenaClient, RemoteError, bundle_request, submit

PG_ADMIN = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "neurips22" / "competition.yaml"
ADMIN_TOKEN = "admin-token-for-the-lifecycle-test"


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2022, 7, 15, 12, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def pg_database():
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except Exception as error:  # noqa: BLE001 - any failure means no Postgres
        require_service("Postgres", str(error))
    name = f"arena_life_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
        url = f"{url}/{name}"
        upgrade_database(url)
        yield url
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@dataclass
class Arena:
    client: TestClient
    app: object
    queue: RecordingJobQueue
    clock: Clock
    done: int = 0  # jobs of the queue already handled by the fake worker

    def user(self, name: str, role: str = "participant") -> ArenaClient:
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        made = self.client.post("/api/v1/users", headers=admin,
                                json={"username": name, "role": role})
        assert made.status_code == 201, made.text
        return ArenaClient(self.client, made.json()["token"])

    def claim_new_jobs(self) -> list[tuple[int, str, int]]:
        """Claim every job not handled yet (as parallel workers would): (run, token, fencing)."""
        jobs, self.done = self.queue.jobs[self.done:], len(self.queue.jobs)
        claimed = []
        for i, (run_id, token, _) in enumerate(jobs):
            answer = self.client.post(f"/internal/runs/{run_id}/claim",
                                      json={"worker": f"gpu-{i}", "gpus": [i],
                                            "host_lock": True},  # the final's runs are secret
                                      headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
            claimed.append((run_id, token, answer.json()["fencing_token"]))
        return claimed

    def finish(self, run: tuple[int, str, int], score: float, dataset: str) -> None:
        run_id, token, fencing = run
        summary = {"mean": score, "ci95": 0.02, "n_tasks": 1,
                   "per_dataset": {dataset: {"mean": score, "ci95": 0.02, "n": 1}}}
        answer = self.client.post(f"/internal/runs/{run_id}/finish", json={
            "fencing_token": fencing, "state": "finished", "summary": summary, "log": "ok",
            "tasks": [{"id": 0, "dataset": dataset, "n_ways": 5, "n_shots": 1,
                       "score": score}]}, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text

    def evaluate(self, score: float, dataset: str = "spectra") -> None:
        for run in self.claim_new_jobs():
            self.finish(run, score, dataset)


@pytest.fixture
def arena(pg_database, tmp_path):
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_database,
                        auto_migrate=False, reconcile_interval_s=0,
                        admin_bootstrap_token=ADMIN_TOKEN)
    queue, clock = RecordingJobQueue(), Clock()
    app = create_app(settings, queue=queue, clock=clock)
    with TestClient(app) as client:
        yield Arena(client=client, app=app, queue=queue, clock=clock)


def create_example(arena: Arena, organizer: ArenaClient, tmp_path: Path, tiny_collection,
                   cache: Path) -> dict:
    bundle_dir = tmp_path / "bundle"  # the example's folder: its kit names files beside it
    shutil.copytree(EXAMPLE.parent, bundle_dir, ignore=shutil.ignore_patterns("data"))
    (bundle_dir / "data").symlink_to(tiny_collection, target_is_directory=True)
    body = bundle_request(organizer, bundle_dir / "competition.yaml", cache)
    comp = organizer.call("POST", "/api/v1/competitions/bundle", json=body).json()
    return {p["name"]: p for p in comp["phases"]} | {"_comp": comp}


def race_two_uploads(arena: Arena, who: ArenaClient, phase_id: int, folder: Path) -> list:
    """Two uploads released at the same instant; returns their outcomes."""
    barrier, outcomes = threading.Barrier(2), []

    def upload(i: int) -> None:
        (folder / f"v{i}").mkdir()
        (folder / f"v{i}" / "model.py").write_text(f"# variant {i}\nclass MyMetaLearner: ...\n")
        barrier.wait()
        try:
            outcomes.append(submit(who, folder / f"v{i}", phase_id, show=False)["id"])
        except RemoteError as error:
            outcomes.append(str(error))

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_bundle_to_final_leaderboard(arena, tmp_path, tiny_collection, arena_cache):
    organizer = arena.user("olga", role="organizer")
    alice, bob, dave = arena.user("alice"), arena.user("bob"), arena.user("dave")
    phases = create_example(arena, organizer, tmp_path, tiny_collection, arena_cache)
    feedback, final = phases["feedback"], phases["final"]
    assert (feedback["quota_per_day"], feedback["quota_total"]) == (2, 100)
    assert (feedback["time_limit_s"], final["time_limit_s"]) == (5 * 3600, 9 * 3600)
    assert final["runs_per_submission"] == 3 and final["carry_from_id"] == feedback["id"]
    assert [lg["name"] for lg in phases["_comp"]["leagues"]] == ["free-style", "meta-learning"]

    zips = tmp_path / "zips"
    zips.mkdir()
    (zips / "m.py").write_text("class MyMetaLearner: ...\nclass MyLearner: ...\n")
    model = zips / "model"
    model.mkdir()
    shutil.copy(zips / "m.py", model / "model.py")

    # organizer baseline, flagged as such (free-style, the default league)
    base = submit(organizer, model, feedback["id"], show=False)
    arena.evaluate(0.31)
    organizer.post(f"/api/v1/submissions/{base['id']}/baseline", json={"baseline": True})

    # alice: two a day, the third refused; she selects her second
    a1 = submit(alice, model, feedback["id"], note="first", show=False)
    arena.evaluate(0.45)
    a2 = submit(alice, model, feedback["id"], note="second", show=False)
    arena.evaluate(0.40)
    with pytest.raises(RemoteError, match="quota.per_day"):
        submit(alice, model, feedback["id"], show=False)
    alice.post(f"/api/v1/submissions/{a2['id']}/select")

    # bob: two uploads at the same instant race for one in-flight slot: exactly one wins
    outcomes = race_two_uploads(arena, bob, feedback["id"], zips)
    accepted = [o for o in outcomes if isinstance(o, int)]
    assert len(accepted) == 1, outcomes
    assert any("quota.in_flight" in str(o) for o in outcomes), outcomes
    arena.evaluate(0.50)

    # dave: meta-learning league, below its threshold (0.20): not carried
    submit(dave, model, feedback["id"], league="meta-learning", show=False)
    arena.evaluate(0.15)

    board = alice.get(f"/api/v1/phases/{feedback['id']}/leaderboard")
    assert [(e["username"], e["score"]) for e in board["entries"]] == [
        ("bob", 0.5), ("alice", 0.4), ("olga", 0.31)]
    assert board["entries"][2]["is_baseline"] and board["datasets"] == ["spectra"]

    # the feedback phase ends: the reconciler closes it and carries the chosen entries
    arena.clock.now = datetime(2022, 10, 1, 0, 0, 5, tzinfo=UTC)
    db = arena.app.state.db
    with db.session(write=True) as session:
        reconcile(session, arena.clock.now, arena.queue,
                  reconcile_policy(arena.app.state.settings))
    with pytest.raises(RemoteError, match="phase.already_closed"):
        organizer.post(f"/api/v1/phases/{feedback['id']}/close")
    scores = {a2["id"]: [0.42, 0.38, 0.44], accepted[0]: [0.36, 0.47, 0.50],
              base["id"]: [0.30, 0.33, 0.32]}
    with db.session() as session:
        carried = session.execute(select(Submission).where(
            Submission.phase_id == final["id"]).order_by(Submission.id)).scalars().all()
        assert sorted(s.carried_from_id for s in carried) == sorted(scores)
        assert not any(s.charged for s in carried)
        origin = session.get(Submission, a2["id"])
        copy = next(s for s in carried if s.carried_from_id == a2["id"])
        assert (copy.sha256, copy.storage_path) == (origin.sha256, origin.storage_path)
        assert sorted(r.seed for r in copy.runs) == [0, 1, 2]
        by_run = {run.id: score for s in carried
                  for run, score in zip(s.runs, scores[s.carried_from_id], strict=True)}
    assert a1["id"] not in {s.carried_from_id for s in carried}

    # 3 runs per carried submission, claimed at once (parallel workers), then finished
    runs = arena.claim_new_jobs()
    assert len(runs) == 9
    workers = organizer.get("/api/v1/admin/workers")
    assert sum(w["current_run_id"] is not None for w in workers) == 9
    for run in runs:
        arena.finish(run, by_run[run[0]], "mosaic")

    final_board = organizer.get(f"/api/v1/phases/{final['id']}/leaderboard")
    assert [(e["rank"], e["username"], e["score"]) for e in final_board["entries"]] == [
        (1, "alice", 0.38), (2, "bob", 0.36), (3, "olga", 0.30)]
    assert final_board["entries"][2]["is_baseline"]
    hidden = alice.get(f"/api/v1/phases/{final['id']}/leaderboard")
    assert hidden["hidden"] == "scores"
    assert {e["username"] for e in hidden["entries"]} == {"alice", "bob", "olga"}
    assert all(e["score"] is None and e["rank"] is None for e in hidden["entries"])
    csv_text = organizer.call("GET", f"/api/v1/phases/{final['id']}/leaderboard",
                              params={"format": "csv"}).text
    first = next(csv.DictReader(io.StringIO(csv_text)))  # the board CSV's columns by name
    assert (first["rank"], first["competitor"], first["competitor_kind"], first["league"]) \
        == ("1", "alice", "user", "free-style")
    actions = {a["action"] for a in organizer.get("/api/v1/admin/audit")}
    assert {"competition.bundle.create", "submission.baseline"} <= actions
    arena.clock.now += timedelta(days=1)
