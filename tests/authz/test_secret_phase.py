"""What a submission's owner reads in a phase whose test data is secret (issue 20 items 1–3), on
every route and page that serves a submission, through the real app: the worker's side is
played through the internal API with a log and a failure message that carry "test pixels".

The owner reads the meta-train part of the log, the stage and a built-in exception type of a
meta-test failure, and no score, per-run, per-task or per-dataset result until the organizers
publish; the organizers read everything. Each test fails on 08e9140 (there, everything reached
the owner and there was no publish action).
"""

from __future__ import annotations

import re
import uuid

import pytest
from authz_world import World, build_world
from inprocess_support import InProcess, inprocess_app, zip_bytes

from submission_api.scoring import TaskRecord, summarize_run
from worker.pipeline.score import LOG_FRAME, format_log, format_meta_train_log
from worker.sandbox_result import SandboxResult

PIXELS = "PIXELS-0f9e8d7c"  # what participant code would print or raise during meta-test
TRAIN = "meta-train says hello"


RESULT = SandboxResult(exit_code=0, oom_killed=False, timed_out=False, wall_time_s=1.0,
                       stdout=f"{TRAIN}\n{PIXELS} out\n", stderr=f"warn\n{PIXELS} err\n",
                       meta_train_chars=(len(TRAIN) + 1, len("warn\n")))
"""A two-stage run as the worker recorded it: meta-train wrote TRAIN, meta-test PIXELS."""


def _logs() -> dict[str, str | None]:
    """The worker's finish fields for RESULT: the whole log and meta-train's part apart."""
    return {"log": format_log(RESULT, cap_bytes=10_000),
            "meta_train_log": format_meta_train_log(RESULT, cap_bytes=10_000)}


def _forged_logs() -> dict[str, str | None]:
    """A log whose text says, falsely, that all of it is meta-train's: a frame counting every
    character as meta-train's, as text a test task printed would if it ever came first. Only
    the worker's own `meta_train_log` field may say what meta-train wrote."""
    out, err = f"{PIXELS} out\n", f"{PIXELS} err\n"
    frame = LOG_FRAME.format(len(out), 0, len(err), 0)
    return {"log": f"{frame}\n==> stdout <==\n{out}\n==> stderr <==\n{err}",
            "meta_train_log": f"==> meta-train stdout <==\n{TRAIN}\n"}


def _finish(env: InProcess, run_id: int, *, failed: bool = False, score: float = 0.5,
            logs: dict[str, str | None] | None = None) -> None:
    token = next(t for r, t, _ in env.queue.jobs if r == run_id)
    bearer = {"Authorization": f"Bearer {token}"}
    claimed = env.client.post(f"/internal/runs/{run_id}/claim", headers=bearer,
                              json={"worker": "secret", "host_lock": True})
    assert claimed.status_code == 200, claimed.text
    body: dict = {"fencing_token": claimed.json()["fencing_token"],
                  **(_logs() if logs is None else logs)}
    if failed:
        body |= {"state": "failed", "reason": "fit_error",
                 "message": f"fit raised on test task 3: {PIXELS}\n\nTraceback (most recent "
                            f"call last):\n  File \"model.py\"\nValueError: {PIXELS}"}
    else:
        records = [TaskRecord(id=i, dataset="secret-dataset", group="test", n_ways=2, n_shots=1,
                              score=score, accuracy=0.75, worst_class_accuracy=0.5)
                   for i in range(3)]
        body |= {"state": "finished", "summary": summarize_run(records).to_dict(),
                 "tasks": [r.to_dict() for r in records]}
    done = env.client.post(f"/internal/runs/{run_id}/finish", headers=bearer, json=body)
    assert done.status_code == 200, done.text


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory):
    with inprocess_app(tmp_path_factory.mktemp("secret-phase")) as env:
        yield env


def _phase(world: World, **leaderboard) -> int:
    client, headers = world.env.client, world.headers["organizer"]
    answer = client.post(f"/api/v1/competitions/{world.ids['competition_id']}/phases",
                         headers=headers, json={"name": f"p-{uuid.uuid4().hex[:6]}",
                                                "status": "open", "leaderboard": leaderboard,
                                                "data": {"meta_test": []}})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _submitted(world: World, phase_id: int, *, failed: bool = False,
               logs: dict[str, str | None] | None = None) -> int:
    answer = world.env.upload(phase_id, world.headers["owner"], zip_bytes())
    assert answer.status_code == 201, answer.text
    _finish(world.env, answer.json()["runs"][0]["id"], failed=failed, score=0.4321, logs=logs)
    return answer.json()["id"]


def _everything(world: World, role: str, submission_id: int, phase_id: int) -> str:
    """Every answer about the submission that `role` can read, concatenated."""
    client, headers = world.env.client, world.headers[role]
    texts = [client.get(path, headers=headers).text for path in (
        f"/api/v1/submissions/{submission_id}", f"/api/v1/submissions/{submission_id}/results",
        f"/api/v1/submissions/{submission_id}/logs", "/api/v1/me/submissions",
        f"/api/v1/phases/{phase_id}/leaderboard",
        f"/api/v1/phases/{phase_id}/leaderboard?format=csv")]
    browser = world.env.client.__class__(world.env.client.app)
    if headers:
        browser.cookies.set("arena_session", _session(world, headers["Authorization"].split()[1]))
    texts += [browser.get(path).text for path in (
        f"/submissions/{submission_id}", f"/submissions/{submission_id}/runs/0/report", "/my",
        f"/phases/{phase_id}/leaderboard")]
    return "\n".join(texts)


def _session(world: World, token: str) -> str:
    """A web session for the holder of `token`, through the login form."""
    client = world.env.client.__class__(world.env.client.app, follow_redirects=False)
    nonce = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text)
    answer = client.post("/login", data={"csrf_token": nonce.group(1), "token": token})
    assert answer.status_code == 303, answer.text
    return client.cookies["arena_session"]


def test_the_owner_of_a_secret_phase_reads_no_test_pixels_and_no_score(app_env) -> None:
    world = build_world(app_env)
    phase = _phase(world, test_data="secret")
    finished, failed = _submitted(world, phase), _submitted(world, phase, failed=True)
    for submission_id in (finished, failed):
        owner = _everything(world, "owner", submission_id, phase)
        assert PIXELS not in owner
        assert "0.4321" not in owner and "secret-dataset" not in owner
        assert TRAIN in owner  # meta-train output stays visible
        staff = _everything(world, "organizer", submission_id, phase)
        assert PIXELS in staff and TRAIN in staff
    staff = _everything(world, "organizer", finished, phase)
    assert "0.4321" in staff and "secret-dataset" in staff
    status = app_env.client.get(f"/api/v1/submissions/{failed}",
                                headers=world.headers["owner"]).json()
    assert "ValueError" in status["message"] and "load or fit" in status["message"]
    results = app_env.client.get(f"/api/v1/submissions/{finished}/results",
                                 headers=world.headers["owner"]).json()
    assert results["score"] is None and results["runs"][0]["tasks"] == []
    assert results["runs"][0]["summary"] is None and results["runs"][0]["score"] is None


def test_the_log_text_never_says_what_meta_train_wrote(app_env) -> None:
    """Issue 35.3: the stage travels as the finish body's own field. A log whose text frames
    all of it as meta-train's (PIXELS included) is withheld whole from the owner, who reads the
    worker's `meta_train_log` only; a finish without that field (an older worker) shows the
    owner nothing of the log. Fails where the server cuts the log by its text."""
    world = build_world(app_env)
    phase = _phase(world, test_data="secret")
    forged = _submitted(world, phase, logs=_forged_logs())
    owner = _everything(world, "owner", forged, phase)
    assert PIXELS not in owner and TRAIN in owner
    assert PIXELS in _everything(world, "organizer", forged, phase)
    older = _submitted(world, phase, logs={"log": _forged_logs()["log"]})
    logs = app_env.client.get(f"/api/v1/submissions/{older}/logs",
                              headers=world.headers["owner"]).json()
    assert PIXELS not in str(logs) and "hidden: the test data" in logs["runs"][0]["log"]


def test_publishing_a_closed_phase_reveals_scores_but_never_meta_test_output(app_env) -> None:
    world = build_world(app_env)
    client = app_env.client
    phase = _phase(world, test_data="secret")
    finished = _submitted(world, phase)
    early = client.post(f"/api/v1/phases/{phase}/publish", headers=world.headers["organizer"])
    assert early.status_code == 409, early.text
    assert client.post(f"/api/v1/phases/{phase}/close",
                       headers=world.headers["organizer"]).status_code == 200
    stranger = client.post(f"/api/v1/phases/{phase}/publish",
                           headers=world.headers["other_organizer"])
    assert stranger.status_code == 404, stranger.text
    owner_view = client.get(f"/api/v1/phases/{phase}", headers=world.headers["owner"]).json()
    assert owner_view["results"] == "withheld"
    published = client.post(f"/api/v1/phases/{phase}/publish",
                            headers=world.headers["organizer"])
    assert published.status_code == 200 and published.json()["results"] == "published"
    owner = _everything(world, "owner", finished, phase)
    assert "0.4321" in owner and "secret-dataset" in owner
    assert PIXELS not in owner
    audit = client.get("/api/v1/admin/audit?action=phase.publish",
                       headers=world.headers["organizer"]).json()
    assert [a["target"] for a in audit] == [f"phase:{phase}"]
    again = client.post(f"/api/v1/phases/{phase}/publish", headers=world.headers["organizer"])
    assert again.status_code == 409


def test_a_feedback_phase_shows_scores_but_no_meta_test_output(app_env) -> None:
    world = build_world(app_env)
    phase = _phase(world, test_data="feedback")
    for submission_id in (_submitted(world, phase), _submitted(world, phase, failed=True)):
        owner = _everything(world, "owner", submission_id, phase)
        assert PIXELS not in owner and TRAIN in owner
    owner = _everything(world, "owner", _submitted(world, phase), phase)
    assert "0.4321" in owner and "secret-dataset" in owner


def test_hidden_scores_are_hidden_from_their_owner_on_every_route(app_env) -> None:
    world = build_world(app_env)
    phase = _phase(world, hidden="scores")  # public test data: logs are shown whole
    finished = _submitted(world, phase)
    owner = _everything(world, "owner", finished, phase)
    assert "0.4321" not in owner and PIXELS in owner
    assert "0.4321" in _everything(world, "organizer", finished, phase)


def test_a_final_phase_is_secret_by_default_and_hides_its_test_dataset_names(app_env) -> None:
    world = build_world(app_env)
    client, headers = app_env.client, world.headers["organizer"]
    comp = world.ids["competition_id"]
    answer = client.post(f"/api/v1/competitions/{comp}/phases", headers=headers, json={
        "name": "final", "status": "closed", "carry_from_id": world.ids["phase_id"],
        "data": {"meta_test": [{"name": "omniglot-test", "content_hash": "ef" * 32}]}})
    assert answer.status_code == 201, answer.text
    final = answer.json()["id"]
    assert answer.json()["test_data"] == "secret" and answer.json()["results"] == "withheld"
    for role, sees in (("owner", False), ("anonymous", False), ("other_organizer", False),
                       ("organizer", True), ("admin", True)):
        body = client.get(f"/api/v1/phases/{final}", headers=world.headers[role]).json()
        names = [ref["name"] for ref in body["data"]["meta_test"]]
        assert (names == ["omniglot-test"]) == sees, (role, names)
