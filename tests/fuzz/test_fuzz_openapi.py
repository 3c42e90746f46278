"""Schema-driven fuzzing: schemathesis generates requests from the app's own OpenAPI spec and
sends them to the real app in process (throwaway SQLite, RecordingJobQueue); no answer may be a
server error. A bounded number of examples per operation keeps it CI-sized; set
ARENA_FUZZ_EXAMPLES for a longer session. Also: hand-written malformed competition, phase and
request bodies, each refused with a 4xx and a stable error code."""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from inprocess_support import InProcess, cheap_password_hashing

EXAMPLES = int(os.environ.get("ARENA_FUZZ_EXAMPLES", "12"))


@pytest.fixture(autouse=True, scope="module")
def _cheap_password_hashing():
    """Generated sign-ups, logins and password changes hash with argon2: at its smallest cost
    here, as what is checked is that no request gets a server error (inprocess_support)."""
    with cheap_password_hashing():
        yield


@pytest.fixture(scope="module")
def seeded_app(app_env: InProcess) -> InProcess:
    """Something for the generated ids to hit: a competition, a phase, a submission."""
    organizer = app_env.token_for("fuzz-organizer", "organizer")
    phase_id = app_env.competition(organizer)["phases"][0]["id"]
    from inprocess_support import zip_bytes

    assert app_env.upload(phase_id, app_env.admin, zip_bytes()).status_code == 201
    return app_env


def api_operations() -> list[tuple[str, str]]:
    """(METHOD, path) of every operation in the spec, read from an app that is never started."""
    import tempfile
    from pathlib import Path

    from job_queue_fake import RecordingJobQueue

    from server.app import create_app
    from server.core.config import Settings

    with tempfile.TemporaryDirectory(prefix="arena-openapi-") as folder:
        app = create_app(Settings(data_dir=Path(folder), reconcile_interval_s=0),
                         queue=RecordingJobQueue())
        return sorted((method.upper(), path) for path, item in app.openapi()["paths"].items()
                      for method in item)


@pytest.fixture(scope="module")
def api_schema(seeded_app: InProcess):
    return schemathesis.openapi.from_asgi("/openapi.json", seeded_app.client.app)


# schemathesis' own pytest plugin does not run under this pytest; drive its strategies directly.
OPERATIONS = api_operations()


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_generated_request_causes_a_server_error(api_schema, seeded_app, method, path):
    operation = api_schema[path][method]
    tried = []

    @given(operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def send(case) -> None:
        for headers in (seeded_app.admin, {}):
            response = case.call(headers=headers)
            tried.append(response.status_code)
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path} -> {response.status_code}: "
                f"{response.text[:500]}\n{case.as_curl_command()}")

    send()
    assert tried


MALFORMED_COMPETITIONS = {
    "empty": {},
    "slug_with_spaces": {"slug": "a b", "title": "T"},
    "slug_uppercase": {"slug": "ABC", "title": "T"},
    "title_too_long": {"slug": "ok-slug", "title": "x" * 10_000},
    "phases_not_a_list": {"slug": "ok-slug", "title": "T", "phases": "dev"},
    "phase_without_name": {"slug": "ok-slug", "title": "T", "phases": [{}]},
    "negative_time_limit": {"slug": "ok-slug", "title": "T",
                            "phases": [{"name": "p", "time_limit_s": -1}]},
    "zero_runs": {"slug": "ok-slug", "title": "T", "phases": [{"name": "p",
                                                               "runs_per_submission": 0}]},
    "huge_runs": {"slug": "ok-slug", "title": "T", "phases": [{"name": "p",
                                                               "runs_per_submission": 10**9}]},
    "negative_memory": {"slug": "ok-slug", "title": "T",
                        "phases": [{"name": "p", "resources": {"memory_mb": -5}}]},
    "bad_status": {"slug": "ok-slug", "title": "T", "phases": [{"name": "p", "status": "live"}]},
    "bad_queue_name": {"slug": "ok-slug", "title": "T",
                       "phases": [{"name": "p", "queue": "../../etc"}]},
    "bad_hash": {"slug": "ok-slug", "title": "T", "phases": [{"name": "p", "data": {
        "meta_test": [{"name": "d", "content_hash": "not-a-hash"}]}}]},
    "unknown_protocol": {"slug": "ok-slug", "title": "T",
                         "phases": [{"name": "p", "protocol": {"name": "telepathy"}}]},
    "protocol_garbage": {"slug": "ok-slug", "title": "T", "phases": [{"name": "p", "protocol": {
        "name": "fixed", "n_ways": "many", "n_shots": -3, "seed": [1]}}]},
    "bad_dates": {"slug": "ok-slug", "title": "T",
                  "phases": [{"name": "p", "starts_at": "yesterday"}]},
    "ends_before_starts": {"slug": "ok-slug", "title": "T", "phases": [{
        "name": "p", "starts_at": "2030-01-02T00:00:00Z", "ends_at": "2030-01-01T00:00:00Z"}]},
    "carry_from_unknown": {"slug": "ok-slug", "title": "T",
                           "phases": [{"name": "p", "carry_from_id": 999_999}]},
    "huge_int": {"slug": "ok-slug", "title": "T", "phases": [{"name": "p", "seed": 10**40}]},
    "deep_nesting": {"slug": "ok-slug", "title": "T", "phases": [{"name": "p", "protocol": {
        "name": "fixed", "x": [[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]]}}]},
}


@pytest.mark.parametrize("name", sorted(MALFORMED_COMPETITIONS))
def test_a_malformed_competition_body_is_refused_with_a_4xx(seeded_app, name):
    answer = seeded_app.client.post("/api/v1/competitions", headers=seeded_app.admin,
                                    json=MALFORMED_COMPETITIONS[name])
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["code"]


MALFORMED_PHASE_PATCHES = [
    {"status": "archived"}, {"time_limit_s": 0}, {"runs_per_submission": 21},
    {"unknown_field": 1}, {"resources": {"cpus": 0}}, {"data": {"meta_train": [{}]}},
    {"protocol": {"name": "fixed", "n_ways": 0}}, {"leaderboard": {"ranking": "vibes"}},
    {"quota_total": -1}, {"carry_from_id": 987_654},
]


@pytest.mark.parametrize("body", MALFORMED_PHASE_PATCHES, ids=lambda b: next(iter(b)))
def test_a_malformed_phase_update_is_refused_with_a_4xx(seeded_app, body):
    phase_id = seeded_app.client.get("/api/v1/phases").json()[0]["id"]
    answer = seeded_app.client.patch(f"/api/v1/phases/{phase_id}", headers=seeded_app.admin,
                                     json=body)
    assert 400 <= answer.status_code < 500, answer.text


RAW_BODIES = [b"", b"{", b"null", b"[]", b"\xff\xfe\x00", b'{"slug": "\\ud800"}', b"1e999999",
              b'"' + b"a" * 100_000 + b'"']


@pytest.mark.parametrize("raw", RAW_BODIES, ids=lambda r: repr(r[:12]))
@pytest.mark.parametrize("path", ["/api/v1/competitions", "/api/v1/users", "/api/v1/auth/token",
                                  "/api/v1/datasets/from-path"])
def test_raw_garbage_bodies_are_refused_with_a_4xx(seeded_app, path, raw):
    answer = seeded_app.client.post(path, headers={**seeded_app.admin,
                                                   "Content-Type": "application/json"},
                                    content=raw)
    assert 400 <= answer.status_code < 500, answer.text
