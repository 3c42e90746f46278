"""One phase model (issue 35.1): the bundle, the API, the table and the worker's claim read the
same `PhaseRules` with one set of bounds. A bundle took a 5e9 s time limit and a 5e9 daily
quota that the API refused and that the int4 columns cannot hold; now both refuse the same
values naming the same field with the same message, and store nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from server.domain.phase import PhaseRules, Quotas, rules_of
from server.models import Competition, Phase
from submission_api.contract.resources import DEFAULT_TIME_LIMIT_S, RunResources
from submission_api.protocols import ProtocolParams

BUNDLE = """slug: {slug}
title: T
phases:
  - name: dev
    status: draft
{extra}
"""
# (bundle YAML of the phase, the same setting in the API's names, the model's field)
OUT_OF_RANGE = [
    ("    time_limit: 5000000000", {"time_limit_s": 5_000_000_000}, "time_limit"),
    ("    time_limit: 1000000h", {"time_limit_s": 3_600_000_000}, "time_limit"),
    ("    time_limit: 0", {"time_limit_s": 0}, "time_limit"),
    ("    quotas: {per_day: 5000000000}", {"quota_per_day": 5_000_000_000}, "per_day"),
    ("    quotas: {total: -1}", {"quota_total": -1}, "total"),
    ("    quotas: {in_flight: 2000000}", {"quota_in_flight": 2_000_000}, "in_flight"),
    ("    runs_per_submission: 21", {"runs_per_submission": 21}, "runs_per_submission"),
    ("    seed: 1099511627776", {"seed": 2**40}, "seed"),
    ("    resources: {memory: 5000000000}", {"resources": {"memory_mb": 5_000_000_000}},
     "memory"),
]


def _message(answer) -> tuple[str, str]:
    """(the refused field's last name, the message) of a 422 from either route."""
    assert answer.status_code == 422, answer.text
    first = answer.json()["error"]["details"]["errors"][0]
    if isinstance(first, dict):  # a bundle: {line, where: phases[0].time_limit, message}
        return first["where"].split(".")[-1], first["message"]
    where, _, message = first.partition(": ")  # the API: "body.phases.0.time_limit_s: ..."
    return where.split(".")[-1], message


def _rows(env) -> tuple[int, int]:
    with env.db.session() as s:
        return (s.scalar(select(func.count()).select_from(Competition)),
                s.scalar(select(func.count()).select_from(Phase)))


@pytest.mark.parametrize(("yaml", "api", "field"), OUT_OF_RANGE,
                         ids=[c[0].strip() for c in OUT_OF_RANGE])
def test_the_bundle_and_the_api_refuse_the_same_values_alike_and_store_nothing(
        env, yaml, api, field):
    _, org = env.user("olga", role="organizer")
    bundle = env.client.post("/api/v1/competitions/bundle",
                             content=BUNDLE.format(slug="b-one", extra=yaml),
                             headers={**org, "Content-Type": "application/yaml"})
    created = env.client.post("/api/v1/competitions", headers=org, json={
        "slug": "a-one", "title": "T", "phases": [{"name": "dev", **api}]})
    bundle_field, bundle_message = _message(bundle)
    api_field, api_message = _message(created)
    names = {"time_limit": "time_limit_s", "per_day": "quota_per_day", "total": "quota_total",
             "in_flight": "quota_in_flight", "memory": "memory_mb"}
    assert bundle_field == field and names.get(field, field) == api_field
    # the bundle adds what it read (a duration's seconds, a size's megabytes)
    assert bundle_message.startswith(api_message), (bundle_message, api_message)
    assert _rows(env) == (0, 0)


@pytest.mark.parametrize(("yaml", "api", "field"), OUT_OF_RANGE[:1] + OUT_OF_RANGE[3:4])
def test_a_partial_update_refuses_them_too_and_changes_nothing(env, yaml, api, field):
    olga, org = env.user("olga", role="organizer")
    phase = env.phase(owner=olga, status="draft")
    answer = env.client.patch(f"/api/v1/phases/{phase.id}", headers=org, json=api)
    assert answer.status_code == 422, answer.text
    with env.db.session() as s:
        row = s.get_one(Phase, phase.id)
        assert (row.time_limit_s, row.quota_per_day) == (DEFAULT_TIME_LIMIT_S, None)


def test_the_rules_survive_the_row_round_trip(env):
    rules = PhaseRules(protocol=ProtocolParams(name="fixed", n_ways=7, split_seed=11),
                       time_limit_s=604_800, resources=RunResources(cpus=1.5, memory_mb=1234,
                                                                   gpus=1, pids=64),
                       runs_per_submission=20, seed=-(2**31), quotas=Quotas(1_000_000, 0, 3))
    phase = env.phase(**rules.to_columns())
    with env.db.session() as s:
        assert rules_of(s.get_one(Phase, phase.id)) == rules


def test_a_row_out_of_bounds_is_not_read_as_rules(env):
    phase = env.phase(time_limit_s=0)  # written around the model, as by hand
    with env.db.session() as s, pytest.raises(ValueError, match="time_limit_s=0: expected"):
        rules_of(s.get_one(Phase, phase.id))


def test_an_api_phase_without_protocol_stores_the_parsed_default(env):
    _, org = env.user("olga", role="organizer")
    answer = env.client.post("/api/v1/competitions", headers=org, json={
        "slug": "a-two", "title": "T", "phases": [{"name": "dev"}]})
    assert answer.status_code == 201, answer.text
    assert answer.json()["phases"][0]["protocol"]["name"] == "cross-domain"
    assert answer.json()["phases"][0]["time_limit_s"] == DEFAULT_TIME_LIMIT_S


def test_the_claim_carries_the_phase_rules(env):
    from test_run_progress import _claim  # noqa: F401 - the same claim as the other tests

    _, headers = env.user("ann")
    phase = env.phase(protocol={}, resources={"cpus": 1, "memory_mb": 2048},
                      time_limit_s=7200)
    created = env.submit(phase.id, headers).json()
    run_id = created["runs"][0]["id"]
    token = next(t for r, t, _q in env.queue.jobs if r == run_id)
    claimed = env.client.post(f"/internal/runs/{run_id}/claim",
                              headers={"Authorization": f"Bearer {token}"},
                              json={"worker": "w1"})
    assert claimed.status_code == 200, claimed.text
    with env.db.session() as s:
        rules = rules_of(s.get_one(Phase, phase.id))
    body = claimed.json()
    # the stored {} reaches the worker as the protocol the server's model parsed, in full
    assert body["protocol"] == rules.protocol.to_dict() == ProtocolParams().to_dict()
    assert body["time_limit_s"] == rules.time_limit_s == 7200
    assert body["resources"] == rules.resources.to_dict()
    assert body["resources"]["pids"] == RunResources().pids
