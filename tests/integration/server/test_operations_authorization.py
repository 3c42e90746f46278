"""A participant can reach neither another's submission (status, logs, results, zip, cancel,
select) nor any organizer endpoint, whatever ids they try; an organizer cannot act on a
competition they do not own. Others' ids answer exactly like ids that do not exist."""

from __future__ import annotations

import pytest

from server.models import Competition

MISSING = 999_999
BUNDLE = "slug: x\ntitle: X\nphases:\n  - name: p\n"


@pytest.fixture
def world(env):
    owner, org = env.user("olga", role="organizer")
    _, other_org = env.user("oscar", role="organizer")
    phase = env.phase()
    with env.db.session() as s:
        comp = s.get(Competition, phase.competition_id)
        comp.owner_id, comp_slug = owner.id, comp.slug
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    sub = env.submit(phase.id, ann).json()
    return {"phase": phase.id, "sub": sub["id"], "slug": comp_slug, "ann": ann, "bob": bob,
            "org": org, "other_org": other_org}


SUBMISSION_CALLS = [("GET", "/api/v1/submissions/{s}"), ("GET", "/api/v1/submissions/{s}/logs"),
                    ("GET", "/api/v1/submissions/{s}/results"),
                    ("GET", "/api/v1/submissions/{s}/download"),
                    ("POST", "/api/v1/submissions/{s}/cancel"),
                    ("POST", "/api/v1/submissions/{s}/select")]
ORGANIZER_CALLS = [("POST", "/api/v1/phases/{p}/close"), ("POST", "/api/v1/phases/{p}/rerun"),
                   ("POST", "/api/v1/submissions/{s}/rerun"),
                   ("POST", "/api/v1/submissions/{s}/baseline"),
                   ("GET", "/api/v1/admin/workers"), ("GET", "/api/v1/admin/audit"),
                   ("POST", "/api/v1/competitions/bundle"),
                   ("PUT", "/api/v1/competitions/{c}/bundle"),
                   ("GET", "/api/v1/competitions/{c}/bundle"),
                   ("PATCH", "/api/v1/phases/{p}")]


def send(env, method: str, template: str, headers: dict, **ids):
    url = template.format(**ids)
    body = {"content": BUNDLE, "headers": headers | {"content-type": "application/yaml"}} \
        if "bundle" in url and method != "GET" else {"json": {}, "headers": headers}
    return env.client.request(method, url, **body)


@pytest.mark.parametrize(("method", "template"), SUBMISSION_CALLS)
def test_another_participants_submission_looks_missing(env, world, method, template):
    theirs = send(env, method, template, world["bob"], s=world["sub"])
    missing = send(env, method, template, world["bob"], s=MISSING)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["error"]["code"] == missing.json()["error"]["code"]
    assert theirs.json()["error"]["message"].replace(f"id {world['sub']} ", "id N ") == (
        missing.json()["error"]["message"].replace(f"id {MISSING} ", "id N "))


@pytest.mark.parametrize(("method", "template"), ORGANIZER_CALLS)
@pytest.mark.parametrize("phase_id", ["own", MISSING])
def test_participants_reach_no_organizer_endpoint(env, world, method, template, phase_id):
    ids = {"p": world["phase"] if phase_id == "own" else phase_id, "s": world["sub"],
           "c": world["slug"]}
    answer = send(env, method, template, world["ann"], **ids)
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["code"] == "auth.forbidden"


@pytest.mark.parametrize(("method", "template"), [
    c for c in ORGANIZER_CALLS if "{p}" in c[1] or "{s}" in c[1] or "{c}" in c[1]])
def test_an_organizer_cannot_act_on_a_competition_they_do_not_own(env, world, method,
                                                                  template):
    ids = {"p": world["phase"], "s": world["sub"], "c": world["slug"]}
    answer = send(env, method, template, world["other_org"], **ids)
    assert answer.status_code == 404, answer.text
