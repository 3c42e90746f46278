"""Upper bounds on every number that sizes work (issue 21): `tasks_per_dataset: 10**7`
planned for 56 s, then MemoryError at 3 GB; resources and limits had no upper bound either.
Now each is refused at creation with the range it accepts, and the bounds are not tight."""

from __future__ import annotations

import pytest

from submission_api.protocols.params import (
    MAX_TASKS_PER_DATASET,
    ProtocolParams,
    ProtocolParamsError,
)


@pytest.mark.parametrize(("key", "value"), [
    ("tasks_per_dataset", 10**7), ("tasks_per_dataset", MAX_TASKS_PER_DATASET + 1),
    ("n_ways", 10**6), ("n_shots", 10**6), ("n_queries", 10**6), ("split_seed", 2**40),
])
def test_protocol_sizes_beyond_their_bound_are_refused(key, value):
    with pytest.raises(ProtocolParamsError, match=f"{key}=.*expected an integer >= .* and <= "):
        ProtocolParams.from_dict({"name": "fixed", key: value})


def test_the_bounds_leave_room_for_real_protocols():
    ProtocolParams.from_dict({"name": "fixed", "tasks_per_dataset": MAX_TASKS_PER_DATASET,
                              "n_ways": 20, "n_shots": 20, "n_queries": 20})


@pytest.mark.parametrize("phase", [
    {"protocol": {"name": "fixed", "tasks_per_dataset": 10**7}},
    {"resources": {"memory_mb": 10**12}},
    {"resources": {"cpus": 10**6}},
    {"resources": {"gpus": 10**4}},
    {"time_limit_s": 10**9},
    {"quota_total": 10**12},
    {"seed": 2**40},
])
def test_the_api_refuses_a_phase_sized_beyond_its_bounds(app_env, phase):
    org = app_env.token_for(f"org{abs(hash(str(phase))) % 10**8}", role="organizer")
    body = {"slug": f"c{abs(hash(str(phase))) % 10**8}", "title": "C",
            "phases": [{"name": "dev", "status": "open", **phase}]}
    answer = app_env.client.post("/api/v1/competitions", headers=org, json=body)
    assert answer.status_code == 422, answer.text
