"""The meta-test sandbox's seccomp profile (worker/sandbox_seccomp.py): what the generated JSON
allows and denies, and, in a real container, that it lets our setup make a task's namespaces and
tmpfs mounts while everything Docker's default profile blocks stays blocked."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from submission_api.runner import namespaces
from worker import sandbox_seccomp as profile_module
from worker.sandbox import SandboxLimits, SandboxSpec, run_sandbox
from worker.sandbox_config import build_container_kwargs

IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")
pytestmark = [pytest.mark.integration, pytest.mark.docker]


def rules_for(profile: dict, name: str) -> list[dict]:
    return [rule for rule in profile["syscalls"] if name in rule["names"]]


def test_the_profile_denies_by_default_and_never_allows_what_docker_blocks():
    profile = profile_module.build_profile()

    assert (profile["defaultAction"], profile["defaultErrnoRet"]) == ("SCMP_ACT_ERRNO",
                                                                      errno.EPERM)
    assert not profile_module.ALLOWED & profile_module.BLOCKED
    for name in profile_module.BLOCKED:
        assert rules_for(profile, name) == [], name
    # Never unconditionally: namespaces and mounts only with the exact flags of our setup.
    for name in profile_module.FILTERED:
        assert name not in profile_module.ALLOWED
        assert all(rule.get("args") for rule in rules_for(profile, name)), name


def test_unshare_and_mount_take_only_the_flags_of_the_task_setup():
    profile = profile_module.build_profile()

    unshare = [rule["args"] for rule in rules_for(profile, "unshare")]
    assert unshare == [[{"index": 0, "value": flags, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]
                       for flags in profile_module.TASK_NAMESPACE_FLAGS]
    # The runner's unshare is one of them (one fact across the seam).
    assert namespaces.TASK_NAMESPACES in profile_module.TASK_NAMESPACE_FLAGS
    mount = [rule["args"] for rule in rules_for(profile, "mount")]
    assert [args[0]["index"] for args in mount] == [3, 3, 3]
    assert {args[0]["value"] for args in mount} == set(profile_module.MOUNT_FLAGS)
    [clone] = rules_for(profile, "clone")
    assert clone["args"] == [{"index": 0, "value": 0, "valueTwo": 0x7E020000,
                              "op": "SCMP_CMP_MASKED_EQ"}]
    [clone3] = rules_for(profile, "clone3")
    assert (clone3["action"], clone3["errnoRet"]) == ("SCMP_ACT_ERRNO", errno.ENOSYS)


def test_without_task_namespaces_the_profile_gives_what_dockers_default_gives():
    profile = profile_module.build_profile(task_namespaces=False)

    for name in ("unshare", "mount", "mount_setattr", "pivot_root", "umount2"):
        assert rules_for(profile, name) == [], name


def test_the_task_root_gets_pivot_root_and_only_a_detaching_umount2():
    """Docker's list blocks both (they left BLOCKED for this): the task's root needs them
    (runner/task_root.py); participant code loses them again (runner/seccomp.py)."""
    profile = profile_module.build_profile()

    assert {"pivot_root", "umount2"} == profile_module.TASK_ROOT_CALLS
    assert not profile_module.TASK_ROOT_CALLS & profile_module.BLOCKED
    [umount2] = rules_for(profile, "umount2")
    assert umount2["args"] == [{"index": 1, "value": 2, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]
    [pivot_root] = rules_for(profile, "pivot_root")
    assert "args" not in pivot_root


def test_only_the_meta_test_container_gets_the_profile(tmp_path: Path):
    def options(**extra: bool) -> list[str]:
        spec = SandboxSpec(image="i", command=("python3",), submission_dir=tmp_path,
                           bundle_dir=None, output_dir=tmp_path, **extra)
        return build_container_kwargs(spec, SandboxLimits())["security_opt"]

    assert options() == ["no-new-privileges:true"]
    seccomp = [o for o in options(task_namespaces=True) if o.startswith("seccomp=")]
    assert len(seccomp) == 1
    assert json.loads(seccomp[0].removeprefix("seccomp=")) == profile_module.build_profile()


PROBE = r"""
import ctypes, json, os
from pathlib import Path
from submission_api.runner import namespaces
libc = ctypes.CDLL(None, use_errno=True)

def errno_of(result):
    return ctypes.get_errno() if result != 0 else 0

def in_child(work):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, json.dumps(work()).encode())
        os._exit(0)
    os.close(write)
    text = os.read(read, 65536)
    os.waitpid(pid, 0)
    return json.loads(text)

results = {
    "unshare user only": in_child(lambda: errno_of(libc.unshare(0x10000000))),
    "unshare uts": in_child(lambda: errno_of(libc.unshare(
        namespaces.TASK_NAMESPACES | 0x4000000))),
    "setns": errno_of(libc.setns(os.open("/proc/self/ns/ipc", os.O_RDONLY), 0)),
    "mount, other flags": errno_of(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None)),
    "umount2": errno_of(libc.umount2(b"/tmp", 0)),
    "umount2 detach, no capability": errno_of(libc.umount2(b"/tmp", 2)),
    "pivot_root, no capability": errno_of(libc.syscall(155, b"/tmp", b"/tmp")),
    "ptrace": errno_of(libc.ptrace(0, 0, None, None)),
    "keyctl": errno_of(libc.syscall(250, 0, 0, 0, 0)),
    "clone3": errno_of(libc.syscall(435, None, 0)),
    "task setup": in_child(lambda: namespaces.probe([Path("/tmp")], [Path("/submission")])),
}
print(json.dumps(results))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe uses x86_64 numbers")
def test_in_a_container_our_setup_works_and_the_rest_stays_blocked(docker_client,
                                                                   tmp_path: Path):
    submission, output = tmp_path / "submission", tmp_path / "output"
    submission.mkdir()
    (submission / "main.py").write_text(PROBE)
    spec = SandboxSpec(image=IMAGE, command=("python3", "/submission/main.py"),
                       submission_dir=submission, bundle_dir=None, output_dir=output,
                       task_namespaces=True)
    result = run_sandbox(docker_client, spec, SandboxLimits(memory_mb=256, wall_time_s=60.0))

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "unshare user only": errno.EPERM, "unshare uts": errno.EPERM, "setns": errno.EPERM,
        "mount, other flags": errno.EPERM, "umount2": errno.EPERM, "ptrace": errno.EPERM,
        "umount2 detach, no capability": errno.EPERM, "pivot_root, no capability": errno.EPERM,
        "keyctl": errno.EPERM, "clone3": errno.ENOSYS, "task setup": True}
