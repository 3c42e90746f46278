"""Issue 13 (3): pids, /dev/shm, /tmp and output bounds are phase settings like cpus and memory,
validated in the bundle and the API, carried to the worker and turned into the sandbox's limits."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from server.bundles import BundleError, parse_bundle
from server.schemas.competition import Resources
from server.services.bundles import phase_values
from worker.client import Resources as ClaimedResources
from worker.sandbox_config import SandboxLimits, SandboxSpec, build_container_kwargs, build_limits

HASH = "ab" * 32
BUNDLE = f"""slug: demo
title: Demo
phases:
  - name: feedback
    data:
      meta_test: [D1@{HASH}]
    resources: {{cpus: 1, memory: 2G, pids: 64, shm: 64M, tmp: 1G, output: 100}}
"""


def test_a_bundle_sets_every_bound_and_the_phase_stores_them():
    phase = parse_bundle(BUNDLE).spec.phases[0]
    stored = phase_values(phase, {})["resources"]
    assert stored == {"gpus": 0, "cpus": 1, "memory_mb": 2048, "pids": 64, "shm_mb": 64,
                      "tmp_mb": 1024, "output_mb": 100}
    assert Resources(**stored).model_dump() == stored


@pytest.mark.parametrize(("old", "bad"), [("pids: 64", "pids: 8"), ("pids: 64", "pids: 100000"),
                                          ("shm: 64M", "shm: 0"), ("output: 100", "output: lots"),
                                          ("tmp: 1G", "tmp: 2048G")])
def test_a_bound_out_of_range_is_refused_at_its_line(old, bad):
    with pytest.raises(BundleError) as caught:
        parse_bundle(BUNDLE.replace(old, bad))
    assert caught.value.details["errors"][0]["line"] == 7


@pytest.mark.parametrize("field", [{"pids": 1}, {"shm_mb": 0}, {"output_mb": -5},
                                   {"tmp_mb": 2 * 1024 * 1024}])
def test_the_api_refuses_a_bound_out_of_range(field):
    with pytest.raises(ValidationError):
        Resources(**field)


def test_the_worker_turns_the_phase_bounds_into_the_containers_limits(tmp_path):
    claimed = ClaimedResources.from_mapping({"cpus": 1.5, "memory_mb": 512, "pids": 48,
                                               "shm_mb": 32, "tmp_mb": 64, "output_mb": 16})
    limits = build_limits(claimed, wall_time_s=60.0, gpus=(), log_cap_bytes=1024)
    assert (limits.pids, limits.shm_mb, limits.tmp_mb, limits.output_mb) == (48, 32, 64, 16)
    spec = SandboxSpec(image="i", command=("python3",), submission_dir=tmp_path,
                       bundle_dir=tmp_path, output_dir=tmp_path)
    kwargs = build_container_kwargs(spec, limits)
    assert kwargs["pids_limit"] == 48 and kwargs["shm_size"] == 32 * 1024 * 1024
    assert "size=64m" in kwargs["tmpfs"]["/tmp"]
    assert kwargs["nano_cpus"] == 1_500_000_000 and kwargs["mem_limit"] == 512 * 1024 * 1024


def test_a_phase_stored_before_the_bounds_existed_gets_the_sandbox_defaults():
    old = ClaimedResources.from_mapping({"cpus": 2, "memory_mb": 4096, "gpus": 0})
    limits = build_limits(old, wall_time_s=60.0)
    defaults = SandboxLimits()
    assert (limits.pids, limits.shm_mb, limits.tmp_mb, limits.output_mb) == (
        defaults.pids, defaults.shm_mb, defaults.tmp_mb, defaults.output_mb)
    assert defaults.pids <= 128  # a fork bomb under the default starved a 2-core host at 256
