"""The container settings the sandbox driver builds: every limit and lock, without Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.sandbox_config import (
    SandboxLimits,
    SandboxSpec,
    build_container_kwargs,
    default_code_dir,
)

MB = 1024 * 1024


@pytest.fixture
def spec(tmp_path: Path) -> SandboxSpec:
    return SandboxSpec(image="metadl-arena/sandbox:cpu", command=["python3", "-m", "runner"],
                       submission_dir=tmp_path / "sub", bundle_dir=tmp_path / "bundle",
                       output_dir=tmp_path / "out", code_dir=tmp_path / "code",
                       env={"OMP_NUM_THREADS": "2", "ARENA_STAGE": "test"})


LIMITS = SandboxLimits(memory_mb=2048, cpus=1.5, pids=128, shm_mb=64, tmp_mb=32, output_mb=100,
                       wall_time_s=60.0, log_cap_bytes=1000)


def test_every_lock_and_limit_is_set(spec):
    kwargs = build_container_kwargs(spec, LIMITS)
    assert kwargs["network_mode"] == "none"
    assert kwargs["read_only"] is True
    assert kwargs["user"] == "1000:1000"
    assert kwargs["cap_drop"] == ["ALL"]
    assert "cap_add" not in kwargs
    assert kwargs["security_opt"] == ["no-new-privileges:true"]
    assert kwargs["privileged"] is False
    assert kwargs["ipc_mode"] == "private"
    assert "pid_mode" not in kwargs and "userns_mode" not in kwargs
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 2048 * MB
    assert kwargs["nano_cpus"] == 1_500_000_000
    assert kwargs["pids_limit"] == 128
    assert kwargs["shm_size"] == 64 * MB
    assert kwargs["tmpfs"] == {"/tmp": "rw,nosuid,nodev,exec,size=32m,mode=1777"}
    assert kwargs["log_config"]["Type"] == "none"
    assert kwargs["auto_remove"] is False


def test_ulimits_bound_open_files_and_forbid_core_dumps(spec):
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in build_container_kwargs(spec, LIMITS)
               ["ulimits"]}
    assert ulimits["core"] == (0, 0)
    assert ulimits["nofile"][0] == ulimits["nofile"][1] > 0


def test_no_gpu_means_no_device_request(spec):
    assert "device_requests" not in build_container_kwargs(spec, LIMITS)


@pytest.mark.parametrize("gpus", [("0",), ("1", "3"), ("GPU-1a2b3c4d",), (2,)])
def test_gpus_become_one_device_request_for_exactly_those_devices(spec, gpus):
    limits = SandboxLimits(gpus=gpus)
    (request,) = build_container_kwargs(spec, limits)["device_requests"]
    assert request["DeviceIDs"] == [str(g) for g in gpus]
    assert request["Capabilities"] == [["gpu"]]
    assert request.get("Count") in (None, 0)


def test_mounts_are_read_only_except_output(spec, tmp_path):
    mounts = {m["Target"]: m for m in build_container_kwargs(spec, LIMITS)["mounts"]}
    assert set(mounts) == {"/submission", "/bundle", "/output", "/opt/arena/submission_api"}
    assert {t for t, m in mounts.items() if not m["ReadOnly"]} == {"/output"}
    assert all(m["Type"] == "bind" for m in mounts.values())
    assert mounts["/submission"]["Source"] == str((tmp_path / "sub").resolve())
    assert mounts["/opt/arena/submission_api"]["Source"] == str((tmp_path / "code").resolve())
    assert mounts["/output"]["Source"] == str((tmp_path / "out").resolve())


def test_output_source_replaces_the_output_folder(spec, tmp_path):
    mounts = build_container_kwargs(spec, LIMITS, output_source=tmp_path / "mnt")["mounts"]
    assert {m["Target"]: m["Source"] for m in mounts}["/output"] == str(tmp_path / "mnt")


def test_default_code_mount_is_the_submission_api_package_only(tmp_path):
    spec = SandboxSpec(image="i", command=["true"], submission_dir=tmp_path,
                       bundle_dir=tmp_path, output_dir=tmp_path)
    mounts = {m["Target"]: m["Source"] for m in build_container_kwargs(spec, LIMITS)["mounts"]}
    assert mounts["/opt/arena/submission_api"] == str(default_code_dir())
    assert Path(mounts["/opt/arena/submission_api"]).name == "submission_api"


def test_environment_is_the_spec_allowlist_plus_fixed_values(spec, monkeypatch):
    monkeypatch.setenv("ARENA_DATABASE_URL", "postgres://secret")
    env = build_container_kwargs(spec, LIMITS)["environment"]
    assert env == {"OMP_NUM_THREADS": "2", "ARENA_STAGE": "test", "PYTHONPATH": "/opt/arena",
                   "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize("key", ["AWS_SECRET_ACCESS_KEY", "PATH", "LD_PRELOAD",
                                 "ARENA_RUN_TOKEN", "ARENA_API_KEY", "DATABASE_URL"])
def test_variables_outside_the_allowlist_or_secret_like_are_refused(tmp_path, key):
    with pytest.raises(ValueError, match=key):
        SandboxSpec(image="i", command=["true"], submission_dir=tmp_path, bundle_dir=tmp_path,
                    output_dir=tmp_path, env={key: "x"})


@pytest.mark.parametrize("field, value", [
    ("memory_mb", 0), ("memory_mb", 1.5), ("cpus", 0), ("cpus", -1.0), ("pids", 0),
    ("wall_time_s", 0), ("log_cap_bytes", -1), ("output_mb", True), ("gpus", "0"),
    ("network", True),
])
def test_invalid_limits_are_refused_with_the_field_name(field, value):
    with pytest.raises(ValueError, match=field):
        SandboxLimits(**{field: value})


def test_limits_are_frozen():
    with pytest.raises(AttributeError):
        LIMITS.memory_mb = 1  # type: ignore[misc]


@pytest.mark.parametrize("command", [[], "", ["python3", 3]])
def test_a_bad_command_is_refused(tmp_path, command):
    with pytest.raises(ValueError, match="command"):
        SandboxSpec(image="i", command=command, submission_dir=tmp_path, bundle_dir=tmp_path,
                    output_dir=tmp_path)


def test_container_name_is_passed_when_given(tmp_path):
    spec = SandboxSpec(image="i", command=["true"], submission_dir=tmp_path,
                       bundle_dir=tmp_path, output_dir=tmp_path, name="arena-run-7")
    assert build_container_kwargs(spec, LIMITS)["name"] == "arena-run-7"
