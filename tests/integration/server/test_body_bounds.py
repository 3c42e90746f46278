"""Issue 21 (principle 5): one bound on every request body that is not a streamed upload.

On 08e9140 only bundles had a cap; any other JSON body (here a competition of 2 MiB) was read
whole and handled. Now past `max_json_body_bytes` (1 MiB) it is 413 `request.too_large` with the
usual JSON error body naming the bound, whether the length is declared or the body is sent in
chunks without one; multipart uploads and the internal API (a finish carries a run's log and
per-task results) are not held to it."""

from __future__ import annotations

import json
import os

from test_runs import call, claim, queued_run

CAP = 1024**2
"""`Settings.max_json_body_bytes` default (a literal: the test also runs on code without it)."""


def big_competition() -> bytes:
    return json.dumps({"slug": "big", "title": "Big", "description": "x" * (2 * CAP),
                       "phases": [{"name": "dev"}]}).encode()


def assert_refused(answer) -> None:
    assert answer.status_code == 413, answer.text[:300]
    error = answer.json()["error"]
    assert error["code"] == "request.too_large"
    assert str(CAP) in error["message"] and error["details"] == {"max_bytes": CAP}


def test_a_json_body_over_the_bound_is_413_naming_it(env):
    _, org = env.user("olga", role="organizer")
    headers = {**org, "Content-Type": "application/json"}
    assert_refused(env.client.post("/api/v1/competitions", headers=headers,
                                   content=big_competition()))
    body = big_competition()
    chunks = (body[i:i + 65536] for i in range(0, len(body), 65536))  # no Content-Length
    assert_refused(env.client.post("/api/v1/competitions", headers=headers, content=chunks))
    assert env.client.get("/api/v1/competitions", headers=org).json() == []  # nothing stored
    small = env.client.post("/api/v1/competitions", headers=org,
                            json={"slug": "ok", "title": "OK", "phases": [{"name": "dev"}]})
    assert small.status_code == 201, small.text


def test_uploads_and_the_internal_api_are_not_held_to_it(env):
    _, uma = env.user("uma")
    phase = env.phase()
    upload = env.submit(phase.id, uma, data=os.urandom(CAP + 4096))  # multipart, not a zip
    assert upload.status_code != 413 and upload.status_code < 500, upload.text[:300]
    _, [(run_id, token, _)], _ = queued_run(env)
    fencing = claim(env, run_id, token).json()["fencing_token"]
    finish = call(env, run_id, token, "finish", {
        "fencing_token": fencing, "state": "failed", "reason": "import_error",
        "message": "boom", "log": "y" * (CAP + 4096)})
    assert finish.status_code == 200, finish.text[:300]
