"""The run contract's values are the ones every side uses: one set of resource defaults and
bounds (API, bundle, claim, sandbox), one transition table, wire bodies bounded as the server
requires, and one job name and broker layout."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from server.bundles.schema import ResourcesSpec
from server.schemas.competition import Resources as ApiResources
from server.services import queue as server_queue
from submission_api.contract import jobs
from submission_api.contract.caps import MESSAGE_CAP, cap_trace
from submission_api.contract.resources import (
    DEFAULT_RESOURCES,
    DEFAULT_TIME_LIMIT_S,
    TIME_LIMIT_BOUND,
    RunResources,
)
from submission_api.contract.states import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    IllegalTransition,
    RunState,
    can_move,
    check_transition,
)
from submission_api.contract.wire import ClaimBody, FinishBody, HeartbeatBody, RunProgress
from worker import celery_app
from worker.client import ClaimedRun
from worker.sandbox_config import SandboxLimits

BUNDLE_NAMES = {"memory_mb": "memory", "shm_mb": "shm", "tmp_mb": "tmp", "output_mb": "output"}


def test_every_side_has_the_same_resource_defaults():
    expected = DEFAULT_RESOURCES.to_dict()
    assert ApiResources().model_dump() == expected
    bundle = ResourcesSpec().model_dump()
    assert {name: bundle[BUNDLE_NAMES.get(name, name)] for name in expected} == expected
    limits = SandboxLimits()
    assert {name: getattr(limits, name) for name in expected if name != "gpus"} == {
        k: v for k, v in expected.items() if k != "gpus"}
    claimed = ClaimedRun.model_validate({
        "run_id": 1, "fencing_token": 1, "lease_expires_at": "2030-01-01T00:00:00Z",
        "submission_sha256": "a" * 64, "protocol": {}, "test_seed": 1, "participant_seed": 2,
        "time_limit_s": 60, "datasets": []})
    assert claimed.resources == DEFAULT_RESOURCES


@pytest.mark.parametrize("field", [{"memory_mb": 8}, {"cpus": 0}, {"cpus": 1000},
                                   {"gpus": 17}, {"pids": 8}, {"shm_mb": 0},
                                   {"output_mb": 2 * 1024 * 1024}, {"memory_mb": 2.5}])
def test_every_side_refuses_the_same_out_of_range_resources(field):
    with pytest.raises(ValueError, match="resources"):
        RunResources(**field)
    with pytest.raises(ValidationError):
        ApiResources(**field)
    name, value = next(iter(field.items()))
    with pytest.raises(ValidationError):
        ResourcesSpec(**{BUNDLE_NAMES.get(name, name): value})
    if name != "gpus":
        with pytest.raises(ValueError):
            SandboxLimits(**field)


def _claim(time_limit_s: float) -> ClaimedRun:
    return ClaimedRun.model_validate({
        "run_id": 1, "fencing_token": 1, "lease_expires_at": "2030-01-01T00:00:00Z",
        "submission_sha256": "a" * 64, "protocol": {}, "test_seed": 1, "participant_seed": 2,
        "time_limit_s": time_limit_s, "datasets": []})


def test_the_time_limit_has_the_contract_default_and_bound_on_the_worker_side():
    assert SandboxLimits().wall_time_s == DEFAULT_TIME_LIMIT_S
    assert _claim(TIME_LIMIT_BOUND.least).time_limit_s == TIME_LIMIT_BOUND.least
    assert _claim(TIME_LIMIT_BOUND.most).time_limit_s == TIME_LIMIT_BOUND.most
    for outside in (0.5, TIME_LIMIT_BOUND.most + 1, 5e9):
        with pytest.raises(ValidationError, match="time_limit_s"):
            _claim(outside)


def test_a_stored_mapping_reads_defaults_for_missing_bounds_and_ignores_unknown_keys():
    old = RunResources.from_mapping({"cpus": 1, "memory_mb": 512, "from_the_future": 3})
    assert (old.cpus, old.memory_mb, old.pids) == (1.0, 512, DEFAULT_RESOURCES.pids)


@pytest.mark.parametrize(("current", "target", "allowed"), [
    ("queued", "preparing", True), ("preparing", "running", True), ("running", "scoring", True),
    ("scoring", "finished", True), ("running", "queued", True), ("queued", "failed", True),
    ("scoring", "running", False), ("running", "preparing", False),
    ("finished", "queued", False), ("cancelled", "running", False), ("queued", "nonsense", False),
])
def test_active_stages_only_go_forward_and_terminal_states_are_final(current, target, allowed):
    assert can_move(current, target) is allowed


def test_an_illegal_transition_says_what_is_allowed():
    with pytest.raises(IllegalTransition, match="finished.*cannot move to 'running'.*none"):
        check_transition("finished", "running")
    assert check_transition("queued", "preparing") is RunState.PREPARING
    assert set(ACTIVE_STATES).isdisjoint(TERMINAL_STATES)


def test_wire_bodies_refuse_what_the_server_would_refuse():
    with pytest.raises(ValueError, match="worker"):
        ClaimBody(worker="")
    with pytest.raises(ValueError, match="message"):
        FinishBody(fencing_token=1, state="failed", message="m" * (MESSAGE_CAP + 1))
    with pytest.raises(ValueError, match="tasks_done"):
        RunProgress(tasks_done=-1)
    body = HeartbeatBody(fencing_token=3, stage="running", progress=RunProgress(tasks_done=2))
    assert body.to_json() == {"fencing_token": 3, "stage": "running",
                              "progress": {"tasks_done": 2}}


def test_a_traceback_keeps_its_end():
    trace = "Traceback\n" + "frame\n" * 10_000 + "ValueError: the cause"
    kept = cap_trace(trace)
    assert kept is not None and kept.endswith("ValueError: the cause")
    assert cap_trace("") is None


def test_the_server_and_the_worker_name_the_job_and_lay_out_the_broker_alike(tmp_path):
    assert server_queue.EVALUATE_RUN == celery_app.EVALUATE_RUN == jobs.EVALUATE_RUN
    options = jobs.filesystem_broker_options(tmp_path / "broker")
    assert server_queue.filesystem_broker_options(tmp_path / "broker") == options
    assert celery_app.filesystem_broker_options(tmp_path / "broker") == options
    assert options["data_folder_in"] == options["data_folder_out"]
    assert (tmp_path / "broker" / "queue").is_dir()
