"""Issue 13 (10): a phase naming an image no worker has, and platform faults as participants and
operators see them. Against the real app on SQLite and Postgres:
- workers report their images with each claim; a phase (API or bundle) naming an image none of
  them has is refused at creation, with the images they do have;
- a released run is re-enqueued after a back-off that doubles per fault (it was 3 attempts in
  0.8 s), its participant reads the worker's short cause, and the details sit on the worker's
  row for admins only."""

from __future__ import annotations

from sqlalchemy import select
from test_runs import call, claim, queued_run

from server.models import Run, Worker

IMAGES = ["metadl-arena/sandbox:cpu", "python:3.11-slim"]
DETAIL = ("SandboxPlatformError: sandbox platform failure running 'lab/gone:1': ImageNotFound: "
          "404 Client Error for http+docker://localhost/v1.41/containers/create; expected a "
          "reachable Docker engine (scripts/ensure_docker.sh)")
SHORT = "the sandbox image 'lab/gone:1' is not available on the worker that took this run"


def report_images(env, images: list[str] | None) -> None:
    _, [(run_id, token, _)], _ = queued_run(env)
    body = {"worker": "gpu-1"} | ({} if images is None else {"images": images})
    assert call(env, run_id, token, "claim", body).status_code == 200


def create(env, headers, image: str | None):
    phase = {"name": "dev"} | ({} if image is None else {"image": image})
    return env.client.post("/api/v1/competitions", headers=headers,
                           json={"slug": f"c{abs(hash(image)) % 10**6}", "title": "C",
                                 "phases": [phase]})


def test_a_phase_naming_an_image_no_worker_has_is_refused_with_the_images_they_have(env):
    _, org = env.user("olga", role="organizer")
    report_images(env, IMAGES)
    refused = create(env, org, "lab/gone:1")
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "phase.unknown_image"
    assert "lab/gone:1" in error["message"] and "metadl-arena/sandbox:cpu" in error["message"]
    assert create(env, org, "python:3.11-slim").status_code == 201
    assert create(env, org, None).status_code == 201  # the workers' default image


def test_a_bundle_naming_an_unknown_image_is_refused_at_its_line(env):
    _, org = env.user("olga", role="organizer")
    report_images(env, IMAGES)
    bundle = "slug: demo\ntitle: Demo\nphases:\n  - name: dev\n    status: draft\n" \
             "    image: lab/gone:1\n"
    answer = env.client.post("/api/v1/competitions/bundle", headers={
        **org, "Content-Type": "application/yaml"}, content=bundle)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "bundle.invalid"
    assert "line 6 (phases[0].image)" in error["message"] and "lab/gone:1" in error["message"]


def test_without_any_report_no_image_can_be_checked_and_none_is_refused(env):
    _, org = env.user("olga", role="organizer")
    report_images(env, None)  # an older worker, or the unsandboxed local executor
    assert create(env, org, "lab/anything:1").status_code == 201


def test_a_released_run_backs_off_and_shows_the_short_cause_the_details_for_admins(env):
    _, [(run_id, token, _)], _ = queued_run(env)
    for attempt in range(2):
        fencing = claim(env, run_id, token, worker="gpu-1").json()["fencing_token"]
        answer = call(env, run_id, token, "release",
                      {"fencing_token": fencing, "error": SHORT, "detail": DETAIL})
        assert answer.json()["requeued"], answer.text
        token = env.queue.jobs[-1][1]
        assert env.queue.countdowns[-1] == 15.0 * 2**attempt  # 15 s, then 30 s
    with env.db.session() as s:
        message = s.get(Run, run_id).message
        worker = s.execute(select(Worker).where(Worker.name == "gpu-1")).scalar_one()
        assert (worker.last_fault, worker.last_fault_at is not None) == (DETAIL, True)
    assert SHORT in message and "docker" not in message.lower()
    _, admin = env.user("root", role="admin")
    _, org = env.user("olga", role="organizer")
    as_admin = env.client.get("/api/v1/admin/workers", headers=admin).json()
    as_organizer = env.client.get("/api/v1/admin/workers", headers=org).json()
    assert [w["last_fault"] for w in as_admin] == [DETAIL]
    assert [w["last_fault"] for w in as_organizer] == [None]
