"""The phase model (issue 35.1) without I/O: one bounds table behind the bundle's and the API's
fields, the bundle's names mapped once onto the model, and a page's scoring parsed once."""

from __future__ import annotations

import pytest
from annotated_types import Ge, Gt, Le

from server.bundles import parse_bundle
from server.bundles.schema import PhaseSpec, QuotaSpec, ResourcesSpec
from server.domain.phase import PHASE_BOUNDS, PhaseRules, PhaseRulesError, Quotas
from server.models import Phase
from server.schemas.competition import PhaseCreate, PhaseUpdate, Resources
from server.services import scores
from server.services.bundles import phase_values
from submission_api.contract.resources import RESOURCE_BOUNDS

# model name -> (the bundle's model and field, the API's field in the create's names)
WIRE = {
    "time_limit_s": (PhaseSpec, "time_limit"), "seed": (PhaseSpec, "seed"),
    "runs_per_submission": (PhaseSpec, "runs_per_submission"),
    "quota_per_day": (QuotaSpec, "per_day"), "quota_total": (QuotaSpec, "total"),
    "quota_in_flight": (QuotaSpec, "in_flight"),
    "memory_mb": (ResourcesSpec, "memory"), "cpus": (ResourcesSpec, "cpus"),
    "gpus": (ResourcesSpec, "gpus"), "pids": (ResourcesSpec, "pids"),
    "shm_mb": (ResourcesSpec, "shm"), "tmp_mb": (ResourcesSpec, "tmp"),
    "output_mb": (ResourcesSpec, "output"),
}


def _limits(model: type, name: str) -> set[object]:
    return {m for m in model.model_fields[name].metadata if isinstance(m, Ge | Gt | Le)}


@pytest.mark.parametrize("name", sorted(WIRE))
def test_the_bundle_and_the_api_fields_carry_the_one_bound(name):
    bundle_model, bundle_name = WIRE[name]
    api = [(Resources, name)] if name in RESOURCE_BOUNDS else [(PhaseCreate, name),
                                                               (PhaseUpdate, name)]
    expected = _limits(bundle_model, bundle_name)
    bound = (PHASE_BOUNDS | RESOURCE_BOUNDS)[name]
    assert Le(bound.most) in expected
    assert all(_limits(model, field) == expected for model, field in api)


def test_the_bundle_maps_its_names_onto_the_model_once():
    spec = parse_bundle("""slug: demo
title: Demo
phases:
  - name: dev
    time_limit: 1h30m
    seed: 7
    runs_per_submission: 3
    quotas: {per_day: 5, in_flight: 1}
    resources: {memory: 2G, shm: 64M, cpus: 1.5}
    protocol: {name: fixed, n_ways: 5}
""").spec.phases[0]
    rules = spec.rules()
    assert (rules.time_limit_s, rules.seed, rules.runs_per_submission) == (5400, 7, 3)
    assert rules.quotas == Quotas(per_day=5, in_flight=1)
    assert (rules.resources.memory_mb, rules.resources.shm_mb, rules.resources.cpus) == (
        2048, 64, 1.5)
    assert rules.protocol.n_ways == 5
    stored = phase_values(spec, {})
    assert PhaseRules.from_columns(stored) == rules
    assert {k: stored[k] for k in rules.to_columns()} == rules.to_columns()


@pytest.mark.parametrize("values", [
    {"time_limit_s": 5_000_000_000}, {"time_limit_s": 0}, {"quota_per_day": 5_000_000_000},
    {"quota_total": -1}, {"runs_per_submission": 0}, {"seed": 2**31},
    {"resources": {"memory_mb": 5_000_000_000}}, {"protocol": {"name": "nope"}},
])
def test_the_model_refuses_what_no_column_or_run_may_hold(values):
    with pytest.raises(PhaseRulesError):
        PhaseRules.from_columns(values)


def test_a_mapping_without_a_setting_reads_its_default():
    assert PhaseRules.from_columns({}) == PhaseRules()


def test_a_phase_row_is_parsed_once_until_its_protocol_changes(monkeypatch):
    calls: list[object] = []
    parse = scores.parse_protocol
    monkeypatch.setattr(scores, "parse_protocol", lambda p: calls.append(p) or parse(p))
    phase = Phase(protocol={"name": "fewstab"})
    first = [scores.phase_scoring(phase) for _ in range(5)]
    assert len(calls) == 1 and first[0].protocol == "fewstab"
    assert not scores.lower_is_better(first[0]) and len(calls) == 1  # a parsed one passes
    phase.protocol = {"name": "cross-domain"}
    assert scores.phase_scoring(phase).protocol == "cross-domain" and len(calls) == 2
